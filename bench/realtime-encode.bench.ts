/**
 * The append-event encoding path (`encodeAudioAppend`: limit checks, base64, JSON framing)
 * against bare base64 encoding of the same bytes: the framing should cost little on top of the
 * base64 that any client of the service must do.
 */
import { randomBytes } from 'node:crypto';
import { compare } from './harness.js';
import { encodeAudioAppend } from '../lib/realtime/codec.js';

export default async function (): Promise<void> {
  for (const [label, chunkBytes] of [
    ['40 ms appends (1920 bytes)', 1920],
    ['1 s appends (48000 bytes)', 48_000],
    ['256 KiB appends (the limit)', 262_144],
  ] as const) {
    const total = 8 * 1024 * 1024;
    const source = randomBytes(total - (total % chunkBytes));
    const chunks: Buffer[] = [];
    for (let offset = 0; offset < source.length; offset += chunkBytes) chunks.push(source.subarray(offset, offset + chunkBytes));
    let sink = 0;
    await compare(
      `append-event encoding, 8 MiB of PCM16 in ${label}`,
      {
        name: 'encodeAudioAppend (checks + base64 + JSON)',
        units: source.length,
        run: () => {
          for (const chunk of chunks) sink += encodeAudioAppend(chunk).length;
        },
      },
      {
        name: 'bare Buffer.toString("base64")',
        units: source.length,
        run: () => {
          for (const chunk of chunks) sink += chunk.toString('base64').length;
        },
      },
    );
    if (sink === 0) throw new Error('unreachable: keeps the work observable');
  }
}
