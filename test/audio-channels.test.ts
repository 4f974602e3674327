import { describe, expect, it } from 'vitest';
import { ChannelMixTransform, averageInt16 } from '../lib/audio/channels.js';
import { ValidationError } from '../lib/errors.js';
import { runChunked } from './helpers/streams.js';

const run = runChunked;

function pcm(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 2);
  values.forEach((v, i) => b.writeInt16LE(v, i * 2));
  return b;
}

function samples(b: Buffer): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) out.push(b.readInt16LE(i));
  return out;
}

/** Deterministic pseudo-random int16 stereo frames, extremes included. */
function stereoNoise(frames: number): Buffer {
  const b = Buffer.alloc(frames * 4);
  let s = 12345;
  for (let i = 0; i < frames * 2; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    b.writeInt16LE(i < 8 ? [32767, 32767, -32768, -32768, 32767, -32768, -1, 0][i]! : (s >>> 16) - 32768, i * 2);
  }
  return b;
}

describe('averageInt16', () => {
  it.each([
    [1, 2, 2], // 1.5 -> 2 (even)
    [1, 0, 0], // 0.5 -> 0 (even)
    [-1, 0, 0], // -0.5 -> 0
    [-1, -2, -2], // -1.5 -> -2
    [3, 2, 2], // 2.5 -> 2
    [32767, 32767, 32767],
    [-32768, -32768, -32768],
    [32767, -32768, 0], // -0.5 -> 0
    [32767, 32766, 32766], // 32766.5 -> 32766
    [100, 200, 150],
  ])('(%i + %i) / 2 = %i', (a, b, expected) => {
    expect(averageInt16(a, b)).toBe(expected);
  });

  it('is unbiased: over many pairs the rounding errors cancel (floor would lose 1/4 per odd pair)', () => {
    let bias = 0;
    for (let a = -50; a <= 50; a++) for (let b = -50; b <= 50; b++) bias += averageInt16(a, b) - (a + b) / 2;
    expect(Math.abs(bias)).toBeLessThan(1);
  });
});

const CHUNKS = [1, 3, 5, 960 * 4, 1 << 20];

describe('stereo to mono', () => {
  const input = stereoNoise(4800);
  const expected = (() => {
    const out = Buffer.alloc(4800 * 2);
    for (let f = 0; f < 4800; f++) out.writeInt16LE(averageInt16(input.readInt16LE(f * 4), input.readInt16LE(f * 4 + 2)), f * 2);
    return out;
  })();

  it.each(CHUNKS)('averages each frame, chunks of %i bytes', async (size) => {
    const out = await run(new ChannelMixTransform({ from: 2, to: 1 }), input, size);
    expect(out.equals(expected)).toBe(true);
  });

  it('gives the exact values at the extremes, without clipping artefacts', async () => {
    const out = await run(new ChannelMixTransform({ from: 2, to: 1 }), pcm([32767, 32767, -32768, -32768, 32767, -32768, 1000, -999]), 4);
    expect(samples(out)).toEqual([32767, -32768, 0, 0]);
  });

  it('drops a partial frame left at the end', async () => {
    const out = await run(new ChannelMixTransform({ from: 2, to: 1 }), Buffer.concat([pcm([10, 20]), Buffer.from([1, 2, 3])]), 3);
    expect(samples(out)).toEqual([15]);
  });
});

describe('mono to stereo', () => {
  it.each(CHUNKS)('duplicates each sample into both channels, chunks of %i bytes', async (size) => {
    const mono = stereoNoise(2400); // read as 4800 mono samples
    const out = await run(new ChannelMixTransform({ from: 1, to: 2 }), mono, size);
    expect(out.length).toBe(mono.length * 2);
    const expected = Buffer.alloc(mono.length * 2);
    for (let i = 0; i < mono.length / 2; i++) {
      expected.writeInt16LE(mono.readInt16LE(i * 2), i * 4);
      expected.writeInt16LE(mono.readInt16LE(i * 2), i * 4 + 2);
    }
    expect(out.equals(expected)).toBe(true);
  });

  it('round trip mono -> stereo -> mono is lossless', async () => {
    const mono = stereoNoise(1000);
    const stereo = await run(new ChannelMixTransform({ from: 1, to: 2 }), mono, 333);
    const back = await run(new ChannelMixTransform({ from: 2, to: 1 }), stereo, 777);
    expect(back.equals(mono)).toBe(true);
  });
});

describe('same channel count', () => {
  it.each([1, 2])('%i -> %i passes bytes through', async (n) => {
    const input = stereoNoise(100);
    const out = await run(new ChannelMixTransform({ from: n, to: n }), input, 7);
    expect(out.equals(input)).toBe(true);
  });
});

describe('options', () => {
  it.each([
    [{ from: 3, to: 1 }, 'from'],
    [{ from: 2, to: 0 }, 'to'],
    [{ from: '2', to: 1 }, 'from'],
  ])('%j is refused naming %s', (options, field) => {
    let error: unknown;
    try {
      new ChannelMixTransform(options as never);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect((error as ValidationError).accepted).toBe('a channel count of 1 or 2');
  });
});
