/**
 * `sniffOther` and `judgePcm16` (lib/audio/headerless.ts): what headerless bytes evidently are
 * when they are not audio, and whether bytes read as PCM16 look like sound. Real files where the
 * type has one (PNG and gzip made with zlib, this repository's README, the speech fixture);
 * signatures alone for the types the module only names.
 */
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { OTHER_SNIFF_BYTES, PCM16_JUDGED_BYTES, judgePcm16, sniffOther } from '../lib/audio/headerless.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { pngImage } from './helpers/png.js';

const fixture = loadSpeechFixture();
const readme = readFileSync(new URL('../README.md', import.meta.url));

/** PCM16 LE mono of `f(n)` for `n` samples. */
function pcm16(samples: number, f: (n: number) => number): Buffer {
  const out = Buffer.alloc(samples * 2);
  for (let n = 0; n < samples; n++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(f(n)))), 2 * n);
  return out;
}

describe('sniffOther: what headerless bytes evidently are', () => {
  it.each([
    { name: 'a PNG made with zlib', bytes: () => pngImage(), expected: 'a PNG image' },
    { name: 'the README (UTF-8 text)', bytes: () => readme, expected: 'text' },
    { name: 'JSON', bytes: () => Buffer.from('\n  {"segments": [{"text": "Hello"}]}\n'), expected: 'JSON' },
    { name: 'a JSON array with a UTF-8 BOM', bytes: () => Buffer.from('\ufeff[1, 2, 3]'), expected: 'JSON' },
    { name: 'HTML', bytes: () => Buffer.from('<!DOCTYPE html><html><body>Not audio</body></html>'), expected: 'HTML' },
    { name: 'XML', bytes: () => Buffer.from('<?xml version="1.0"?><a/>'), expected: 'XML' },
    { name: 'UTF-16LE text with a BOM', bytes: () => Buffer.from('\ufeffMeeting notes, second draft', 'utf16le'), expected: 'text (UTF-16LE)' },
    { name: 'UTF-16LE text without a BOM', bytes: () => Buffer.from(readme.toString('latin1', 0, 2000), 'utf16le'), expected: 'text (UTF-16LE)' },
    { name: 'a gzip file made with zlib', bytes: () => gzipSync(readme), expected: 'a gzip archive' },
    { name: 'a JPEG signature', bytes: () => Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46]), expected: 'a JPEG image' },
    { name: 'a GIF signature', bytes: () => Buffer.from('GIF89a\x08\x00\x08\x00', 'latin1'), expected: 'a GIF image' },
    { name: 'a PDF signature', bytes: () => Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3', 'latin1'), expected: 'a PDF document' },
    { name: 'an ELF executable (this node)', bytes: () => readFileSync(process.execPath).subarray(0, 4096), expected: 'an ELF executable' },
  ])('$name: $expected', ({ bytes, expected }) => {
    expect(sniffOther(bytes(), true)).toBe(expected);
  });

  it('a multi-byte character cut by the end of a head that is not the whole input is still text', () => {
    const text = Buffer.from('Grüße aus Köln. '.repeat(400));
    // A head ending with the first byte of a two-byte character (0xC3), near the sniffed length.
    const lead = text.lastIndexOf(0xc3, OTHER_SNIFF_BYTES - 1);
    const head = text.subarray(0, lead + 1);
    expect(() => new TextDecoder('utf-8', { fatal: true }).decode(head)).toThrow();
    expect(sniffOther(head, false)).toBe('text');
    // The same bytes as the whole input are not valid UTF-8: not text.
    expect(sniffOther(head, true)).toBeUndefined();
  });

  it.each([
    { name: 'speech (PCM16)', bytes: () => fixture.pcm.subarray(20_000, 20_000 + OTHER_SNIFF_BYTES) },
    { name: 'digital silence', bytes: () => Buffer.alloc(OTHER_SNIFF_BYTES) },
    { name: 'random bytes', bytes: () => randomBytes(OTHER_SNIFF_BYTES) },
    { name: 'text with NUL bytes in it', bytes: () => Buffer.from('name\0value\0'.repeat(50)) },
  ])('$name: nothing it recognises', ({ bytes }) => {
    expect(sniffOther(bytes(), true)).toBeUndefined();
  });
});

describe('judgePcm16: whether bytes read as PCM16 look like sound', () => {
  it('every window of the speech fixture looks like sound: correlation between samples above 0.8', () => {
    for (let offset = 0; offset + PCM16_JUDGED_BYTES <= fixture.pcm.length; offset += 32_768) {
      const judged = judgePcm16(fixture.pcm.subarray(offset, offset + PCM16_JUDGED_BYTES));
      expect(judged.plausible).toBe(true);
      expect(judged.correlation).toBeGreaterThan(0.8);
    }
  });

  it.each([
    { name: 'random bytes', bytes: () => randomBytes(PCM16_JUDGED_BYTES) },
    { name: 'compressed data (gzip of the README)', bytes: () => gzipSync(readme).subarray(10) },
    {
      name: 'the speech fixture byte-swapped (s16be read as s16le)',
      bytes: () => Buffer.from(fixture.pcm.subarray(20_000, 20_000 + PCM16_JUDGED_BYTES)).swap16(),
    },
    { name: 'a 10 kHz tone at 24 kHz (a documented false negative)', bytes: () => pcm16(16_384, (n) => 8000 * Math.sin((2 * Math.PI * 10_000 * n) / 24_000)) },
  ])('$name: not sound', ({ bytes }) => {
    const judged = judgePcm16(bytes());
    expect(judged.plausible).toBe(false);
    expect(judged.correlation).toBeLessThan(0.3);
    expect(judged.levelDbfs).toBeGreaterThan(-50);
  });

  it.each([
    { name: 'digital silence', bytes: () => Buffer.alloc(8192), level: -Infinity },
    { name: 'a noise floor at -60 dBFS', bytes: () => pcm16(8192, () => (Math.random() * 2 - 1) * 50), level: -60 },
    { name: 'a 440 Hz tone', bytes: () => pcm16(8192, (n) => 10_000 * Math.sin((2 * Math.PI * 440 * n) / 24_000)), level: -10 },
  ])('$name: sound', ({ bytes, level }) => {
    const judged = judgePcm16(bytes());
    expect(judged.plausible).toBe(true);
    if (level === -Infinity) expect(judged.levelDbfs).toBe(-Infinity);
    else expect(judged.levelDbfs).toBeCloseTo(level, -1);
  });

  it('fewer than 256 samples are not judged: random bytes pass', () => {
    expect(judgePcm16(randomBytes(510)).plausible).toBe(true);
    expect(judgePcm16(randomBytes(512)).plausible).toBe(false);
  });
});
