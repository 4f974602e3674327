/**
 * Re-framing through a stream hop: `PcmChunker` cutting 16 MiB of PCM16 into 40 ms (1920-byte)
 * chunks, and into Discord's 20 ms frames of 48 kHz stereo (3840 bytes), and the packetizer of
 * the Discord and Opus streams (`FrameAssembler` in an object-mode Transform, as
 * `DiscordPlaybackAdapter` and `OpusPacketEncoder` use it) cutting the same 3840-byte frames;
 * all share the library's one re-framer (`FrameCutter`). Input pieces of 320 bytes (a 10 ms
 * frame at 16 kHz), 4 KiB, 64 KiB and 1 MiB. Two baselines, both carrying the
 * same bytes to the same consumer through a bare `PassThrough` hop at the finer of the two
 * granularities (the input pieces, or the output chunks when those are smaller: the least a
 * stream hop costs for the writes or the chunks the re-framer handles):
 * - the bare hop alone;
 * - the bare hop plus copying, into fresh buffers, the bytes that no re-framer can hand out
 *   without copying: the chunks that straddle two input pieces (all of them when the pieces
 *   are smaller than a chunk). A chunk handed to a consumer may be kept, so its memory cannot
 *   be reused: this is the floor for any re-framer that emits whole chunks.
 * Writes honour backpressure; the consumer counts bytes and chunks.
 */
import { once } from 'node:events';
import { PassThrough, Transform } from 'node:stream';
import { PcmChunker } from '../lib/audio/pcm-chunker.js';
import { FrameAssembler } from '../lib/audio/opus.js';
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

/** Writes every piece (honouring backpressure), consumes the output; returns [bytes, chunks]. */
async function through(stream: Transform, input: Buffer[]): Promise<[number, number]> {
  let bytes = 0;
  let chunks = 0;
  stream.on('data', (c: Buffer) => {
    bytes += c.length;
    chunks++;
  });
  const ended = once(stream, 'end');
  for (const piece of input) {
    if (!stream.write(piece)) await once(stream, 'drain');
  }
  stream.end();
  await ended;
  return [bytes, chunks];
}

/** The packetizer of the Discord and Opus streams, without the codec: 3840-byte frames out. */
function packetizer(): Transform {
  const frames = new FrameAssembler(3840);
  return new Transform({
    readableObjectMode: true,
    transform(chunk: Buffer, _encoding, callback) {
      frames.add(chunk, (frame) => this.push(frame));
      callback();
    },
    flush(callback) {
      frames.finish((frame) => this.push(frame));
      callback();
    },
  });
}

/** Bytes of the chunks of `chunkBytes` that straddle a boundary between pieces of `pieceBytes`. */
function straddlingBytes(total: number, pieceBytes: number, chunkBytes: number): number {
  let bytes = 0;
  for (let start = 0; start < total; start += chunkBytes) {
    const end = Math.min(total, start + chunkBytes);
    if (Math.floor(start / pieceBytes) !== Math.floor((end - 1) / pieceBytes)) bytes += end - start;
  }
  return bytes;
}

export default async function (): Promise<void> {
  const data = pcm(TOTAL_BYTES);
  for (const [label, make, chunkBytes, name] of [
    ['40 ms chunks of 24 kHz mono (1920 bytes)', () => new PcmChunker({ chunkMs: 40 }), 1920, 'PcmChunker'],
    ['20 ms frames of 48 kHz stereo (3840 bytes)', () => new PcmChunker({ chunkMs: 20, sampleRate: 48000, channels: 2 }), 3840, 'PcmChunker'],
    ['20 ms frames of 48 kHz stereo (3840 bytes)', packetizer, 3840, 'FrameAssembler'],
  ] as const) {
    for (const size of [320, 4096, 64 * 1024, 1024 * 1024]) {
      const input = pieces(data, size);
      const finer = pieces(data, Math.min(size, chunkBytes));
      const [bytes, chunks] = await through(make(), input);
      const expected = name === 'FrameAssembler' ? Math.ceil(TOTAL_BYTES / chunkBytes) * chunkBytes : TOTAL_BYTES;
      if (bytes !== expected || chunks !== Math.ceil(TOTAL_BYTES / chunkBytes)) {
        throw new Error(`${name} emitted ${bytes} bytes in ${chunks} chunks`);
      }
      const subject = { name: `${name} write + consume`, run: () => through(make(), input), units: TOTAL_BYTES };
      const options2 = { clock: 'cpu', rounds: 7, minRoundMs: 300 } as const;
      await compare(
        `${name}, 16 MiB in ${size}-byte pieces -> ${label}, vs the bare hop`,
        subject,
        { name: `PassThrough, ${Math.min(size, chunkBytes)}-byte pieces`, run: () => through(new PassThrough(), finer), units: TOTAL_BYTES },
        { ...options2, target: 1.5, label: `${name} ${size} B -> ${chunkBytes} B vs PassThrough` },
      );
      const copied = straddlingBytes(TOTAL_BYTES, size, chunkBytes);
      await compare(
        `${name}, 16 MiB in ${size}-byte pieces -> ${label}, vs the bare hop + the copies framing forces (${(copied / 1048576).toFixed(1)} MiB)`,
        subject,
        {
          name: `PassThrough, ${Math.min(size, chunkBytes)}-byte pieces, + ${copied} bytes copied into fresh chunks`,
          run: async () => {
            for (let at = 0; at < copied; at += chunkBytes) data.copy(Buffer.allocUnsafe(chunkBytes), 0, at, Math.min(copied, at + chunkBytes));
            return through(new PassThrough(), finer);
          },
          units: TOTAL_BYTES,
        },
        { ...options2, target: 1.5, label: `${name} ${size} B -> ${chunkBytes} B vs PassThrough + forced copies` },
      );
    }
  }
}
