import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import type { RunningEmulator } from '../lib/emulator/server.js';
import {
  AbortError,
  AuthError,
  BillingError,
  ConfigError,
  ConnectionError,
  ForbiddenError,
  ProtocolError,
  RateLimitError,
  ValidationError,
} from '../lib/errors.js';
import { FlacDownloadStream } from '../lib/http/flac-download-stream.js';
import { LocalizationClient } from '../lib/http/client.js';
import {
  HttpAuthError,
  HttpPaymentRequiredError,
  PaymentRequiredError,
  HttpConnectionError,
  HttpStatusError,
  HttpTimeoutError,
  HttpTlsError,
  HttpRateLimitError,
  ServiceValidationError,
  TaskFailedError,
} from '../lib/http/errors.js';
import { isRetryable } from '../lib/http/retry.js';
import { KEY, clientFor, collect, control, emulator, logged, selfSignedHttpsServer, silentServer, until } from './http-test-helpers.js';
import { caught } from './helpers/caught.js';

/** A server answering by path; records each request's method, URL, headers and body. */
interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let server: Server;
let base: string;
const seen: Seen[] = [];
const handlers = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(text);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const handler = handlers.get(path);
      if (handler) handler(req, res);
      else json(res, 200, { task_id: 'task-1' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

afterEach(() => {
  seen.length = 0;
  handlers.clear();
});

const body = { text: 'Hello', sourceLanguage: 'en-us', targetLanguage: 'es-es' };

describe('configuration', () => {
  it('needs a base URL, from the option or RT_TRANSLATE_BASE_URL', async () => {
    expect(() => new LocalizationClient({ apiKey: KEY, env: {} })).toThrow(ConfigError);
    const client = new LocalizationClient({ apiKey: KEY, env: { RT_TRANSLATE_BASE_URL: `${base}/apis` } });
    try {
      await client.translatedTts.create(body);
      expect(seen[0]?.url).toBe('/apis/translated-tts');
    } finally {
      await client.close();
    }
  });

  it('needs an API key, from the option or RT_TRANSLATE_API_KEY', async () => {
    const error = (() => {
      try {
        return new LocalizationClient({ baseUrl: base, env: {} });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ field: 'apiKey' });
    expect((error as Error).message).toContain('RT_TRANSLATE_API_KEY');
    const client = new LocalizationClient({ baseUrl: base, env: { RT_TRANSLATE_API_KEY: 'env-key-123456' } });
    try {
      await client.translatedTts.create(body);
      expect(seen[0]?.headers['x-api-key']).toBe('env-key-123456');
    } finally {
      await client.close();
    }
  });

  it('refuses plain http:// to a host that is not loopback unless allowed', async () => {
    expect(() => new LocalizationClient({ baseUrl: 'http://service.example.com/apis', apiKey: KEY })).toThrow(/plain-text/);
    const allowed = new LocalizationClient({ baseUrl: 'http://service.example.com/apis', apiKey: KEY, allowInsecure: true });
    expect(allowed.baseUrl.href).toBe('http://service.example.com/apis');
    await allowed.close();
    expect(() => new LocalizationClient({ baseUrl: 'ftp://x', apiKey: KEY })).toThrow(ConfigError);
  });

  it('treats the base URL as a prefix, with or without a trailing slash', () => {
    const client = new LocalizationClient({ baseUrl: 'https://client.example.com/apis/', apiKey: KEY });
    expect(client.urlFor('/tts-result/3', { output_type: 'file_url' }).href).toBe('https://client.example.com/apis/tts-result/3?output_type=file_url');
    void client.close();
  });

  it('refuses bad timeouts and retry options', () => {
    expect(() => new LocalizationClient({ baseUrl: base, apiKey: KEY, headersTimeoutMs: -1 })).toThrow(/headersTimeoutMs/);
    // The same mistake is the same error wherever it is made: the client and a download both say ValidationError, field and value kept.
    const fromClient = caught(() => new LocalizationClient({ baseUrl: base, apiKey: KEY, headersTimeoutMs: -1 }));
    const fromDownload = caught(() => new FlacDownloadStream({ url: `${base}/file.flac`, headersTimeoutMs: -1 }));
    for (const error of [fromClient, fromDownload]) {
      expect(error).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ field: 'headersTimeoutMs', received: '-1' });
    }
    expect(() => new LocalizationClient({ baseUrl: base, apiKey: KEY, retry: { retries: Number.NaN } })).toThrow(/retries/);
  });
});

describe('the API key', () => {
  const secret = 'sk-very-secret-key-4242';

  it('is sent in x-api-key and nowhere else', async () => {
    const client = new LocalizationClient({ baseUrl: base, apiKey: secret });
    try {
      await client.translatedTts.create(body);
      const request = seen[0]!;
      expect(request.headers['x-api-key']).toBe(secret);
      const others = Object.entries(request.headers).filter(([name]) => name !== 'x-api-key');
      expect(JSON.stringify(others)).not.toContain(secret);
      expect(request.url).not.toContain(secret);
      expect(request.body).not.toContain(secret);
    } finally {
      await client.close();
    }
  });

  it('never appears in util.inspect or JSON of the client', async () => {
    const client = new LocalizationClient({ baseUrl: base, apiKey: secret });
    expect(inspect(client, { depth: 10, showHidden: true })).not.toContain(secret);
    expect(inspect(client)).toContain('[redacted]');
    expect(JSON.stringify(client)).not.toContain(secret);
    expect(Object.values(client).join(' ')).not.toContain(secret);
    await client.close();
  });

  it('is redacted from error messages even when the server echoes it', async () => {
    handlers.set('/translated-tts', (req, res) => json(res, 401, { error: `Key ${String(req.headers['x-api-key'])} is unknown`, status: 401 }));
    const client = new LocalizationClient({ baseUrl: base, apiKey: secret });
    try {
      const error = await client.translatedTts.create(body).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpAuthError);
      expect(error).toBeInstanceOf(AuthError);
      expect((error as Error).message).not.toContain(secret);
      expect((error as HttpAuthError).serverMessage).toBe('Key [redacted] is unknown');
      expect(inspect(error, { depth: 10 })).not.toContain(secret);
    } finally {
      await client.close();
    }
  });
});

describe('server text in task failures', () => {
  const echo = `echo of ${KEY}`;
  let client: LocalizationClient;
  beforeAll(() => {
    client = new LocalizationClient({ baseUrl: base, apiKey: KEY, retry: false });
  });
  afterAll(async () => {
    await client.close();
  });

  function expectRedacted(...texts: Array<string | undefined>): void {
    for (const text of texts) {
      expect(text).toBeDefined();
      expect(text).not.toContain(KEY);
      expect(text).toContain('[redacted]');
    }
  }

  it('an ERROR message or exception_reason that echoes the key is redacted', async () => {
    handlers.set('/translated-tts/t-message', (_req, res) => json(res, 200, { status: 'ERROR', run_id: null, message: echo }));
    handlers.set('/translated-tts/t-reason', (_req, res) => json(res, 200, { status: 'ERROR', run_id: null, exception_reason: echo }));
    for (const id of ['t-message', 't-reason']) {
      const error = (await client.translatedTts.wait(id, { initialIntervalMs: 1 }).catch((e: unknown) => e)) as TaskFailedError;
      expect(error).toBeInstanceOf(TaskFailedError);
      expectRedacted(error.message, error.taskMessage, error.serverMessage, inspect(error));
    }
  });

  it('an unknown status that echoes the key is redacted in the ProtocolError naming it', async () => {
    handlers.set('/translated-tts/t-odd', (_req, res) => json(res, 200, { status: `BROKEN ${echo}`, run_id: null }));
    const error = (await client.translatedTts.status('t-odd').catch((e: unknown) => e)) as ProtocolError;
    expect(error).toBeInstanceOf(ProtocolError);
    expect(error.message).toContain('BROKEN');
    expectRedacted(error.message, error.serverMessage);
  });

  it('a per-run separation error that echoes the key is redacted in the run and in the error naming it', async () => {
    handlers.set('/audio-separation-results', (_req, res) =>
      json(res, 200, { '5': { run_id: 5, status: 'ERROR', error: echo }, '6': { run_id: 6, status: 'PENDING' } }),
    );
    const runs = await client.audioSeparation.getResults([5, 6]);
    expectRedacted(runs.get(5)?.error, JSON.stringify(runs.get(5)?.raw));
    const error = (await client.audioSeparation.openTrack([5, 6], 5, 'foreground').catch((e: unknown) => e)) as ProtocolError;
    expect(error).toBeInstanceOf(ProtocolError);
    expectRedacted(error.message, error.serverMessage);
  });
});

describe('TLS and connect failures', () => {
  it('a certificate the client does not trust is HttpTlsError (phase connect, not retryable, naming the code), never retried', async () => {
    const tls = await selfSignedHttpsServer();
    const client = new LocalizationClient({ baseUrl: tls.base, apiKey: KEY, retry: { retries: 2, minDelayMs: 1, maxDelayMs: 5 } });
    try {
      const read = await client.tasks.subtitles.status('t1').catch((e: unknown) => e);
      const creation = await client.translatedTts.create(body).catch((e: unknown) => e);
      for (const error of [read, creation]) {
        expect(error).toBeInstanceOf(HttpTlsError);
        expect(error).toBeInstanceOf(HttpConnectionError);
        expect(error).toMatchObject({ code: 'RTT_CONNECTION', phase: 'connect', retryable: false, syscall: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
        expect((error as Error).message).toMatch(/TLS\/certificate problem \(DEPTH_ZERO_SELF_SIGNED_CERT: /);
        expect((error as Error).message).not.toContain(KEY);
        expect(isRetryable(error, 'read')).toBe(false);
      }
      // One handshake per call: neither was repeated although retries are on.
      expect(tls.connections()).toBe(2);
    } finally {
      await client.close();
      await tls.close();
    }
  });

  // undici runs the connect limit on its own timer wheel: a short real limit, asserting on the error only.
  it('a connect timeout names the configured connectTimeoutMs', async () => {
    const silent = await silentServer();
    const client = new LocalizationClient({ baseUrl: silent.base, apiKey: KEY, connectTimeoutMs: 150, retry: false });
    try {
      const error = await client.tasks.subtitles.status('t1').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpTimeoutError);
      expect(error).toMatchObject({ code: 'RTT_TIMEOUT', phase: 'connect', timeoutMs: 150 });
      expect((error as Error).message).toContain('timed out after 150 ms connecting');
    } finally {
      await client.close();
      await silent.close();
    }
  });
});

describe('status errors', () => {
  let client: LocalizationClient;
  beforeAll(() => {
    client = new LocalizationClient({ baseUrl: base, apiKey: KEY, retry: false });
  });
  afterAll(async () => {
    await client.close();
  });

  it('403 is HttpForbiddenError (a ForbiddenError) with the server message', async () => {
    handlers.set('/delete-voice/5', (_req, res) => json(res, 403, { error: 'Not your voice', status: 403 }));
    const error = await client.voices.delete(5).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ForbiddenError);
    expect(error).toMatchObject({ code: 'RTT_FORBIDDEN', status: 403, serverMessage: 'Not your voice', retryable: false });
  });

  it('422 exposes detail[] as structured fields', async () => {
    const detail = [
      { loc: ['body', 'project_name'], msg: 'String should have at least 3 characters', type: 'string_too_short' },
      { loc: ['body', 'run_ids', 2], msg: 'bad', type: 'int_type' },
    ];
    handlers.set('/translated-tts', (_req, res) => json(res, 422, { detail }));
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceValidationError);
    expect(error).toMatchObject({ code: 'RTT_VALIDATION', status: 422, field: 'projectName', retryable: false });
    expect((error as ServiceValidationError).detail).toEqual(detail);
    expect((error as Error).message).toContain('body.project_name: String should have at least 3 characters');
  });

  it('422 with a string detail keeps it as the server message', async () => {
    handlers.set('/translated-tts', (_req, res) => json(res, 422, { detail: 'Unsupported locale' }));
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toMatchObject({ detail: [], serverMessage: 'Unsupported locale', field: undefined });
  });

  it('429 is HttpRateLimitError with the wait from Retry-After as a date', async () => {
    const when = new Date(Date.now() + 30_000).toUTCString();
    handlers.set('/translated-tts', (_req, res) => json(res, 429, { error: 'Too many', status: 429 }, { 'retry-after': when }));
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpRateLimitError);
    expect(error).toBeInstanceOf(RateLimitError);
    const wait = (error as HttpRateLimitError).retryAfterMs!;
    expect(wait).toBeGreaterThan(25_000);
    expect(wait).toBeLessThanOrEqual(30_000);
  });

  it('402 is out of credits: a BillingError, like a realtime billing stop', async () => {
    handlers.set('/translated-tts', (_req, res) => json(res, 402, { error: 'No credits left', status: 402 }));
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentRequiredError);
    expect(error).toBeInstanceOf(BillingError);
    expect(error).toMatchObject({ code: 'RTT_BILLING', status: 402, retryable: false, serverMessage: 'No credits left', taskId: undefined });
    expect(error).toMatchObject({ method: 'POST', path: '/translated-tts' });
    // The old name is the same class.
    expect(HttpPaymentRequiredError).toBe(PaymentRequiredError);
  });

  it('other statuses are HttpStatusError with a text excerpt; 4xx not retryable, 5xx retryable', async () => {
    handlers.set('/translated-tts', (_req, res) => {
      res.writeHead(418, { 'content-type': 'text/plain' });
      res.end('I am a teapot');
    });
    const teapot = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(teapot).toBeInstanceOf(HttpStatusError);
    expect(teapot).toMatchObject({ status: 418, serverMessage: 'I am a teapot', retryable: false, path: '/translated-tts' });
    handlers.set('/translated-tts', (_req, res) => json(res, 502, { message: 'bad gateway' }));
    expect(await client.translatedTts.create(body).catch((e: unknown) => e)).toMatchObject({ status: 502, retryable: true, serverMessage: 'bad gateway' });
  });

  it('a service message that ends in a full stop is not given a second one', async () => {
    handlers.set('/translated-tts', (_req, res) => json(res, 409, { message: 'Task is ERROR.' }));
    const conflict = (await client.translatedTts.create(body).catch((e: unknown) => e)) as Error;
    expect(conflict.message).toBe('POST /translated-tts failed with HTTP 409: Task is ERROR.');
    handlers.set('/translated-tts', (_req, res) => json(res, 401, { message: 'Key revoked.' }));
    const auth = (await client.translatedTts.create(body).catch((e: unknown) => e)) as Error;
    expect(auth.message).toMatch(/missing or invalid\. The service said: Key revoked\.$/);
    handlers.set('/translated-tts', (_req, res) => res.writeHead(409).end());
    expect(((await client.translatedTts.create(body).catch((e: unknown) => e)) as Error).message).toBe('POST /translated-tts failed with HTTP 409.');
  });

  it('a 2xx body that is not JSON is a ProtocolError', async () => {
    handlers.set('/translated-tts', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>login</html>');
    });
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).serverMessage).toBe('<html>login</html>');
  });

  it('a creation answer without task_id is a ProtocolError', async () => {
    handlers.set('/translated-tts', (_req, res) => json(res, 200, { ok: true }));
    await expect(client.translatedTts.create(body)).rejects.toThrow(/without a task_id/);
  });

  it('401 from the emulator for a missing or unknown key', async () => {
    const emu = await emulator();
    try {
      const wrong = new LocalizationClient({ baseUrl: emu.baseUrl, apiKey: 'not-a-known-key', retry: false });
      const error = await wrong.translatedTts.create(body).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'RTT_AUTH', status: 401, serverMessage: 'Invalid API key.' });
      await wrong.close();
    } finally {
      await emu.close();
    }
  });
});

describe('timeouts and aborts', () => {
  let emu: RunningEmulator;
  let client: LocalizationClient;
  beforeAll(async () => {
    emu = await emulator({ taskMs: 60_000 });
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

  // undici runs these two limits on its own timer wheel, which fake timers cannot drive
  // reliably; the limits are short instead, and the assertions are on the error only.
  it('headersTimeoutMs fails a stalled answer with HttpTimeoutError (phase headers)', async () => {
    const task = await client.translatedTts.create(body);
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, path: '/translated-tts/' });
    const error = await client.translatedTts.status(task.taskId, { headersTimeoutMs: 150, retry: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpTimeoutError);
    expect(error).toMatchObject({ code: 'RTT_TIMEOUT', phase: 'headers', timeoutMs: 150, retryable: true });
  });

  it('a read that timed out is retried and then succeeds', async () => {
    const task = await client.translatedTts.create(body);
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, path: '/translated-tts/' });
    await expect(client.translatedTts.status(task.taskId, { headersTimeoutMs: 150 })).resolves.toMatchObject({ status: 'PENDING' });
    expect((await logged(emu, 'GET', '/translated-tts/')).map((r) => r.status)).toEqual([0, 200]);
  });

  it('a creation that timed out waiting for headers is NOT retried', async () => {
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, path: '/translated-tts' });
    const error = await client.translatedTts.create(body, { headersTimeoutMs: 150 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ phase: 'headers' });
    expect(await logged(emu, 'POST', '/translated-tts')).toHaveLength(1);
  });

  it('bodyTimeoutMs fails a result download that stalls mid-body (without resuming) and keeps what arrived', async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'translated-tts', text: 'a long enough text to stall', taskMs: 0 });
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, stallAfterBytes: 100, path: '/tts-result/' });
    // One attempt: a download that may resume is covered in http-downloads.test.ts.
    const result = await client.textToSpeech.result(seeded.run_id, { bodyTimeoutMs: 150, maxAttempts: 1 });
    const received: Buffer[] = [];
    result.audio.on('data', (c: Buffer) => received.push(c));
    const error = await new Promise<unknown>((resolve) => result.audio.once('error', resolve));
    expect(error).toMatchObject({ code: 'RTT_TIMEOUT', timeoutMs: 150 });
    const bytes = Buffer.concat(received);
    expect(bytes.length).toBe(100);
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('fLaC');
  });

  it('a result download cut mid-body, without resuming, fails with a retryable ConnectionError', async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'translated-tts', text: 'a text that will be cut', taskMs: 0 });
    await control(emu, 'POST', 'faults', { dropAfterBytes: 200, path: '/tts-result/' });
    const result = await client.textToSpeech.result(seeded.run_id, { maxAttempts: 1 });
    const error = await collect(result.audio).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RTT_CONNECTION', retryable: true });
  });

  it('an AbortSignal ends a request in flight with AbortError', async () => {
    const task = await client.translatedTts.create(body);
    await control(emu, 'POST', 'faults', { stallMs: 3_600_000, path: '/translated-tts/' });
    const controller = new AbortController();
    const promise = client.translatedTts.status(task.taskId, { signal: controller.signal }).catch((e: unknown) => e);
    await until(async () => (await logged(emu, 'GET', '/translated-tts/')).length > 0);
    controller.abort();
    const error = await promise;
    expect(error).toBeInstanceOf(AbortError);
    expect(error).toMatchObject({ code: 'RTT_ABORTED', retryable: false });
    expect(await logged(emu, 'GET', '/translated-tts/')).toHaveLength(1);
  });

  it('an AbortSignal ends the wait of translateAndSpeak between polls', async () => {
    const controller = new AbortController();
    const promise = client.translatedTts.run(body, { signal: controller.signal, initialIntervalMs: 5 }).catch((e: unknown) => e);
    await until(async () => (await logged(emu, 'GET', '/translated-tts/')).length >= 2);
    controller.abort();
    expect(await promise).toBeInstanceOf(AbortError);
  });
});

describe('dispatcher ownership', () => {
  it.each([
    ['after a request', 1],
    ['before any request', 0],
  ])('close() %s: the own agent, if made, closed; later calls fail with a non-retryable ConnectionError', async (_when, requests) => {
    const client = new LocalizationClient({ baseUrl: base, apiKey: KEY });
    if (requests > 0) await client.translatedTts.create(body);
    await client.close();
    expect(client.closed).toBe(true);
    const error = await client.translatedTts.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ retryable: false });
    expect(seen).toHaveLength(requests);
  });

  it('a download opened before the first request, read after close(), fails as on a closed agent and connects nowhere', async () => {
    const client = new LocalizationClient({ baseUrl: base, apiKey: KEY });
    const download = client.openFlacDownload({ url: `${base}/audio.flac`, retry: false });
    await client.close();
    const error = await collect(download).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'HttpConnectionError', retryable: true });
    expect((error as Error).message).toBe(
      'GET /audio.flac lost its connection (UND_ERR_DESTROYED: The client is destroyed). Check the base URL and the network.',
    );
    expect(seen).toHaveLength(0);
  });

  it("a caller's dispatcher is used and left open", async () => {
    const agent = new Agent();
    const client = new LocalizationClient({ baseUrl: base, apiKey: KEY, dispatcher: agent });
    await client.translatedTts.create(body);
    await client.close();
    const response = await request(`${base}/still-open`, { dispatcher: agent });
    expect(response.statusCode).toBe(200);
    expect(JSON.parse(await response.body.text())).toEqual({ task_id: 'task-1' });
    await agent.close();
  });

  it('every request of a flow goes through the one dispatcher', async () => {
    let dispatched = 0;
    class CountingAgent extends Agent {
      override dispatch(options: Agent.DispatchOptions, handler: Parameters<Agent['dispatch']>[1]): boolean {
        dispatched++;
        return super.dispatch(options, handler);
      }
    }
    const agent = new CountingAgent();
    const emu = await emulator({ taskMs: 0 });
    const client = clientFor(emu, { dispatcher: agent });
    try {
      const result = await client.translatedTts.run(body);
      await collect(result.audio);
      // create, at least one status poll, translation result, audio.
      expect(dispatched).toBeGreaterThanOrEqual(4);
      expect(dispatched).toBe((await logged(emu, 'GET', '/')).length + (await logged(emu, 'POST', '/')).length);
    } finally {
      await client.close();
      await agent.close();
      await emu.close();
    }
  });
});

describe('result audio stream', () => {
  it('streams the FLAC body and destroys the request when the reader stops early', async () => {
    const emu = await emulator({ taskMs: 0 });
    const client = clientFor(emu);
    try {
      const seeded = await control(emu, 'POST', 'tasks', { kind: 'tts', text: 'x'.repeat(400), taskMs: 0 });
      const whole = await collect((await client.textToSpeech.result(seeded.run_id)).audio);
      expect(whole.subarray(0, 4).toString('latin1')).toBe('fLaC');
      const partial = await client.textToSpeech.result(seeded.run_id);
      for await (const chunk of partial.audio) {
        expect((chunk as Buffer).length).toBeGreaterThan(0);
        break;
      }
      expect(partial.audio.destroyed).toBe(true);
    } finally {
      await client.close();
      await emu.close();
    }
  });
});
