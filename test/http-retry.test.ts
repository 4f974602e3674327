import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { Readable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { AbortError, ValidationError } from '../lib/errors.js';
import { LocalizationClient } from '../lib/http/client.js';
import { HttpConnectionError, HttpStatusError, HttpTimeoutError, HttpTlsError, HttpRateLimitError } from '../lib/http/errors.js';
import { isTlsFailureCode, typedNetworkError } from '../lib/http/failures.js';
import {
  DEFAULT_RETRY,
  NO_CONNECTION_CODES,
  backoffDelay,
  isRetryable,
  parseRetryAfter,
  serviceDidNotAct,
  withRetry,
  type RetryInfo,
} from '../lib/http/retry.js';
import { KEY, OTHER_KEY, STREAM_REQUEST, VOICE_DESCRIPTION, clientFor, control, emulator, logged, sharedEmulator } from './http-test-helpers.js';

const info = { method: 'POST', path: '/x' };
const status = (code: number, retryAfterMs?: number): HttpStatusError => new HttpStatusError(code, { ...info, retryAfterMs });
const rateLimit = (retryAfterMs?: number): HttpRateLimitError => new HttpRateLimitError({ ...info, retryAfterMs });
const refused = new HttpConnectionError('connect', 'ECONNREFUSED', 'connect ECONNREFUSED', info);
const reset = new HttpConnectionError('exchange', 'UND_ERR_SOCKET', 'other side closed', info);

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  it.each([
    ['seconds', { 'retry-after': '3' }, 3000],
    ['fractional seconds', { 'retry-after': '0.5' }, 500],
    ['an HTTP date', { 'retry-after': 'Wed, 01 Jan 2025 00:00:10 GMT' }, 10_000],
    ['a date in the past', { 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }, 0],
    ['X-RateLimit-Reset as seconds to wait', { 'x-ratelimit-reset': '7' }, 7000],
    ['X-RateLimit-Reset as a Unix time', { 'x-ratelimit-reset': String(now / 1000 + 4) }, 4000],
    ['Retry-After over X-RateLimit-Reset', { 'retry-after': '1', 'x-ratelimit-reset': '9' }, 1000],
    ['an array header value', { 'retry-after': ['2', '5'] }, 2000],
  ])('reads %s', (_name, headers, expected) => {
    expect(parseRetryAfter(headers, now)).toBe(expected);
  });

  it('is undefined without either header or with garbage', () => {
    expect(parseRetryAfter({}, now)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after': 'soon' }, now)).toBeUndefined();
  });
});

describe('backoffDelay', () => {
  it('grows exponentially with equal jitter and is capped', () => {
    const policy = { ...DEFAULT_RETRY, minDelayMs: 1000, maxDelayMs: 5000, factor: 2 };
    expect(backoffDelay(1, policy, 0)).toBe(500);
    expect(backoffDelay(1, policy, 0.999)).toBe(1000);
    expect(backoffDelay(2, policy, 0)).toBe(1000);
    expect(backoffDelay(3, policy, 0.5)).toBe(3000);
    expect(backoffDelay(10, policy, 0.999)).toBe(4998);
    expect(backoffDelay(10, policy, 1 - Number.EPSILON)).toBe(5000);
    expect(backoffDelay(10, policy, 0)).toBe(2500);
  });
});

describe('isRetryable', () => {
  it.each([
    ['408', status(408), true, false],
    ['429', rateLimit(1000), true, true],
    ['500', status(500), true, false],
    ['502', status(502), true, false],
    ['503 with Retry-After', status(503, 1000), true, true],
    ['503 without Retry-After', status(503), true, false],
    ['404', status(404), false, false],
    ['connection refused', refused, true, true],
    ['unknown host', new HttpConnectionError('connect', 'ENOTFOUND', 'x', info), true, true],
    ['reset mid-response', reset, true, false],
    ['headers timeout', new HttpTimeoutError('headers', 10, info), true, false],
    ['connect timeout', new HttpTimeoutError('connect', 10, info), true, true],
    ['no route to the host', new HttpConnectionError('connect', 'EHOSTUNREACH', 'x', info), true, true],
    ['a TLS certificate failure', new HttpTlsError('CERT_HAS_EXPIRED', 'certificate has expired', info), false, false],
    ['abort', new AbortError(), false, false],
    ['a plain Error', new Error('x'), false, false],
  ])('%s', (_name, error, read, create) => {
    expect(isRetryable(error, 'read')).toBe(read);
    expect(isRetryable(error, 'create')).toBe(create);
  });
});

describe('network failures mapped by the one list of codes that precede sending', () => {
  const limits = { connectTimeoutMs: 1, headersTimeoutMs: 2, bodyTimeoutMs: 3 };
  const socketError = (code: string, syscall: string): Error => Object.assign(new Error(`${syscall} ${code}`), { code, syscall });

  it.each([...NO_CONNECTION_CODES])('%s while connecting: phase connect, and a creation may be repeated', (code) => {
    const typed = typedNetworkError(socketError(code, code.startsWith('EAI') || code === 'ENOTFOUND' ? 'getaddrinfo' : 'connect'), info, limits, (t) => t);
    expect(typed).toBeInstanceOf(HttpConnectionError);
    expect(typed).toMatchObject({ phase: 'connect', syscall: code, retryable: true });
    expect(serviceDidNotAct(typed)).toBe(true);
    expect(isRetryable(typed, 'create')).toBe(true);
  });

  it('the same code on an open socket (a read) is phase exchange: a creation is not repeated', () => {
    const typed = typedNetworkError(socketError('EHOSTUNREACH', 'read'), info, limits, (t) => t);
    expect(typed).toMatchObject({ phase: 'exchange', syscall: 'EHOSTUNREACH' });
    expect(isRetryable(typed, 'create')).toBe(false);
    expect(isRetryable(typed, 'read')).toBe(true);
  });

  it.each([
    'DEPTH_ZERO_SELF_SIGNED_CERT',
    'SELF_SIGNED_CERT_IN_CHAIN',
    'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
    'CERT_HAS_EXPIRED',
    'CERT_NOT_YET_VALID',
    'ERR_TLS_CERT_ALTNAME_INVALID',
    'ERR_SSL_WRONG_VERSION_NUMBER',
    'HOSTNAME_MISMATCH',
  ])('%s is a TLS failure: HttpTlsError, phase connect, never retried', (code) => {
    expect(isTlsFailureCode(code)).toBe(true);
    const typed = typedNetworkError(socketError(code, 'connect'), info, limits, (t) => t);
    expect(typed).toBeInstanceOf(HttpTlsError);
    expect(typed).toMatchObject({ phase: 'connect', syscall: code, retryable: false, code: 'RTT_CONNECTION' });
    expect((typed as Error).message).toContain(`TLS/certificate problem (${code}: `);
    expect(isRetryable(typed, 'read')).toBe(false);
    expect(isRetryable(typed, 'create')).toBe(false);
  });

  it.each(['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE', 'ECONNREFUSED'])('%s is not a TLS failure', (code) => {
    expect(isTlsFailureCode(code)).toBe(false);
  });
});

describe('withRetry', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('waits the back-off between attempts and returns the first success', async () => {
    vi.useFakeTimers();
    const attempts: number[] = [];
    const retries: RetryInfo[] = [];
    const promise = withRetry(
      async (n) => {
        attempts.push(n);
        if (n < 3) throw status(502);
        return 'ok';
      },
      { kind: 'read', retry: { retries: 3, minDelayMs: 100, maxDelayMs: 1000 }, random: () => 0.999, onRetry: (r) => retries.push(r) },
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(attempts).toEqual([1]);
    await vi.advanceTimersByTimeAsync(99);
    expect(attempts).toEqual([1]);
    await vi.advanceTimersByTimeAsync(1);
    expect(attempts).toEqual([1, 2]);
    await vi.advanceTimersByTimeAsync(200);
    await expect(promise).resolves.toBe('ok');
    expect(attempts).toEqual([1, 2, 3]);
    expect(retries.map((r) => [r.retry, r.delayMs])).toEqual([
      [1, 100],
      [2, 200],
    ]);
  });

  it("uses the service's Retry-After instead of the back-off", async () => {
    vi.useFakeTimers();
    const retries: RetryInfo[] = [];
    let n = 0;
    const promise = withRetry(
      async () => {
        n++;
        if (n === 1) throw rateLimit(2500);
        return n;
      },
      { kind: 'create', retry: { minDelayMs: 1 }, onRetry: (r) => retries.push(r) },
    );
    await vi.advanceTimersByTimeAsync(2499);
    expect(n).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await expect(promise).resolves.toBe(2);
    expect(retries[0]?.delayMs).toBe(2500);
  });

  it('does not wait longer than maxDelayMs: a longer Retry-After is thrown at once', async () => {
    let n = 0;
    const error = await withRetry(
      async () => {
        n++;
        throw rateLimit(120_000);
      },
      { kind: 'read', retry: { maxDelayMs: 60_000 } },
    ).catch((e: unknown) => e);
    expect(n).toBe(1);
    expect(error).toBeInstanceOf(HttpRateLimitError);
    expect((error as HttpRateLimitError).retryAfterMs).toBe(120_000);
  });

  it('gives up after `retries` and throws the last typed error', async () => {
    let n = 0;
    const error = await withRetry(
      async () => {
        n++;
        throw status(500 + n);
      },
      { kind: 'read', retry: { retries: 2, minDelayMs: 0 } },
    ).catch((e: unknown) => e);
    expect(n).toBe(3);
    expect((error as HttpStatusError).status).toBe(503);
  });

  it('retry: false makes one attempt', async () => {
    let n = 0;
    await expect(
      withRetry(
        async () => {
          n++;
          throw status(503, 0);
        },
        { kind: 'read', retry: false },
      ),
    ).rejects.toBeInstanceOf(HttpStatusError);
    expect(n).toBe(1);
  });

  it('an abort during the wait ends it at once with AbortError', async () => {
    vi.useFakeTimers();
    const controller = new AbortController();
    let n = 0;
    const promise = withRetry(
      async () => {
        n++;
        throw status(500);
      },
      { kind: 'read', retry: { minDelayMs: 10_000 }, signal: controller.signal },
    ).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(100);
    controller.abort();
    const error = await promise;
    expect(error).toBeInstanceOf(AbortError);
    expect(n).toBe(1);
  });

  it('rejects nonsense options with a ValidationError naming the option and what it received', async () => {
    const error = await withRetry(async () => 1, { kind: 'read', retry: { retries: -1 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field: 'retry.retries', received: '-1' });
    const nan = await withRetry(async () => 1, { kind: 'read', retry: { factor: Number.NaN } }).catch((e: unknown) => e);
    expect(nan).toMatchObject({ field: 'retry.factor', received: 'NaN' });
  });
});

describe('policy over HTTP', () => {
  let emu: RunningEmulator;
  let client: LocalizationClient;
  const body = { text: 'Hello', sourceLanguage: 'en-us', targetLanguage: 'es-es' };

  beforeAll(async () => {
    emu = await emulator();
    client = clientFor(emu);
  });

  afterAll(async () => {
    await client.close();
    await emu.close();
  });

  afterEach(async () => {
    await control(emu, 'DELETE', 'faults');
    await control(emu, 'DELETE', 'requests');
  });

  it('a creation is retried after 503 with Retry-After, and succeeds', async () => {
    await control(emu, 'POST', 'faults', { status: 503, count: 2, retryAfter: 0, path: '/translated-tts' });
    const task = await client.translatedTts.create(body);
    expect(task.taskId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await logged(emu, 'POST', '/translated-tts')).map((r) => r.status)).toEqual([503, 503, 200]);
  });

  it('a creation is retried after 429', async () => {
    await control(emu, 'POST', 'faults', { status: 429, count: 1, retryAfter: 0, path: '/translated-tts' });
    await client.translatedTts.create(body);
    expect((await logged(emu, 'POST', '/translated-tts')).map((r) => r.status)).toEqual([429, 200]);
  });

  it('a creation is NOT retried after a 500', async () => {
    await control(emu, 'POST', 'faults', { status: 500, count: 1, path: '/translated-tts' });
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpStatusError);
    expect(error).toMatchObject({ status: 500, code: 'RTT_HTTP', retryable: true });
    expect((await logged(emu, 'POST', '/translated-tts')).map((r) => r.status)).toEqual([500]);
  });

  it('a creation is NOT retried after a 503 that names no wait', async () => {
    await control(emu, 'POST', 'faults', { status: 503, count: 1, retryAfter: null, path: '/translated-tts' });
    await expect(client.translatedTts.create(body)).rejects.toMatchObject({ status: 503, unavailable: false });
    expect(await logged(emu, 'POST', '/translated-tts')).toHaveLength(1);
  });

  it('a creation is NOT retried when the connection drops mid-response (the task was created)', async () => {
    await control(emu, 'POST', 'faults', { dropAfterBytes: 5, count: 1, path: '/translated-tts' });
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpConnectionError);
    expect(error).toMatchObject({ phase: 'exchange', code: 'RTT_CONNECTION' });
    expect(await logged(emu, 'POST', '/translated-tts')).toHaveLength(1);
  });

  it('a creation is NOT retried when the connection drops before the headers', async () => {
    await control(emu, 'POST', 'faults', { dropAfterBytes: 0, count: 1, path: '/translated-tts' });
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpConnectionError);
    expect(await logged(emu, 'POST', '/translated-tts')).toHaveLength(1);
  });

  it('a read is retried after a 500 and after a dropped connection', async () => {
    const task = await client.translatedTts.create(body);
    await control(emu, 'POST', 'faults', [
      { status: 500, count: 1, path: '/translated-tts/' },
      { dropAfterBytes: 3, count: 1, path: '/translated-tts/' },
    ]);
    const answer = await client.translatedTts.status(task.taskId);
    expect(answer.status).toBe('PENDING');
    expect((await logged(emu, 'GET', '/translated-tts/')).map((r) => r.status)).toEqual([500, 0, 200]);
  });

  it('a read gives up after the configured retries with the last error', async () => {
    const task = await client.translatedTts.create(body);
    await control(emu, 'POST', 'faults', { status: 502, count: 5, path: '/translated-tts/' });
    await expect(client.translatedTts.status(task.taskId)).rejects.toMatchObject({ status: 502 });
    expect(await logged(emu, 'GET', '/translated-tts/')).toHaveLength(3);
  });

  it('retry: false (per call) turns retries off', async () => {
    await control(emu, 'POST', 'faults', { status: 503, count: 1, retryAfter: 0, path: '/translated-tts' });
    await expect(client.translatedTts.create(body, { retry: false })).rejects.toMatchObject({ status: 503 });
    expect(await logged(emu, 'POST', '/translated-tts')).toHaveLength(1);
  });

  it("the emulator's per-key rate limiter answers 429 with Retry-After, exposed as retryAfterMs", async () => {
    const limited = await emulator({ rateLimit: 2 });
    const retries: Array<RetryInfo & { path: string }> = [];
    const c = clientFor(limited, { retry: { retries: 1, maxDelayMs: 5_000 }, onRetry: (r) => retries.push(r) });
    try {
      await c.translatedTts.create(body);
      await c.translatedTts.create(body);
      const error = await c.translatedTts.create(body, { retry: false }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpRateLimitError);
      expect(error).toMatchObject({ code: 'RTT_RATE_LIMIT', retryable: true, retryAfterMs: 1000 });
      expect(retries).toHaveLength(0);
      // The other key has its own budget.
      const other = clientFor(limited, { apiKey: OTHER_KEY, retry: false });
      expect((await other.translatedTts.create(body)).taskId).toMatch(/^[0-9a-f-]{36}$/);
      await other.close();
    } finally {
      await c.close();
      await limited.close();
    }
  });
});

describe('every creation and deletion beyond the interface, after an ambiguous failure', () => {
  const env = sharedEmulator();
  const WAV = readFileSync(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
  const dub = async (): Promise<number> =>
    (await env.client.dub.run({ videoUrl: 'https://e.com/a.wav', sourceLanguage: 'en-us', targetLanguage: 'es-es' })).runId;
  const story = async (): Promise<number> => (await env.client.story.setup({ file: Buffer.from('A story.'), sourceLanguage: 'en-us' })).runId;
  const dictionary = async (): Promise<number> =>
    (await env.client.dictionaries.createFromFile({ dictionaryFile: Buffer.from('en-us,es-es\nsea,mar\n'), dictionaryName: 'd' })).dictionaryId!;
  const term = async (): Promise<number[]> => {
    const id = await dictionary();
    return [id, (await env.client.dictionaries.addTerm(id, [{ translation: 'sky', language: 'en-us' }])).termId!];
  };
  const stream = async (): Promise<number> => (await env.client.streams.create(STREAM_REQUEST)).streamId;

  // /v1/stream warns once that it is deprecated; the warning is not what these tests look at.
  beforeAll(() => {
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
  });
  afterAll(() => {
    vi.restoreAllMocks();
  });

  // Each: the method and path the fault is armed on, the request (given the ids of what has to
  // exist first), and what makes those.
  type Case = [string, 'POST' | 'DELETE', string, (c: LocalizationClient, ...ids: number[]) => Promise<unknown>, (() => Promise<number | number[]>)?];
  const cases: Case[] = [
    ['POST /translate', 'POST', '/translate', (c) => c.translation.create({ texts: ['x'], sourceLanguage: 'en-us', targetLanguage: 'es-es' })],
    [
      'POST /translation/stream',
      'POST',
      '/translation/stream',
      (c) => c.translation.openStream({ text: 'x', sourceLanguage: 'en-us', targetLanguage: 'es-es' }),
    ],
    ['POST /transcribe (an upload)', 'POST', '/transcribe', (c) => c.transcription.create({ language: 'en-us', mediaFile: WAV })],
    ['POST /dub', 'POST', '/dub', (c) => c.dub.create({ videoUrl: 'https://e.com/a.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' })],
    ['POST /dub-alt-format', 'POST', '/dub-alt-format/', (c, runId) => c.dub.altFormat.create({ runId: runId!, language: 'es-es', format: 'wav' }), dub],
    ['POST /sub', 'POST', '/sub', (c) => c.tasks.subtitles.create({ mediaUrl: 'https://e.com/a.mp4', sourceLanguage: 'en-us' })],
    ['POST /text-to-sound', 'POST', '/text-to-sound', (c) => c.textToAudio.create({ prompt: 'rain' })],
    ['POST /text-to-voice', 'POST', '/text-to-voice', (c) => c.textToVoice.create({ text: 'hello', voiceDescription: VOICE_DESCRIPTION })],
    ['POST /create-custom-voice', 'POST', '/create-custom-voice', (c) => c.voices.create({ file: WAV, voiceName: 'v', gender: 1 })],
    ['POST /story', 'POST', '/story', (c) => c.story.create({ file: Buffer.from('A story.'), sourceLanguage: 'en-us' })],
    ['POST /story-setup', 'POST', '/story-setup', (c) => c.story.setup({ file: Buffer.from('A story.'), sourceLanguage: 'en-us' })],
    ['POST /translated-story', 'POST', '/translated-story/', (c, runId) => c.translatedStory.create({ runId: runId!, targetLanguage: 'es-es' }), story],
    [
      'POST /dictionaries/create-from-file',
      'POST',
      '/dictionaries/create-from-file',
      (c) => c.dictionaries.createFromFile({ dictionaryFile: Buffer.from('en-us\nx\n'), dictionaryName: 'd' }),
    ],
    [
      'POST /dictionaries/{id}/add-term',
      'POST',
      '/dictionaries/',
      (c, id) => c.dictionaries.addTerm(id!, [{ translation: 'x', language: 'en-us' }]),
      dictionary,
    ],
    ['POST /folders/create', 'POST', '/folders/create', (c) => c.folders.create('f')],
    ['POST /stream', 'POST', '/stream', (c) => c.streams.create(STREAM_REQUEST)],
    ['POST /v1/stream', 'POST', '/v1/stream', (c) => c.streams.createV1(STREAM_REQUEST)],
    ['DELETE /dictionaries/{id} (deleteDictionary)', 'DELETE', '/dictionaries/', (c, id) => c.dictionaries.delete(id!), dictionary],
    [
      'DELETE /dictionaries/term/{id}/{term_id} (deleteDictionaryTerm)',
      'DELETE',
      '/dictionaries/term/',
      (c, id, termId) => c.dictionaries.deleteTerm(id!, termId!),
      term,
    ],
    ['DELETE /stream/{id} (deleteStream)', 'DELETE', '/stream/', (c, id) => c.streams.delete(id!), stream],
  ];

  it.each(cases)('%s is sent once when the connection drops', async (_name, method, path, send, prepare) => {
    const ids = prepare ? [await prepare()].flat() : [];
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { dropAfterBytes: 0, count: 1, path, method });
    const error = await send(env.client, ...ids).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpConnectionError);
    expect(await logged(env.emu, method, path)).toHaveLength(1);
  });

  it.each(cases)('%s is sent again after a 503 that says when to come back', async (_name, method, path, send, prepare) => {
    const ids = prepare ? [await prepare()].flat() : [];
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { status: 503, retryAfter: 0, count: 1, path, method });
    const result = await send(env.client, ...ids);
    if (result instanceof Readable) result.destroy();
    expect((await logged(env.emu, method, path)).map((r) => r.status)).toEqual([503, 200]);
  });
});

describe('connection refused', () => {
  let server: Server;
  let port: number;

  beforeAll(async () => {
    // A port that was just free: listen, note it, close.
    server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('a creation is retried when the connection is refused (nothing was sent)', async () => {
    const retries: RetryInfo[] = [];
    const client = new LocalizationClient({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: KEY,
      retry: { retries: 2, minDelayMs: 1, maxDelayMs: 2 },
      onRetry: (r) => retries.push(r),
    });
    try {
      const error = await client.translatedTts.create({ text: 'x', sourceLanguage: 'en-us', targetLanguage: 'es-es' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpConnectionError);
      expect(error).toMatchObject({ phase: 'connect', syscall: 'ECONNREFUSED', code: 'RTT_CONNECTION' });
      expect(retries.map((r) => r.retry)).toEqual([1, 2]);
    } finally {
      await client.close();
    }
  });
});
