/**
 * `HeaderTap`: reads STREAMINFO as the bytes pass, for any split of the input, without holding
 * any chunk back.
 */
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { parseFlacStreamInfo, type FlacStreamInfo } from '../lib/audio/flac-decoder.js';
import { encodeFlac } from '../lib/audio/flac-encoder.js';
import { ProtocolError } from '../lib/errors.js';
import { HeaderTap } from '../lib/http/header-tap.js';

const pcm = Buffer.alloc(24000 * 2);
for (let i = 0; i < pcm.length / 2; i++) pcm.writeInt16LE(Math.round(8000 * Math.sin(i / 7)), i * 2);
const flac = encodeFlac(pcm, { sampleRate: 24000, channels: 1 });
const expected = parseFlacStreamInfo(flac)!;

function flacTap(incomplete?: () => Error, onHeader?: (header: FlacStreamInfo) => void): HeaderTap<FlacStreamInfo> {
  return new HeaderTap({ size: 42, parse: parseFlacStreamInfo, incomplete, onHeader });
}

/** Runs `chunks` through a tap; what came out and, in order, what was seen (`onHeader` calls, chunks). */
async function run(
  chunks: Buffer[],
  incomplete?: () => Error,
): Promise<{ out: Buffer; events: string[]; headers: FlacStreamInfo[]; tap: HeaderTap<FlacStreamInfo> }> {
  const events: string[] = [];
  const headers: FlacStreamInfo[] = [];
  const out: Buffer[] = [];
  const tap = flacTap(incomplete, (header) => {
    events.push('header');
    headers.push(header);
  });
  tap.on('data', (chunk: Buffer) => {
    events.push(`data ${chunk.length}`);
    out.push(chunk);
  });
  await pipeline(Readable.from(chunks, { objectMode: false }), tap);
  return { out: Buffer.concat(out), events, headers, tap };
}

describe('HeaderTap', () => {
  it.each([1, 2, 4, 5, 41, 42, 43, 100])('reads STREAMINFO across chunks of %i bytes, announcing it once before the chunk that completed it', async (size) => {
    const chunks: Buffer[] = [];
    for (let i = 0; i < 200; i += size) chunks.push(flac.subarray(i, Math.min(i + size, 200)));
    const { out, events, headers } = await run(chunks);
    expect(out.equals(flac.subarray(0, 200))).toBe(true);
    expect(headers).toEqual([expected]);
    const completing = chunks.findIndex((_, i) => chunks.slice(0, i + 1).reduce((n, c) => n + c.length, 0) >= 42);
    expect(events.indexOf('header')).toBe(completing);
    expect(events.filter((e) => e.startsWith('data')).map((e) => Number(e.slice(5)))).toEqual(chunks.map((c) => c.length));
  });

  it('passes each chunk on at once, before the header is complete', async () => {
    const tap = flacTap();
    const first = once(tap, 'data');
    tap.write(flac.subarray(0, 10));
    const [chunk] = (await first) as [Buffer];
    expect(chunk.equals(flac.subarray(0, 10))).toBe(true);
    expect(tap.header).toBeUndefined();
    const second = once(tap, 'data');
    tap.write(flac.subarray(10, 50));
    await second;
    expect(tap.header).toEqual(expected);
    tap.destroy();
  });

  it('does not keep the caller’s buffer: changing it afterwards changes nothing read', async () => {
    const headers: FlacStreamInfo[] = [];
    const tap = flacTap(undefined, (header) => headers.push(header));
    tap.resume();
    const head = Buffer.from(flac.subarray(0, 20));
    tap.write(head);
    head.fill(0);
    const passed = once(tap, 'data');
    tap.write(flac.subarray(20, 60));
    await passed;
    expect(headers).toEqual([expected]);
    tap.destroy();
  });

  it('fails with the parser’s error when the bytes are not the container, passing nothing on', async () => {
    const tap = flacTap();
    const seen: Buffer[] = [];
    tap.on('data', (chunk: Buffer) => seen.push(chunk));
    const err = await pipeline(Readable.from([Buffer.from('RIFF....WAVEfmt ')]), tap).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as Error).message).toBe('Not a FLAC stream: the data does not start with "fLaC".');
    expect(seen).toEqual([]);
  });

  it.each([0, 10, 41])('an input of %i bytes fails with incomplete() when given', async (length) => {
    const err = await run([flac.subarray(0, length)], () => new ProtocolError('short')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as Error).message).toBe('short');
  });

  it('an input shorter than the header just ends without incomplete()', async () => {
    const { out, headers, tap } = await run([flac.subarray(0, 30)]);
    expect(out.equals(flac.subarray(0, 30))).toBe(true);
    expect(headers).toEqual([]);
    expect(tap.header).toBeUndefined();
  });
});
