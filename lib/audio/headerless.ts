/**
 * What headerless bytes are, for a reader that would otherwise take them as raw PCM: bytes that
 * no audio header identifies (`sniffAudio` said `unknown`) and that no description calls raw.
 *
 * - `sniffOther(head)` names bytes that are evidently something else: a file type known by its
 *   signature (PNG, JPEG, GIF, WebP, TIFF, PDF, ZIP, gzip, xz, bzip2, 7-Zip, zstd, ELF, Mach-O,
 *   SQLite; only signatures of 3 bytes or more, so that a sample value cannot be mistaken for
 *   one in practice), or text: UTF-8 (or UTF-16 with a byte order mark, or UTF-16LE/BE whose
 *   every other byte is zero) without NUL bytes and with at most 2% control characters besides
 *   tab, line feed, carriage return and form feed, named JSON, XML or HTML by its first
 *   characters. PCM16 sound is never such text: silence is NUL bytes, and 4 KiB of sound whose
 *   every byte is printable does not occur. A file shorter than a few bytes may pass for text.
 * - `judgePcm16(head)` says whether bytes read as PCM16 LE look like sound, by two statistics
 *   of up to `PCM16_JUDGED_BYTES`: the level (RMS) and the correlation of each sample with the
 *   next (lag-1 autocorrelation, mean removed). Sound sampled well above its bandwidth changes
 *   little from one sample to the next (speech at 24 kHz: 0.86 to 0.96); random or compressed
 *   bytes, text or PCM in another layout (s16be, f32le) read as s16le do not (about 0). Bytes
 *   pass when the correlation is at least 0.3, when they are near-silent (RMS at most -50 dBFS:
 *   digital silence, a noise floor) or when there are fewer than 256 samples to judge.
 *   Refused wrongly (false negatives): sound dominated by content above a quarter of the rate
 *   (a 10 kHz tone at 24 kHz), or white noise at a level above -50 dBFS. Accepted wrongly
 *   (false positives): smooth binary data (an uncompressed image, a table of slowly changing
 *   numbers), 8-bit audio read as 16-bit, data that is mostly zeros.
 *
 * Pure functions of the bytes given; the reader decides how many to give (see `openAudioSource`).
 */

/** Bytes `sniffOther` looks at: enough to call a file text. */
export const OTHER_SNIFF_BYTES = 4096;
/** Bytes `judgePcm16` looks at, at most (about 1.4 s of PCM16 mono at 24 kHz). */
export const PCM16_JUDGED_BYTES = 65_536;

/** Least lag-1 correlation of PCM16 that looks like sound. */
const MIN_CORRELATION = 0.3;
/** RMS at or below which PCM16 is near-silent: -50 dBFS of 32768. */
const QUIET_RMS = 32768 * 10 ** (-50 / 20);
/** Fewer samples than this are not judged. */
const MIN_JUDGED_SAMPLES = 256;
/** Largest share of control characters in text. */
const MAX_CONTROL_SHARE = 0.02;

/** Signatures of file types that are not audio, at offset 0 unless `at` says otherwise. */
const SIGNATURES: ReadonlyArray<{ name: string; bytes: readonly number[] | string; at?: number; also?: { bytes: string; at: number } }> = [
  { name: 'a PNG image', bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { name: 'a JPEG image', bytes: [0xff, 0xd8, 0xff] },
  { name: 'a GIF image', bytes: 'GIF87a' },
  { name: 'a GIF image', bytes: 'GIF89a' },
  { name: 'a WebP image', bytes: 'RIFF', also: { bytes: 'WEBP', at: 8 } },
  { name: 'a TIFF image', bytes: [0x49, 0x49, 0x2a, 0x00] },
  { name: 'a TIFF image', bytes: [0x4d, 0x4d, 0x00, 0x2a] },
  { name: 'a PDF document', bytes: '%PDF-' },
  { name: 'a ZIP archive', bytes: [0x50, 0x4b, 0x03, 0x04] },
  { name: 'a ZIP archive', bytes: [0x50, 0x4b, 0x05, 0x06] },
  { name: 'a gzip archive', bytes: [0x1f, 0x8b, 0x08] },
  { name: 'an xz archive', bytes: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00] },
  { name: 'a 7-Zip archive', bytes: [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c] },
  { name: 'a zstd archive', bytes: [0x28, 0xb5, 0x2f, 0xfd] },
  { name: 'a bzip2 archive', bytes: 'BZh' },
  { name: 'an ELF executable', bytes: [0x7f, 0x45, 0x4c, 0x46] },
  { name: 'a Mach-O executable', bytes: [0xcf, 0xfa, 0xed, 0xfe] },
  { name: 'a Mach-O executable', bytes: [0xce, 0xfa, 0xed, 0xfe] },
  { name: 'a SQLite database', bytes: 'SQLite format 3\0' },
];

function matches(head: Uint8Array, at: number, expected: readonly number[] | string): boolean {
  const length = expected.length;
  if (head.length < at + length) return false;
  for (let i = 0; i < length; i++) {
    const want = typeof expected === 'string' ? expected.charCodeAt(i) : expected[i]!;
    if (head[at + i] !== want) return false;
  }
  return true;
}

/** Control characters that text holds: tab, line feed, carriage return, form feed. */
function isTextControl(code: number): boolean {
  return code === 0x09 || code === 0x0a || code === 0x0d || code === 0x0c;
}

/**
 * `text` (decoded) as a kind of text, or undefined when it is not text: a NUL, or more than 2%
 * of other control characters.
 */
function textKind(text: string, encoding: string): string | undefined {
  if (text.length === 0) return undefined;
  let controls = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0) return undefined;
    if ((code < 0x20 && !isTextControl(code)) || code === 0x7f) controls++;
  }
  if (controls > text.length * MAX_CONTROL_SHARE) return undefined;
  const start = text.replace(/^\uFEFF/, '').trimStart();
  const suffix = encoding === 'UTF-8' ? '' : ` (${encoding})`;
  if (start.startsWith('{') || start.startsWith('[')) return `JSON${suffix}`;
  if (/^<\?xml/i.test(start)) return `XML${suffix}`;
  if (/^<(!doctype html|html)/i.test(start)) return `HTML${suffix}`;
  return `text${suffix}`;
}

/** Decodes `bytes` strictly; a multi-byte character cut by the end of an incomplete head is dropped. */
function decode(bytes: Uint8Array, encoding: 'utf-8' | 'utf-16le' | 'utf-16be', complete: boolean): string | undefined {
  let end = bytes.length;
  if (encoding !== 'utf-8') end -= end % 2;
  // Up to 3 bytes of a UTF-8 sequence (or a lone UTF-16 high surrogate) may be cut off.
  for (let cut = 0; cut <= (complete ? 0 : 4); cut += encoding === 'utf-8' ? 1 : 2) {
    try {
      return new TextDecoder(encoding, { fatal: true }).decode(bytes.subarray(0, end - cut));
    } catch {
      // try with fewer bytes
    }
  }
  return undefined;
}

/** True when at least 95% of the bytes at `parity` (0 or 1) are zero: ASCII text in UTF-16. */
function everyOtherZero(head: Uint8Array, parity: number): boolean {
  let zeros = 0;
  let count = 0;
  for (let i = parity; i < head.length; i += 2, count++) if (head[i] === 0) zeros++;
  return count >= 2 && zeros >= count * 0.95;
}

/**
 * What `head` (the first bytes of an input, at most `OTHER_SNIFF_BYTES` are looked at;
 * `complete` when they are the whole input) evidently is when it is not audio, in words such as
 * `a PNG image`, `JSON`, `text`; undefined when it is nothing this recognises.
 */
export function sniffOther(head: Uint8Array, complete = false): string | undefined {
  for (const signature of SIGNATURES) {
    if (matches(head, signature.at ?? 0, signature.bytes) && (!signature.also || matches(head, signature.also.at, signature.also.bytes))) {
      return signature.name;
    }
  }
  const window = head.subarray(0, OTHER_SNIFF_BYTES);
  const whole = complete && window.length === head.length;
  if (matches(window, 0, [0xff, 0xfe]) || (everyOtherZero(window, 1) && !everyOtherZero(window, 0))) {
    const text = decode(window, 'utf-16le', whole);
    return text === undefined ? undefined : textKind(text.replace(/^\uFEFF/, ''), 'UTF-16LE');
  }
  if (matches(window, 0, [0xfe, 0xff]) || (everyOtherZero(window, 0) && !everyOtherZero(window, 1))) {
    const text = decode(window, 'utf-16be', whole);
    return text === undefined ? undefined : textKind(text.replace(/^\uFEFF/, ''), 'UTF-16BE');
  }
  const text = decode(window, 'utf-8', whole);
  return text === undefined ? undefined : textKind(text, 'UTF-8');
}

/** `judgePcm16`'s verdict and the numbers behind it. */
export interface Pcm16Judgement {
  plausible: boolean;
  /** Samples judged. */
  samples: number;
  /** RMS relative to full scale, dBFS (-Infinity for digital silence). */
  levelDbfs: number;
  /** Lag-1 autocorrelation of the samples, mean removed (1 for a constant signal). */
  correlation: number;
}

/**
 * Whether `head`, read as PCM16 LE (mono or interleaved), looks like sound: see the module
 * comment for the rule and its risks. Looks at up to `PCM16_JUDGED_BYTES`.
 */
export function judgePcm16(head: Uint8Array): Pcm16Judgement {
  const bytes = head.subarray(0, Math.min(head.length, PCM16_JUDGED_BYTES));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const samples = bytes.length >> 1;
  let sum = 0;
  let squares = 0;
  for (let i = 0; i < samples; i++) {
    const x = view.getInt16(2 * i, true);
    sum += x;
    squares += x * x;
  }
  const rms = samples === 0 ? 0 : Math.sqrt(squares / samples);
  const levelDbfs = 20 * Math.log10(rms / 32768);
  const mean = samples === 0 ? 0 : sum / samples;
  let variance = 0;
  let lagged = 0;
  let previous = 0;
  for (let i = 0; i < samples; i++) {
    const x = view.getInt16(2 * i, true) - mean;
    variance += x * x;
    if (i > 0) lagged += x * previous;
    previous = x;
  }
  const correlation = variance === 0 ? 1 : lagged / variance;
  const plausible = samples < MIN_JUDGED_SAMPLES || rms <= QUIET_RMS || correlation >= MIN_CORRELATION;
  return { plausible, samples, levelDbfs, correlation };
}
