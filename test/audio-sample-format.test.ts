import { describe, expect, it } from 'vitest';
import { SampleFormatTransform, floatToInt16, int16ToFloat, type PcmSampleFormat } from '../lib/audio/sample-format.js';
import { ValidationError } from '../lib/errors.js';
import { runChunked } from './helpers/streams.js';

const run = runChunked;

function allInt16(format: 's16le' | 's16be'): Buffer {
  const b = Buffer.alloc(65536 * 2);
  for (let v = -32768; v <= 32767; v++) {
    if (format === 's16le') b.writeInt16LE(v, (v + 32768) * 2);
    else b.writeInt16BE(v, (v + 32768) * 2);
  }
  return b;
}

function floats(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeFloatLE(v, i * 4));
  return b;
}

describe('scaling', () => {
  it.each([
    [0, 0],
    [1.0, 32767], // clipped
    [-1.0, -32768],
    [0.5, 16384],
    [-0.5, -16384],
    [2.5, 32767],
    [-7, -32768],
    [1 / 32768, 1],
    [0.4 / 32768, 0],
    [0.5 / 32768, 1], // half away from zero
    [-0.5 / 32768, -1],
    [Number.NaN, 0],
    [Number.POSITIVE_INFINITY, 32767],
    [Number.NEGATIVE_INFINITY, -32768],
  ])('float %f -> int16 %i', (x, v) => {
    expect(floatToInt16(x)).toBe(v);
  });

  it('int16 -> float -> int16 is lossless for every value, and the float stays in [-1, 1)', () => {
    const bad: number[] = [];
    for (let v = -32768; v <= 32767; v++) {
      const x = Math.fround(int16ToFloat(v)); // as stored in f32le
      if (floatToInt16(x) !== v || x < -1 || x >= 1) bad.push(v);
    }
    expect(bad).toEqual([]);
    expect(int16ToFloat(-32768)).toBe(-1);
    expect(int16ToFloat(16384)).toBe(0.5);
  });
});

const CHUNKS = [1, 3, 5, 480, 1 << 20];

describe('conversions between every pair, any chunking', () => {
  const le = allInt16('s16le');
  const be = allInt16('s16be');
  const f32 = (() => {
    const b = Buffer.alloc(65536 * 4);
    for (let v = -32768; v <= 32767; v++) b.writeFloatLE(v / 32768, (v + 32768) * 4);
    return b;
  })();
  const data: Record<PcmSampleFormat, Buffer> = { s16le: le, s16be: be, f32le: f32 };
  const pairs: [PcmSampleFormat, PcmSampleFormat][] = [
    ['s16le', 's16be'],
    ['s16be', 's16le'],
    ['s16le', 'f32le'],
    ['f32le', 's16le'],
    ['s16be', 'f32le'],
    ['f32le', 's16be'],
    ['s16le', 's16le'],
  ];
  for (const [from, to] of pairs) {
    it.each(CHUNKS)(`${from} -> ${to}, chunks of %i bytes`, async (size) => {
      const out = await run(new SampleFormatTransform({ from, to }), data[from], size);
      expect(out.equals(data[to])).toBe(true);
    });
  }
});

describe('clipping on the way to int16', () => {
  it('clips out-of-range floats and maps NaN to 0', async () => {
    const out = await run(new SampleFormatTransform({ from: 'f32le', to: 's16le' }), floats([1.5, -1.5, 1, -1, Number.NaN, 0.25]), 3);
    expect([0, 2, 4, 6, 8, 10].map((i) => out.readInt16LE(i))).toEqual([32767, -32768, 32767, -32768, 0, 8192]);
  });

  it('drops a partial float left at the end', async () => {
    const out = await run(new SampleFormatTransform({ from: 'f32le', to: 's16be' }), Buffer.concat([floats([0.5]), Buffer.from([1, 2])]), 5);
    expect([...out]).toEqual([0x40, 0x00]);
  });
});

describe('options', () => {
  it.each([
    [{ from: 'mulaw', to: 's16le' }, 'from'],
    [{ from: 's16le', to: 's24le' }, 'to'],
  ])('%j is refused naming %s and listing the formats', (options, field) => {
    let error: unknown;
    try {
      new SampleFormatTransform(options as never);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect((error as ValidationError).accepted).toBe('one of s16le, s16be, f32le');
  });
});
