/**
 * `PcmChunker` re-framing 16 MiB of PCM16 into 40 ms chunks, fed in realistic input pieces,
 * against the bound of its work: a plain `Buffer.copy` of the same pieces into one buffer.
 */
import { once } from 'node:events';
import { PcmChunker } from '../lib/audio/pcm-chunker.js';
import { compare } from './harness.js';

const TOTAL_BYTES = 16 * 1024 * 1024;

function pcm(length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let i = 0; i + 2 <= length; i += 2) out.writeInt16LE(Math.round(Math.sin(i / 50) * 12_000), i);
  return out;
}

function pieces(data: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < data.length; at += size) out.push(data.subarray(at, at + size));
  return out;
}

/** Writes every piece through a 40 ms chunker (honouring backpressure) and consumes the output. */
async function chunk(input: Buffer[]): Promise<number> {
  const chunker = new PcmChunker({ chunkMs: 40 });
  let bytes = 0;
  let chunks = 0;
  chunker.on('data', (c: Buffer) => {
    bytes += c.length;
    chunks++;
  });
  const ended = once(chunker, 'end');
  for (const piece of input) {
    if (!chunker.write(piece)) await once(chunker, 'drain');
  }
  chunker.end();
  await ended;
  if (bytes !== TOTAL_BYTES || chunks !== Math.ceil(TOTAL_BYTES / chunker.chunkBytes)) {
    throw new Error(`chunker emitted ${bytes} bytes in ${chunks} chunks, expected ${TOTAL_BYTES}`);
  }
  return bytes;
}

function copy(input: Buffer[], target: Buffer): number {
  let at = 0;
  for (const piece of input) at += piece.copy(target, at);
  return at;
}

export default async function (): Promise<void> {
  const data = pcm(TOTAL_BYTES);
  const target = Buffer.alloc(TOTAL_BYTES);
  for (const size of [4093, 64 * 1024]) {
    const input = pieces(data, size);
    await compare(
      `PcmChunker, 16 MiB PCM16 in ${size}-byte pieces -> 40 ms (1920-byte) chunks`,
      { name: 'PcmChunker write + consume', run: () => chunk(input), units: TOTAL_BYTES },
      { name: 'Buffer.copy of the same pieces', run: () => copy(input, target), units: TOTAL_BYTES },
    );
  }
}
