import { describe, expect, it } from 'vitest';
import {
  ALAW_DECODE_TABLE,
  G711Decoder,
  G711Encoder,
  MULAW_DECODE_TABLE,
  decodeAlaw,
  decodeMulaw,
  encodeAlaw,
  encodeMulaw,
  type G711Law,
} from '../lib/audio/g711.js';
import { ValidationError } from '../lib/errors.js';
import { runChunked } from './helpers/streams.js';

const run = runChunked;

/** Every int16 value, in order, as PCM16 LE. */
function allInt16(): Buffer {
  const b = Buffer.alloc(65536 * 2);
  for (let v = -32768; v <= 32767; v++) b.writeInt16LE(v, (v + 32768) * 2);
  return b;
}

/** Half the quantisation step at `x` for each law, per G.711's segment layout on the int16 grid. */
function mulawHalfStep(x: number): number {
  const m = Math.min(Math.abs(x), 32635) + 132;
  const segment = Math.floor(Math.log2(m)) - 7;
  return 2 ** (segment + 2);
}
function alawHalfStep(x: number): number {
  const m = Math.min(Math.abs(x), 32767);
  if (m < 512) return 8;
  return 2 ** (Math.floor(Math.log2(m)) - 7 + 2);
}

describe('G.711 code points from the standard', () => {
  it.each([
    [0xff, 0],
    [0x7f, 0],
    [0x80, 32124],
    [0x00, -32124],
    [0xfe, 8],
    [0x7e, -8],
    [0xef, 132], // segment 1, step 0: (16 + 0) * 16 + 8 - 132 = 132
    [0xf0, 120], // segment 0, step 15: 15 * 8 = 120
  ])('mu-law 0x%s decodes to %i', (code, value) => {
    expect(decodeMulaw(code)).toBe(value);
  });

  it.each([
    [0xd5, 8],
    [0x55, -8],
    [0xaa, 32256],
    [0x2a, -32256],
    [0xd4, 24], // segment 0, step 1
    [0xc5, 264], // segment 1, step 0
  ])('A-law 0x%s decodes to %i', (code, value) => {
    expect(decodeAlaw(code)).toBe(value);
  });

  it('encodes the reference points', () => {
    expect(encodeMulaw(0)).toBe(0xff);
    expect(encodeMulaw(32124)).toBe(0x80);
    expect(encodeMulaw(-32124)).toBe(0x00);
    expect(encodeMulaw(32767)).toBe(0x80); // overload clips to the largest code
    expect(encodeMulaw(-32768)).toBe(0x00);
    expect(encodeAlaw(0)).toBe(0xd5);
    expect(encodeAlaw(8)).toBe(0xd5);
    expect(encodeAlaw(-1)).toBe(0x55);
    expect(encodeAlaw(32767)).toBe(0xaa);
    expect(encodeAlaw(-32768)).toBe(0x2a);
    expect(encodeMulaw(Number.NaN)).toBe(0xff);
    expect(encodeAlaw(Number.NaN)).toBe(0xd5);
    expect(encodeMulaw(1e9)).toBe(0x80);
    expect(encodeAlaw(-1e9)).toBe(0x2a);
  });

  it('mu-law decode values follow the segment formula for all 256 codes, symmetric in sign', () => {
    for (let code = 0; code < 256; code++) {
      const bits = ~code & 0x7f;
      const segment = bits >> 4;
      const step = bits & 15;
      // G.711 Table 2a reconstruction values (14-bit: ((2*step+33) << segment) - 33), times 4.
      const magnitude = 4 * (((2 * step + 33) << segment) - 33);
      expect(MULAW_DECODE_TABLE[code]).toBe(code & 0x80 ? magnitude : 0 - magnitude || 0);
    }
  });

  it('A-law decode values follow the segment formula for all 256 codes', () => {
    for (let code = 0; code < 256; code++) {
      const bits = code ^ 0x55;
      const segment = (bits >> 4) & 7;
      const step = bits & 15;
      // G.711 Table 1a reconstruction values (13-bit: 2*step+1 in segment 0, (2*step+33) << (segment-1)), times 8.
      const magnitude = 8 * (segment === 0 ? 2 * step + 1 : (2 * step + 33) << (segment - 1));
      expect(ALAW_DECODE_TABLE[code]).toBe(bits & 0x80 ? magnitude : -magnitude);
    }
  });
});

describe.each<[G711Law, (x: number) => number, (c: number) => number, (x: number) => number, number]>([
  ['mulaw', encodeMulaw, decodeMulaw, mulawHalfStep, 32124],
  ['alaw', encodeAlaw, decodeAlaw, alawHalfStep, 32256],
])('%s round trip', (law, encode, decode, halfStep, peak) => {
  it('every int16 comes back within half a quantisation step (overload: the peak value)', () => {
    let worst = 0;
    for (let x = -32768; x <= 32767; x++) {
      const y = decode(encode(x));
      const err = Math.abs(y - x);
      const bound = Math.abs(x) > peak ? Math.max(halfStep(x), Math.abs(x) - peak) : halfStep(x);
      if (err > bound) throw new Error(`${law}: ${x} -> ${y}, error ${err} > ${bound}`);
      worst = Math.max(worst, err);
      if (!(Math.sign(y) === Math.sign(x) || y === 0 || Math.abs(x) <= 8)) throw new Error(`${law}: sign of ${x} -> ${y}`);
    }
    expect(worst).toBeLessThanOrEqual(law === 'mulaw' ? 644 : 512);
  });

  it('encoding is symmetric: -x differs from x only in the sign bit', () => {
    const asymmetric: number[] = [];
    for (let x = 1; x <= 32767; x++) if ((encode(-x) ^ encode(x)) !== 0x80) asymmetric.push(x);
    expect(asymmetric).toEqual([]);
  });

  it('decode then encode gives the code back (except negative zero of mu-law)', () => {
    for (let c = 0; c < 256; c++) {
      const again = encode(decode(c));
      expect(again).toBe(law === 'mulaw' && c === 0x7f ? 0xff : c);
    }
  });

  it('is monotonic: a larger input never gives a smaller decoded value', () => {
    let prev = -Infinity;
    const decreasing: number[] = [];
    for (let x = -32768; x <= 32767; x++) {
      const y = decode(encode(x));
      if (y < prev) decreasing.push(x);
      prev = y;
    }
    expect(decreasing).toEqual([]);
  });

  it.each([1, 3, 7, 160, 1 << 20])('Transforms give the same bytes as the pure functions, chunks of %i bytes', async (size) => {
    const pcm = allInt16();
    const encoded = await run(new G711Encoder({ law }), pcm, size);
    const expectedCodes = Buffer.alloc(65536);
    for (let i = 0; i < 65536; i++) expectedCodes[i] = encode(i - 32768);
    expect(encoded.equals(expectedCodes)).toBe(true);
    const decoded = await run(new G711Decoder({ law }), encoded, size);
    const expectedPcm = Buffer.alloc(65536 * 2);
    for (let i = 0; i < 65536; i++) expectedPcm.writeInt16LE(decode(expectedCodes[i]!), i * 2);
    expect(decoded.equals(expectedPcm)).toBe(true);
  });

  it('the encoder drops a lone trailing byte', async () => {
    const out = await run(new G711Encoder({ law }), Buffer.from([0, 0, 0x10, 0, 0x55]), 2);
    expect([...out]).toEqual([encode(0), encode(16)]);
  });
});

describe('G.711 options', () => {
  it('rejects an unknown law with a ValidationError naming the field', () => {
    let error: unknown;
    try {
      new G711Encoder({ law: 'ulaw' as G711Law });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('law');
    expect((error as ValidationError).message).toContain('mulaw, alaw');
  });
});
