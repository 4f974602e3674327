import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { PcmCache, encodeAs } from '../lib/emulator/http/audio.js';
import { AbortError, IntegrityError, ValidationError } from '../lib/errors.js';
import { LocalizationClient } from '../lib/http/client.js';
import { HttpAuthError, HttpTimeoutError, ServiceValidationError } from '../lib/http/errors.js';
import { TtsStreamReadable, sampleBytesOf, type TtsStreamResponseInfo } from '../lib/http/tts-stream-readable.js';
import type { OutputFormat } from '../lib/http/schemas.js';
import { KEY, clientFor, collect, control, emulator, ioTurns, logged, until } from './http-test-helpers.js';

const TEXT = 'The quick brown fox jumps over the lazy dog, twice over.';
const pcm = new PcmCache();
const expected = (format: OutputFormat, text = TEXT, rate = 24_000): Buffer => encodeAs(pcm.get(text, rate), format, rate).bytes;

let emu: RunningEmulator;
let client: LocalizationClient;

beforeAll(async () => {
  // Small chunks, so a stream arrives in many pieces that end mid-sample.
  emu = await emulator({ ttsStreamChunkMs: 20 });
  client = clientFor(emu);
});

afterAll(async () => {
  await client.close();
  await emu.close();
});

afterEach(async () => {
  vi.useRealTimers();
  await control(emu, 'DELETE', 'faults');
  await control(emu, 'DELETE', 'requests');
});

describe('formats', () => {
  it.each(['wav', 'flac', 'pcm_s16le', 'pcm_s16be', 'pcm_s32le', 'pcm_s32be', 'pcm_f32le', 'pcm_f32be'] as OutputFormat[])(
    '%s: the exact bytes, in whole samples for PCM',
    async (format) => {
      const stream = client.ttsStream({ text: TEXT, language: 'en-us', voiceId: 20_299, outputConfiguration: { format } });
      const response = new Promise<TtsStreamResponseInfo>((resolve) => stream.once('response', resolve));
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      const info = await response;
      expect(Buffer.concat(chunks).equals(expected(format))).toBe(true);
      const width = sampleBytesOf(format);
      expect(chunks.every((c) => c.length % width === 0)).toBe(true);
      expect(info.creditsRequired).toBe(TEXT.length);
      expect(stream.creditsRequired).toBe(TEXT.length);
      expect(stream.contentType).toBe(info.contentType);
      expect(info.statusCode).toBe(200);
      expect(stream.droppedBytes).toBe(0);
    },
  );

  it('content types follow the format', async () => {
    const types: Record<string, string | undefined> = {};
    for (const format of ['wav', 'flac', 'pcm_s16le'] as OutputFormat[]) {
      const stream = client.ttsStream({ text: 'abc', language: 'en-us', outputConfiguration: { format } });
      await collect(stream);
      types[format] = stream.contentType;
    }
    expect(types).toEqual({ wav: 'audio/wav', flac: 'audio/flac', pcm_s16le: 'audio/pcm;encoding=s16le;rate=24000;channels=1' });
  });

  it('without a format the service default, mp3, comes through with its content type', async () => {
    const stream = client.ttsStream({ text: TEXT, language: 'en-us' });
    expect(stream.format).toBeUndefined();
    expect(stream.sampleBytes).toBe(1);
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    const mp3 = Buffer.concat(chunks);
    expect(stream.contentType).toBe('audio/mpeg');
    // Layer III frames: 11 sync bits, then (MPEG-2 at 24 kHz) version bits 10, layer bits 01.
    expect(mp3[0]).toBe(0xff);
    expect(mp3[1]! & 0xfe).toBe(0xf2);
  });

  it('honours sample_rate', async () => {
    const stream = client.ttsStream({ text: TEXT, language: 'en-us', outputConfiguration: { format: 'pcm_s16le', sampleRate: 16_000 } });
    expect((await collect(stream)).equals(expected('pcm_s16le', TEXT, 16_000))).toBe(true);
  });
});

describe('errors', () => {
  it('validates before sending: text length, language, format', () => {
    expect(() => client.ttsStream({ text: 'hi', language: 'en-us' })).toThrow(ValidationError);
    expect(() => client.ttsStream({ text: 'x'.repeat(3001), language: 'en-us' })).toThrow(/text/);
    expect(() => client.ttsStream({ text: 'hello', language: 'english' })).toThrow(/language/);
    let error: unknown;
    try {
      client.ttsStream({ text: 'hello', language: 'en-us', outputConfiguration: { format: 'ogg' as OutputFormat } });
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'RTT_VALIDATION', field: 'outputConfiguration.format' });
  });

  it.each([
    ['idleTimeoutMs', { idleTimeoutMs: -1 }],
    ['trailingPartialSample', { trailingPartialSample: 'keep' as never }],
  ])('a bad %s option is a ValidationError naming it, and nothing is left running', async (field, options) => {
    const rejections: unknown[] = [];
    const onUncaught = (error: unknown) => rejections.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      expect(() => client.ttsStream({ text: 'hello', language: 'en-us' }, options)).toThrow(expect.objectContaining({ code: 'RTT_VALIDATION', field }));
      // A stream that threw after its base class was built would still run _construct on the
      // next tick, on a half-built object.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(rejections).toEqual([]);
  });

  it('a 422 from the service (adts is not emulated) fails the stream with ServiceValidationError', async () => {
    const stream = client.ttsStream({ text: 'hello', language: 'en-us', outputConfiguration: { format: 'adts' } });
    const error = await collect(stream).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceValidationError);
    expect(error).toMatchObject({ field: 'outputConfiguration.format' });
    expect((error as Error).message).toContain('not supported by the emulator');
  });

  it('a 401 fails the stream with HttpAuthError', async () => {
    const wrong = new LocalizationClient({ baseUrl: emu.baseUrl, apiKey: 'no-such-key-000', retry: false });
    const error = await collect(wrong.ttsStream({ text: 'hello', language: 'en-us', outputConfiguration: { format: 'wav' } })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpAuthError);
    await wrong.close();
  });

  it('a 503 with Retry-After before any byte is retried', async () => {
    await control(emu, 'POST', 'faults', { status: 503, retryAfter: 0, path: '/tts-stream' });
    const bytes = await collect(client.ttsStream({ text: TEXT, language: 'en-us', outputConfiguration: { format: 'wav' } }));
    expect(bytes.equals(expected('wav'))).toBe(true);
    expect((await logged(emu, 'POST', '/tts-stream')).map((r) => r.status)).toEqual([503, 200]);
  });

  it('a 500 is not retried: the request costs credits', async () => {
    await control(emu, 'POST', 'faults', { status: 500, path: '/tts-stream' });
    const error = await collect(client.ttsStream({ text: TEXT, language: 'en-us', outputConfiguration: { format: 'wav' } })).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 500, code: 'RTT_HTTP' });
    expect(await logged(emu, 'POST', '/tts-stream')).toHaveLength(1);
  });
});

describe('flow control', () => {
  const LONG = 'Streaming speech for a slow reader. '.repeat(80);

  it('backpressure: an unread stream buffers a bounded amount, then delivers everything', async () => {
    const stream = client.ttsStream({ text: LONG, language: 'en-us', outputConfiguration: { format: 'pcm_s16le' } });
    await new Promise((resolve) => stream.once('response', resolve));
    stream.read(0);
    // Let the transfer run until nothing moves any more.
    let last = -1;
    let stable = 0;
    await until(async () => {
      await ioTurns(20);
      stable = stream.readableLength === last ? stable + 1 : 0;
      last = stream.readableLength;
      return stable >= 10 && last > 0;
    });
    const total = expected('pcm_s16le', LONG).length;
    expect(total).toBeGreaterThan(4_000_000);
    expect(stream.readableLength).toBeLessThanOrEqual(stream.readableHighWaterMark + 64 * 1024);
    const bytes = await collect(stream);
    expect(bytes.equals(expected('pcm_s16le', LONG))).toBe(true);
  });

  it('idle timeout: a body that stalls while data is wanted fails with HttpTimeoutError', async () => {
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, stallAfterBytes: 1001, path: '/tts-stream' });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const stream = client.ttsStream({ text: TEXT, language: 'en-us', outputConfiguration: { format: 'pcm_s16le' } }, { idleTimeoutMs: 10_000 });
    const chunks: Buffer[] = [];
    let failure: unknown;
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', (e) => {
      failure = e;
    });
    await until(() => Buffer.concat(chunks).length === 1000);
    await vi.advanceTimersByTimeAsync(9_999);
    expect(failure).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(failure).toBeInstanceOf(HttpTimeoutError);
    expect(failure).toMatchObject({ phase: 'body', timeoutMs: 10_000, path: '/tts-stream' });
    // 1001 bytes arrived; the odd one waits for its partner and is not delivered.
    expect(Buffer.concat(chunks).equals(expected('pcm_s16le').subarray(0, 1000))).toBe(true);
  });

  it('idle timeout: a slow consumer never trips it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const LONGER = 'A reader that takes its time. '.repeat(60);
    const stream = client.ttsStream({ text: LONGER, language: 'en-us', outputConfiguration: { format: 'pcm_s16le' } }, { idleTimeoutMs: 1000 });
    let failure: unknown;
    stream.on('error', (e) => {
      failure = e;
    });
    await new Promise((resolve) => stream.once('response', resolve));
    stream.read(0);
    await until(() => stream.readableLength >= stream.readableHighWaterMark);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(failure).toBeUndefined();
    vi.useRealTimers();
    expect((await collect(stream)).equals(expected('pcm_s16le', LONGER))).toBe(true);
  });

  it('destroy() aborts the request and closes without an error', async () => {
    const stream = client.ttsStream({ text: LONG, language: 'en-us', outputConfiguration: { format: 'pcm_s16le' } });
    let failure: unknown;
    stream.on('error', (e) => {
      failure = e;
    });
    const first = await new Promise<Buffer>((resolve) => stream.once('data', resolve));
    stream.pause();
    expect(first.length).toBeGreaterThan(0);
    stream.destroy();
    await new Promise((resolve) => stream.once('close', resolve));
    expect(stream.destroyed).toBe(true);
    await until(async () => (await logged(emu, 'POST', '/tts-stream')).length === 1);
    // The emulator saw the connection go before the body was complete.
    expect((await logged(emu, 'POST', '/tts-stream'))[0]!.status).toBe(0);
    expect(failure).toBeUndefined();
  });

  it('destroy() while waiting for the headers aborts the request at once', async () => {
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, path: '/tts-stream' });
    const stream = client.ttsStream({ text: TEXT, language: 'en-us', outputConfiguration: { format: 'wav' } });
    let failure: unknown;
    stream.on('error', (e) => {
      failure = e;
    });
    stream.resume();
    await until(async () => (await logged(emu, 'POST', '/tts-stream')).length === 1);
    stream.destroy();
    await new Promise((resolve) => stream.once('close', resolve));
    expect(failure).toBeUndefined();
    expect(stream.statusCode).toBeUndefined();
    expect((await logged(emu, 'POST', '/tts-stream'))[0]!.status).toBe(0);
  });

  it('an AbortSignal destroys the stream with AbortError', async () => {
    const controller = new AbortController();
    const stream = client.ttsStream({ text: LONG, language: 'en-us', outputConfiguration: { format: 'wav' } }, { signal: controller.signal });
    stream.once('data', () => controller.abort());
    const error = await collect(stream).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AbortError);
    expect(stream.destroyed).toBe(true);
  });

  it('an already aborted signal sends nothing', async () => {
    const stream = client.ttsStream({ text: TEXT, language: 'en-us', outputConfiguration: { format: 'wav' } }, { signal: AbortSignal.abort() });
    expect(await collect(stream).catch((e: unknown) => e)).toBeInstanceOf(AbortError);
    expect(await logged(emu, 'POST', '/tts-stream')).toHaveLength(0);
  });
});

describe('sample alignment against a server that splits samples', () => {
  let server: Server;
  let pieces: Buffer[] = [];
  let raw: LocalizationClient;

  async function writePieces(res: ServerResponse): Promise<void> {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    for (const piece of pieces) {
      await new Promise<void>((resolve) => res.write(piece, () => resolve()));
      await new Promise((resolve) => setImmediate(resolve));
    }
    res.end();
  }

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => void writePieces(res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    raw = new LocalizationClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: KEY });
  });

  afterAll(async () => {
    await raw.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const bytes = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);

  it.each([
    ['pcm_s16le', 2, [1, 3, 2, 1, 4]],
    ['pcm_s32be', 4, [1, 1, 1, 3, 5]],
    ['pcm_f32le', 4, [7, 4]],
  ] as Array<[OutputFormat, number, number[]]>)(
    '%s: whole %d-byte samples; a trailing partial sample is dropped with a warning',
    async (format, width, sizes) => {
      pieces = [];
      let at = 0;
      for (const size of sizes) {
        pieces.push(bytes.subarray(at, at + size));
        at += size;
      }
      const stream = new TtsStreamReadable(raw, { text: 'hello', language: 'en-us', outputConfiguration: { format } });
      const warnings: IntegrityError[] = [];
      stream.on('warning', (w) => warnings.push(w));
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      const whole = Math.floor(11 / width) * width;
      expect(Buffer.concat(chunks).equals(bytes.subarray(0, whole))).toBe(true);
      expect(chunks.every((c) => c.length % width === 0)).toBe(true);
      expect(stream.droppedBytes).toBe(11 - whole);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toBeInstanceOf(IntegrityError);
    },
  );

  it("trailingPartialSample: 'error' fails the stream instead", async () => {
    pieces = [bytes.subarray(0, 3)];
    const stream = new TtsStreamReadable(
      raw,
      { text: 'hello', language: 'en-us', outputConfiguration: { format: 'pcm_s16le' } },
      { trailingPartialSample: 'error' },
    );
    const error = await collect(stream).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IntegrityError);
    expect((error as Error).message).toContain('1 trailing byte');
  });

  it('other formats pass through untouched, chunk for chunk', async () => {
    pieces = [bytes.subarray(0, 3), bytes.subarray(3)];
    const stream = new TtsStreamReadable(raw, { text: 'hello', language: 'en-us', outputConfiguration: { format: 'wav' } });
    expect((await collect(stream)).equals(bytes)).toBe(true);
    expect(stream.droppedBytes).toBe(0);
  });
});
