import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { createOpusCodec, isOpusBackendAvailable, OPUS_FRAME_BYTES } from '../lib/audio/opus.js';
import { DiscordReceiveAdapter } from '../lib/integrations/discord.js';

const backend = isOpusBackendAvailable('native') ? 'native' : 'opusscript';

/** 30 packets of a 48 kHz stereo tone, with RTP timestamps and a gap of 7 packets in the middle. */
function packets(): Array<{ packet: Buffer; timestamp: number }> {
  const codec = createOpusCodec({ backend });
  const out: Array<{ packet: Buffer; timestamp: number }> = [];
  for (let k = 0; k < 37; k++) {
    if (k >= 15 && k < 22) continue;
    const frame = Buffer.alloc(OPUS_FRAME_BYTES);
    for (let i = 0; i < 960; i++) {
      const v = Math.round(9000 * Math.sin((2 * Math.PI * 440 * (k * 960 + i)) / 48000));
      frame.writeInt16LE(v, i * 4);
      frame.writeInt16LE(v, i * 4 + 2);
    }
    out.push({ packet: codec.encode(frame), timestamp: k * 960 });
  }
  codec.close();
  return out;
}

async function receive(chunkMs: number | undefined): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  await pipeline(
    Readable.from(packets()),
    new DiscordReceiveAdapter({ opusBackend: backend, ...(chunkMs === undefined ? {} : { chunkMs }) }),
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        callback();
      },
    }),
  );
  return chunks;
}

describe('DiscordReceiveAdapter chunkMs', () => {
  it('pushes 100 ms chunks (the last one shorter) holding the same bytes as per-packet output', async () => {
    const each = await receive(undefined);
    const chunked = await receive(100);
    expect(Buffer.concat(chunked).equals(Buffer.concat(each))).toBe(true);
    expect(chunked.slice(0, -1).every((c) => c.length === 4800)).toBe(true);
    expect(chunked.at(-1)!.length).toBeLessThanOrEqual(4800);
    expect(each.length).toBeGreaterThan(chunked.length);
  });

  it('refuses a negative chunkMs naming the field', () => {
    expect(() => new DiscordReceiveAdapter({ opusBackend: backend, chunkMs: -1 })).toThrow(/chunkMs/);
  });
});
