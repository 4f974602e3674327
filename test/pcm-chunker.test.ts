import { once } from 'node:events';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { MAX_PCM_CHUNK_BYTES, PcmChunker, msForPcmBytes, pcmBytesForMs, type PartialFrameInfo, type PcmChunkerOptions } from '../lib/audio/pcm-chunker.js';
import { ValidationError } from '../lib/errors.js';

/** Deterministic 32-bit PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** `length` pseudo-random bytes, standing in for PCM (every byte value occurs). */
function pcmBytes(length: number, seed = 1): Buffer {
  const next = prng(seed);
  const out = Buffer.alloc(length);
  let i = 0;
  for (; i + 4 <= length; i += 4) out.writeUInt32LE(next(), i);
  for (; i < length; i++) out[i] = next() & 0xff;
  return out;
}

/** Views of `data` cut at the sizes `nextSize` gives (the last piece may be shorter). */
function cut(data: Buffer, nextSize: () => number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < data.length;) {
    const size = Math.max(1, nextSize());
    pieces.push(data.subarray(at, at + size));
    at += size;
  }
  return pieces;
}

interface Run {
  chunks: Buffer[];
  /** 'data:<bytes>', 'partial-frame', 'end' in the order they happened. */
  events: string[];
  partial: PartialFrameInfo[];
  chunker: PcmChunker;
}

/** Writes `pieces` through a new chunker with `pipeline` and collects everything it emits. */
async function run(options: PcmChunkerOptions, pieces: Iterable<Uint8Array>): Promise<Run> {
  const chunker = new PcmChunker(options);
  const chunks: Buffer[] = [];
  const events: string[] = [];
  const partial: PartialFrameInfo[] = [];
  chunker.on('partial-frame', (info) => {
    partial.push(info);
    events.push('partial-frame');
  });
  chunker.on('end', () => events.push('end'));
  // A Writable sink keeps chunk boundaries (async iteration of a byte stream merges buffered chunks).
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      events.push(`data:${chunk.length}`);
      callback();
    },
  });
  await pipeline(Readable.from(pieces), chunker, sink);
  return { chunks, events, partial, chunker };
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

function expectValidation(error: unknown, field: string): void {
  expect(error).toBeInstanceOf(ValidationError);
  const v = error as ValidationError;
  expect(v.code).toBe('RTT_VALIDATION');
  expect(v.field).toBe(field);
  expect(v.message).toContain(v.accepted);
}

const MiB = 1024 * 1024;
let fiveMiB: Buffer | undefined;
function fiveMiBPlus(extra: number): Buffer {
  fiveMiB ??= pcmBytes(5 * MiB + 3, 5);
  return fiveMiB.subarray(0, 5 * MiB + extra);
}

const formats = [
  { name: 'mono 24 kHz PCM16', options: {}, frame: 2, chunk: 1920, trailing: 1 },
  { name: 'stereo 48 kHz PCM16', options: { sampleRate: 48_000, channels: 2 }, frame: 4, chunk: 7680, trailing: 3 },
] as const;

const chunkings: { name: string; data: (trailing: number) => Buffer; sizes: (chunk: number) => () => number }[] = [
  { name: '1-byte writes', data: (t) => pcmBytes(20_000 + t, 11), sizes: () => () => 1 },
  { name: '3-byte writes', data: (t) => pcmBytes(60_000 + t, 12), sizes: () => () => 3 },
  { name: '7-byte writes', data: (t) => pcmBytes(60_000 + t, 13), sizes: () => () => 7 },
  {
    name: 'odd random sizes 1..4999 (seed 42)',
    data: (t) => pcmBytes(400_000 + t, 14),
    sizes: () => {
      const next = prng(42);
      return () => (next() % 2500) * 2 + 1;
    },
  },
  { name: 'exact chunk size writes', data: (t) => pcmBytes(40 * 7680 + t, 15), sizes: (chunk) => () => chunk },
  { name: '1 MiB writes', data: (t) => pcmBytes(3 * MiB + t, 16), sizes: () => () => MiB },
  { name: '5 MiB single write', data: (t) => fiveMiBPlus(t), sizes: () => () => 5 * MiB + 3 },
];

describe('PcmChunker re-framing', () => {
  describe.each(formats)('$name', (format) => {
    it.each(chunkings)('$name: output is the input minus the partial frame, in whole-frame chunks', async (c) => {
      const data = c.data(format.trailing);
      const { chunks, events, partial, chunker } = await run(format.options, cut(data, c.sizes(format.chunk)));

      expect(chunker.chunkBytes).toBe(format.chunk);
      expect(chunker.frameBytes).toBe(format.frame);
      const kept = data.length - format.trailing;
      expect(Buffer.concat(chunks).equals(data.subarray(0, kept))).toBe(true);
      expect(chunks.length).toBe(Math.ceil(kept / format.chunk));
      chunks.forEach((chunk, i) => {
        if (i < chunks.length - 1) expect(chunk.length).toBe(format.chunk);
        expect(chunk.length).toBeGreaterThan(0);
        expect(chunk.length % format.frame).toBe(0);
        expect(chunk.length).toBeLessThanOrEqual(MAX_PCM_CHUNK_BYTES);
      });
      expect(partial).toEqual([{ droppedBytes: format.trailing, frameBytes: format.frame }]);
      expect(chunker.droppedBytes).toBe(format.trailing);
      expect(events.slice(-2)).toEqual(['partial-frame', 'end']);
    });
  });

  it.each([
    { name: '1 MiB writes', pieces: MiB },
    { name: '5 MiB single write', pieces: 5 * MiB + 1 },
  ])('capped 256 KiB chunks with $name', async ({ pieces }) => {
    const data = fiveMiBPlus(1);
    const { chunks, chunker } = await run(
      { chunkMs: 10_000 },
      cut(data, () => pieces),
    );
    expect(chunker.chunkBytes).toBe(262_144);
    expect(Buffer.concat(chunks).equals(data.subarray(0, 5 * MiB))).toBe(true);
    expect(chunks.map((c) => c.length)).toEqual(Array<number>(20).fill(262_144));
  });

  it('emits whole frames shorter than a chunk at the end as a final shorter chunk', async () => {
    const data = pcmBytes(1920 * 2 + 1000, 3);
    const { chunks, partial, chunker } = await run({}, [data]);
    expect(chunks.map((c) => c.length)).toEqual([1920, 1920, 1000]);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(partial).toEqual([]);
    expect(chunker.droppedBytes).toBe(0);
  });

  it('emits nothing for an empty stream and ignores empty writes', async () => {
    const { chunks, partial } = await run({}, [Buffer.alloc(0), Buffer.alloc(0)]);
    expect(chunks).toEqual([]);
    expect(partial).toEqual([]);
  });

  it('handles 24-bit mono (3-byte frames) from 1-byte writes', async () => {
    const data = pcmBytes(3 * 1000 + 2, 4);
    const { chunks, partial } = await run(
      { bytesPerSample: 3, chunkBytes: 300 },
      cut(data, () => 1),
    );
    expect(chunks.map((c) => c.length)).toEqual(Array<number>(10).fill(300));
    expect(Buffer.concat(chunks).equals(data.subarray(0, 3000))).toBe(true);
    expect(partial).toEqual([{ droppedBytes: 2, frameBytes: 3 }]);
  });
});

describe('PcmChunker partial-frame policies', () => {
  it('drop: droppedBytes is 0 until the end, then the count, and the event comes before end', async () => {
    const chunker = new PcmChunker({ partialFrame: 'drop' });
    const order: string[] = [];
    chunker.on('partial-frame', (info) => order.push(`partial-frame:${info.droppedBytes}`));
    chunker.on('end', () => order.push('end'));
    const chunks: Buffer[] = [];
    chunker.on('data', (c: Buffer) => chunks.push(c));
    chunker.write(pcmBytes(2001, 5));
    expect(chunker.droppedBytes).toBe(0);
    chunker.end();
    await once(chunker, 'end');
    expect(chunker.droppedBytes).toBe(1);
    expect(order).toEqual(['partial-frame:1', 'end']);
    expect(chunks.map((c) => c.length)).toEqual([1920, 80]);
  });

  it.each([
    { name: 'trailing bytes in one write', pieces: (d: Buffer) => [d] },
    { name: 'trailing bytes across 1-byte writes', pieces: (d: Buffer) => cut(d, () => 1) },
  ])('pad: the last frame is completed with zero bytes ($name)', async ({ pieces }) => {
    const data = Buffer.alloc(7680 + 4 + 3, 0xab);
    const { chunks, partial, chunker } = await run({ sampleRate: 48_000, channels: 2, partialFrame: 'pad' }, pieces(data));
    expect(chunks.map((c) => c.length)).toEqual([7680, 8]);
    const last = chunks[1]!;
    expect([...last]).toEqual([0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0]);
    expect(Buffer.concat(chunks).subarray(0, data.length).equals(data)).toBe(true);
    expect(partial).toEqual([]);
    expect(chunker.droppedBytes).toBe(0);
  });

  it('pad: a lone partial frame becomes one zero-padded frame', async () => {
    const { chunks } = await run({ partialFrame: 'pad' }, [Buffer.from([0x7f])]);
    expect(chunks.map((c) => [...c])).toEqual([[0x7f, 0]]);
  });

  it.each([
    { name: 'mono PCM16, 1 trailing byte', options: {}, length: 1921, text: '1 trailing byte after' },
    { name: 'stereo PCM16, 3 trailing bytes', options: { channels: 2 }, length: 4003, text: '3 trailing bytes after' },
  ])('error: the stream fails with a ValidationError on input ($name)', async ({ options, length, text }) => {
    const error = await run({ ...options, partialFrame: 'error' }, [pcmBytes(length, 6)]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expectValidation(error, 'input');
    expect((error as ValidationError).message).toContain(text);
  });

  it('error: a stream of whole frames ends normally', async () => {
    const { chunks } = await run({ partialFrame: 'error' }, [pcmBytes(1922, 7)]);
    expect(chunks.map((c) => c.length)).toEqual([1920, 2]);
  });
});

describe('PcmChunker chunk size', () => {
  it.each([
    { name: 'defaults (40 ms, 24 kHz mono PCM16)', options: {}, expected: 1920 },
    { name: 'chunkMs 20 at 48 kHz stereo', options: { chunkMs: 20, sampleRate: 48_000, channels: 2 }, expected: 3840 },
    { name: 'chunkMs 0.3 at 10 kHz (decimal duration)', options: { chunkMs: 0.3, sampleRate: 10_000 }, expected: 6 },
    { name: 'chunkBytes 1921 rounded down to frames', options: { chunkBytes: 1921 }, expected: 1920 },
    { name: 'chunkBytes one frame', options: { chunkBytes: 2 }, expected: 2 },
    { name: 'chunkMs 10000 at 24 kHz mono capped', options: { chunkMs: 10_000 }, expected: 262_144 },
    { name: 'chunkMs 10000 at 48 kHz stereo capped', options: { chunkMs: 10_000, sampleRate: 48_000, channels: 2 }, expected: 262_144 },
    { name: 'chunkMs 10000 24-bit mono capped to 3-byte frames', options: { chunkMs: 10_000, bytesPerSample: 3 }, expected: 262_143 },
    { name: 'chunkBytes 1000000 capped', options: { chunkBytes: 1_000_000 }, expected: 262_144 },
    { name: 'maxChunkBytes 4001 caps 1 s to 4000', options: { chunkMs: 1000, maxChunkBytes: 4001 }, expected: 4000 },
    { name: 'maxChunkBytes above the request', options: { chunkBytes: 960, maxChunkBytes: 4000 }, expected: 960 },
  ])('$name gives $expected bytes', ({ options, expected }) => {
    expect(new PcmChunker(options).chunkBytes).toBe(expected);
  });

  it('exposes read-only getters', () => {
    const chunker = new PcmChunker({ channels: 2 });
    expect(thrown(() => ((chunker as unknown as { chunkBytes: number }).chunkBytes = 4))).toBeInstanceOf(TypeError);
    expect(thrown(() => ((chunker as unknown as { frameBytes: number }).frameBytes = 1))).toBeInstanceOf(TypeError);
    expect(thrown(() => ((chunker as unknown as { droppedBytes: number }).droppedBytes = 1))).toBeInstanceOf(TypeError);
    expect([chunker.chunkBytes, chunker.frameBytes, chunker.droppedBytes]).toEqual([3840, 4, 0]);
  });
});

describe('PcmChunker options', () => {
  it.each([
    { field: 'sampleRate', options: { sampleRate: 0 } },
    { field: 'sampleRate', options: { sampleRate: 24 } },
    { field: 'sampleRate', options: { sampleRate: 24_000.5 } },
    { field: 'sampleRate', options: { sampleRate: 800_000 } },
    { field: 'sampleRate', options: { sampleRate: '24000' } },
    { field: 'channels', options: { channels: 0 } },
    { field: 'channels', options: { channels: 1.5 } },
    { field: 'channels', options: { channels: 65 } },
    { field: 'bytesPerSample', options: { bytesPerSample: 16 } },
    { field: 'bytesPerSample', options: { bytesPerSample: 5 } },
    { field: 'bytesPerSample', options: { bytesPerSample: 0 } },
    { field: 'chunkMs', options: { chunkMs: 0 } },
    { field: 'chunkMs', options: { chunkMs: -40 } },
    { field: 'chunkMs', options: { chunkMs: Number.NaN } },
    { field: 'chunkMs', options: { chunkMs: Number.POSITIVE_INFINITY } },
    { field: 'chunkMs', options: { chunkMs: 60_001 } },
    { field: 'chunkMs', options: { chunkMs: '40' } },
    { field: 'chunkMs', options: { chunkMs: 0.01 } },
    { field: 'chunkBytes', options: { chunkBytes: 0 } },
    { field: 'chunkBytes', options: { chunkBytes: 1.5 } },
    { field: 'chunkBytes', options: { chunkBytes: 1 } },
    { field: 'chunkBytes', options: { chunkBytes: 3, channels: 2 } },
    { field: 'chunkBytes', options: { chunkBytes: 1920, chunkMs: 40 } },
    { field: 'maxChunkBytes', options: { maxChunkBytes: 262_145 } },
    { field: 'maxChunkBytes', options: { maxChunkBytes: 0 } },
    { field: 'maxChunkBytes', options: { maxChunkBytes: 1 } },
    { field: 'maxChunkBytes', options: { maxChunkBytes: 1024.5 } },
    { field: 'partialFrame', options: { partialFrame: 'truncate' } },
    { field: 'partialFrame', options: { partialFrame: true } },
    { field: 'options', options: null },
  ])('$field rejects $options', ({ field, options }) => {
    expectValidation(
      thrown(() => new PcmChunker(options as unknown as PcmChunkerOptions)),
      field,
    );
  });

  it('does not mutate the options object and forces byte mode', () => {
    const options = Object.freeze({
      chunkMs: 20,
      partialFrame: 'pad' as const,
      readableHighWaterMark: 4096,
      objectMode: true,
      decodeStrings: true,
    });
    const before = { ...options };
    const chunker = new PcmChunker(options as PcmChunkerOptions);
    expect(options).toEqual(before);
    expect(chunker.chunkBytes).toBe(960);
    expect(chunker.readableObjectMode).toBe(false);
    expect(chunker.writableObjectMode).toBe(false);
    expect(chunker.readableHighWaterMark).toBe(4096);
  });
});

describe('PcmChunker input types', () => {
  it('accepts Uint8Array input and emits Buffers sharing its memory', async () => {
    const bytes = new Uint8Array(pcmBytes(1920 * 3, 8));
    const { chunks } = await run({}, [bytes]);
    expect(chunks.every((c) => Buffer.isBuffer(c))).toBe(true);
    expect(chunks.map((c) => c.buffer === bytes.buffer)).toEqual([true, true, true]);
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
  });

  it.each([
    { name: 'a string', chunk: 'abcd', received: '"abcd"' },
    { name: 'a plain object', chunk: { audio: 'abcd' }, received: 'an object' },
    { name: 'a Map', chunk: new Map([['audio', 'abcd']]), received: 'an object (Map)' },
    { name: 'a number', chunk: 42, received: '42' },
  ])('rejects $name with a ValidationError through the write callback', async ({ chunk, received }) => {
    const chunker = new PcmChunker();
    const failures: unknown[] = [];
    chunker.on('error', (e) => failures.push(e));
    const closed = new Promise((resolve) => chunker.on('close', resolve));
    const fromCallback = await new Promise<unknown>((resolve) => {
      chunker.write(chunk, (e) => resolve(e));
    });
    expectValidation(fromCallback, 'input');
    expect((fromCallback as ValidationError).message).toContain(received);
    await closed;
    expect(failures).toEqual([fromCallback]);
    expect(chunker.destroyed).toBe(true);
  });

  it('fails a pipeline fed with objects with a ValidationError', async () => {
    const error = await pipeline(Readable.from([Buffer.alloc(4), { left: 1 }]), new PcmChunker(), async (source) => {
      for await (const chunk of source) void chunk;
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expectValidation(error, 'input');
  });
});

describe('PcmChunker copies', () => {
  it('emits chunks inside one large input buffer as views of it', async () => {
    const input = pcmBytes(MiB, 9);
    const { chunks } = await run({}, [input]);
    expect(chunks.length).toBe(Math.ceil(MiB / 1920));
    expect(chunks.every((c, i) => c.buffer === input.buffer && c.byteOffset === input.byteOffset + i * 1920)).toBe(true);
  });

  it('copies only the chunk that spans two input buffers', async () => {
    const first = pcmBytes(1920 * 100 + 1000, 10);
    const second = pcmBytes(1920 * 100, 11);
    const { chunks } = await run({}, [first, second]);
    const owners = chunks.map((c) => (c.buffer === first.buffer ? 'first' : c.buffer === second.buffer ? 'second' : 'copy'));
    expect(owners).toEqual([...Array<string>(100).fill('first'), 'copy', ...Array<string>(99).fill('second'), 'second']);
    expect(chunks[100]!.equals(Buffer.concat([first.subarray(192_000), second.subarray(0, 920)]))).toBe(true);
    expect(chunks.map((c) => c.length).slice(-2)).toEqual([1920, 1000]);
    expect(Buffer.concat(chunks).equals(Buffer.concat([first, second]))).toBe(true);
  });
});

describe('PcmChunker backpressure', () => {
  it('write() returns false with a paused consumer while buffered bytes stay bounded', async () => {
    const highWaterMark = 8192;
    const chunker = new PcmChunker({ highWaterMark });
    const piece = 1000;
    const data = pcmBytes(200 * piece, 12);
    let writes = 0;
    let accepted = true;
    while (accepted && writes < 200) {
      accepted = chunker.write(data.subarray(writes * piece, (writes + 1) * piece));
      writes++;
    }
    expect(accepted).toBe(false);
    expect(writes).toBeLessThan(40);
    expect(chunker.readableLength).toBeGreaterThanOrEqual(highWaterMark);
    expect(chunker.readableLength).toBeLessThanOrEqual(highWaterMark + chunker.chunkBytes);
    expect(chunker.writableLength).toBeLessThanOrEqual(highWaterMark + piece);

    const drained = once(chunker, 'drain');
    const chunks: Buffer[] = [];
    chunker.on('data', (chunk: Buffer) => chunks.push(chunk));
    await drained;
    chunker.end(data.subarray(writes * piece));
    await once(chunker, 'end');
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(chunks.slice(0, -1).every((c) => c.length === 1920)).toBe(true);
  });
});

describe('pcmBytesForMs / msForPcmBytes', () => {
  it.each([
    { ms: 40, format: {}, bytes: 1920 },
    { ms: 20, format: { sampleRate: 48_000, channels: 2 }, bytes: 3840 },
    { ms: 0.3, format: { sampleRate: 10_000 }, bytes: 6 },
    { ms: 0.05, format: {}, bytes: 2 },
    { ms: 0.04, format: {}, bytes: 0 },
    { ms: 0, format: {}, bytes: 0 },
    { ms: 1000, format: { sampleRate: 8000, bytesPerSample: 1 }, bytes: 8000 },
  ])('pcmBytesForMs($ms, $format) is $bytes', ({ ms, format, bytes }) => {
    expect(pcmBytesForMs(ms, format)).toBe(bytes);
  });

  it.each([
    { bytes: 1920, format: {}, ms: 40 },
    { bytes: 1921, format: {}, ms: 40 },
    { bytes: 3840, format: { sampleRate: 48_000, channels: 2 }, ms: 20 },
    { bytes: 3, format: { sampleRate: 48_000, channels: 2 }, ms: 0 },
    { bytes: 8000, format: { sampleRate: 8000, bytesPerSample: 1 }, ms: 1000 },
  ])('msForPcmBytes($bytes, $format) is $ms', ({ bytes, format, ms }) => {
    expect(msForPcmBytes(bytes, format)).toBe(ms);
  });

  it.each([
    { field: 'ms', call: () => pcmBytesForMs(-1) },
    { field: 'ms', call: () => pcmBytesForMs(Number.NaN) },
    { field: 'ms', call: () => pcmBytesForMs(1e300) },
    { field: 'sampleRate', call: () => pcmBytesForMs(40, { sampleRate: 0 }) },
    { field: 'bytes', call: () => msForPcmBytes(1.5) },
    { field: 'bytes', call: () => msForPcmBytes(-2) },
    { field: 'channels', call: () => msForPcmBytes(4, { channels: 0 }) },
  ])('rejects a bad $field', ({ field, call }) => {
    expectValidation(thrown(call), field);
  });
});
