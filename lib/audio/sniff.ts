/**
 * Audio container detection by the first bytes of a stream ("magic numbers"), for callers that
 * accept files of several kinds and must decide how to read each one.
 *
 * Policy:
 * - `wav`: `RIFF` or `RIFX`, then `WAVE` at byte 8 (read by `WavReader`).
 * - `ogg-opus`: an Ogg page (`OggS`) whose first packet starts with `OpusHead` (read by
 *   `OggOpusDecoder`).
 * - `flac`: native FLAC, `fLaC` (read by `FlacDecodeStream`).
 * - `foreign`: a container or codec the library does not decode but recognises, so that it
 *   can be named (MP3, MP4/M4A/MOV, Matroska/WebM, AAC in ADTS, AIFF, CAF, Ogg with another
 *   codec, RF64, AVI, FLV, ASF/WMA, AMR, Sun AU, MPEG program stream). An external decoder
 *   (ffmpeg) can read these.
 * - `unknown`: nothing recognised; a caller reading raw PCM treats it as such.
 *
 * Signatures that raw PCM could produce by chance are confirmed before they count: an MPEG
 * audio frame header (MP3 without an ID3 tag) or an ADTS header is only taken as such when a
 * second, consistent header follows exactly one frame later. To decide, the sniffer may ask for
 * more bytes (`needBytes`); a caller that cannot supply them (the stream ended) calls again
 * with `complete: true`, and an unconfirmed signature is then `unknown`.
 */

/** What `sniffAudio` found. */
export type SniffedKind = 'wav' | 'ogg-opus' | 'flac' | 'foreign' | 'unknown';

export interface SniffResult {
  kind: SniffedKind;
  /** A short name for messages, e.g. `WAV`, `Ogg/Opus`, `MP3`, `MP4/M4A/MOV`; `unknown` when none. */
  name: string;
}

/** Asks the caller for at least `needBytes` bytes of the stream's start (fewer if it ends). */
export interface SniffMore {
  needBytes: number;
}

/** Bytes to read before a first call: enough for every signature but the confirmed ones. */
export const SNIFF_BYTES = 64;

const UNKNOWN: SniffResult = Object.freeze({ kind: 'unknown', name: 'unknown' });

function ascii(head: Uint8Array, offset: number, text: string): boolean {
  if (head.length < offset + text.length) return false;
  for (let i = 0; i < text.length; i++) if (head[offset + i] !== text.charCodeAt(i)) return false;
  return true;
}

function bytes(head: Uint8Array, offset: number, values: readonly number[]): boolean {
  if (head.length < offset + values.length) return false;
  return values.every((v, i) => head[offset + i] === v);
}

/* MPEG audio (Layer III only: MP3) frame headers. */
const MP3_BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MP3_BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const MPEG_RATES: Record<number, readonly number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };

interface FrameHeader {
  /** Frame length in bytes. */
  length: number;
  /** Fields that must stay the same from one frame to the next. */
  key: number;
}

function mp3Frame(head: Uint8Array, at: number): FrameHeader | undefined {
  if (head.length < at + 4) return undefined;
  const b1 = head[at + 1]!;
  const b2 = head[at + 2]!;
  if (head[at] !== 0xff || (b1 & 0xe0) !== 0xe0) return undefined;
  const version = (b1 >> 3) & 3; // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5, 1: reserved
  const layer = (b1 >> 1) & 3; // 1: Layer III
  const bitrateIndex = b2 >> 4;
  const rateIndex = (b2 >> 2) & 3;
  if (version === 1 || layer !== 1 || bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return undefined;
  const bitrate = (version === 3 ? MP3_BITRATES_V1 : MP3_BITRATES_V2)[bitrateIndex]! * 1000;
  const rate = MPEG_RATES[version]![rateIndex]!;
  const padding = (b2 >> 1) & 1;
  const length = Math.floor(((version === 3 ? 144 : 72) * bitrate) / rate) + padding;
  return { length, key: (version << 4) | (layer << 2) | rateIndex };
}

function adtsFrame(head: Uint8Array, at: number): FrameHeader | undefined {
  if (head.length < at + 7) return undefined;
  const b1 = head[at + 1]!;
  if (head[at] !== 0xff || (b1 & 0xf6) !== 0xf0) return undefined; // sync, layer 00
  const rateIndex = (head[at + 2]! >> 2) & 0xf;
  if (rateIndex > 12) return undefined;
  const length = ((head[at + 3]! & 3) << 11) | (head[at + 4]! << 3) | (head[at + 5]! >> 5);
  const headerLength = (b1 & 1) === 1 ? 7 : 9;
  if (length <= headerLength) return undefined;
  return { length, key: (b1 << 8) | (head[at + 2]! & 0xfc) };
}

/**
 * A frame header at 0 confirmed by a consistent one right after it: the kind's result, a
 * request for more bytes, or undefined (not this kind).
 */
function confirmFrames(
  head: Uint8Array,
  complete: boolean,
  parse: (head: Uint8Array, at: number) => FrameHeader | undefined,
  result: SniffResult,
): SniffResult | SniffMore | undefined {
  const first = parse(head, 0);
  if (!first) return undefined;
  const need = first.length + 7;
  if (head.length < need) return complete ? undefined : { needBytes: need };
  const second = parse(head, first.length);
  return second && second.key === first.key ? result : undefined;
}

/** Names the codec of an Ogg stream from the first packet of its first page. */
function oggCodec(head: Uint8Array, complete: boolean): SniffResult | SniffMore {
  if (head.length < 27) return complete ? { kind: 'foreign', name: 'Ogg' } : { needBytes: 27 };
  const segments = head[26]!;
  const start = 27 + segments;
  if (head.length < start + 8) return complete ? { kind: 'foreign', name: 'Ogg' } : { needBytes: start + 8 };
  if (ascii(head, start, 'OpusHead')) return { kind: 'ogg-opus', name: 'Ogg/Opus' };
  if (ascii(head, start + 1, 'vorbis')) return { kind: 'foreign', name: 'Ogg/Vorbis' };
  if (ascii(head, start + 1, 'FLAC')) return { kind: 'foreign', name: 'Ogg/FLAC' };
  if (ascii(head, start, 'Speex   ')) return { kind: 'foreign', name: 'Ogg/Speex' };
  if (ascii(head, start + 1, 'theora')) return { kind: 'foreign', name: 'Ogg/Theora' };
  return { kind: 'foreign', name: 'Ogg' };
}

/**
 * Identifies the container of a stream from its first bytes (see the module comment for the
 * policy). `head` should hold `SNIFF_BYTES` bytes, or all of a shorter stream (then pass
 * `complete: true`). Returns `{ needBytes }` when a signature needs more bytes to be confirmed.
 */
export function sniffAudio(head: Uint8Array, complete = false): SniffResult | SniffMore {
  if (head.length < 12 && !complete) return { needBytes: 12 };
  if ((ascii(head, 0, 'RIFF') || ascii(head, 0, 'RIFX')) && ascii(head, 8, 'WAVE')) return { kind: 'wav', name: 'WAV' };
  if (ascii(head, 0, 'RF64') && ascii(head, 8, 'WAVE')) return { kind: 'foreign', name: 'RF64 WAV' };
  if (ascii(head, 0, 'RIFF') && ascii(head, 8, 'AVI ')) return { kind: 'foreign', name: 'AVI' };
  if (ascii(head, 0, 'fLaC')) return { kind: 'flac', name: 'FLAC' };
  if (ascii(head, 0, 'OggS')) return oggCodec(head, complete);
  if (ascii(head, 0, 'ID3')) return { kind: 'foreign', name: 'MP3' };
  if (ascii(head, 4, 'ftyp')) return { kind: 'foreign', name: 'MP4/M4A/MOV' };
  if (bytes(head, 0, [0x1a, 0x45, 0xdf, 0xa3])) return { kind: 'foreign', name: 'Matroska/WebM' };
  if (ascii(head, 0, 'FORM') && (ascii(head, 8, 'AIFF') || ascii(head, 8, 'AIFC'))) return { kind: 'foreign', name: 'AIFF' };
  if (ascii(head, 0, 'caff')) return { kind: 'foreign', name: 'CAF' };
  if (ascii(head, 0, '#!AMR')) return { kind: 'foreign', name: 'AMR' };
  if (ascii(head, 0, '.snd')) return { kind: 'foreign', name: 'Sun AU' };
  if (ascii(head, 0, 'FLV') && head[3] === 1) return { kind: 'foreign', name: 'FLV' };
  if (bytes(head, 0, [0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11])) return { kind: 'foreign', name: 'ASF/WMA' };
  if (bytes(head, 0, [0x00, 0x00, 0x01, 0xba])) return { kind: 'foreign', name: 'MPEG program stream' };
  const mp3 = confirmFrames(head, complete, mp3Frame, { kind: 'foreign', name: 'MP3' });
  if (mp3) return mp3;
  const adts = confirmFrames(head, complete, adtsFrame, { kind: 'foreign', name: 'AAC (ADTS)' });
  if (adts) return adts;
  return UNKNOWN;
}

/** True when `result` is a final answer rather than a request for more bytes. */
export function isSniffResult(result: SniffResult | SniffMore): result is SniffResult {
  return (result as SniffResult).kind !== undefined;
}
