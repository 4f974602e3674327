/** Running a byte Transform over some input cut into pieces, and collecting what it emits. */
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** A Writable that keeps every chunk it is given, in order. */
export function collector(chunks: Buffer[]): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
}

/**
 * Feeds `input` through `stream` in pieces (a fixed size, or sizes chosen per piece by
 * `size(index)`), and resolves to everything it emitted, concatenated.
 */
export async function runChunked(stream: NodeJS.ReadWriteStream, input: Buffer, size: number | ((index: number) => number)): Promise<Buffer> {
  const next = typeof size === 'number' ? () => size : size;
  const chunks: Buffer[] = [];
  function* pieces() {
    for (let offset = 0, index = 0; offset < input.length; index++) {
      const n = Math.max(1, next(index));
      yield input.subarray(offset, offset + n);
      offset += n;
    }
  }
  await pipeline(Readable.from(pieces()), stream, collector(chunks));
  return Buffer.concat(chunks);
}
