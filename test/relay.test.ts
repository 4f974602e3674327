/**
 * The relay over real sockets on loopback: a bare `http.Server` holding the relay, `ws` clients
 * as browsers (and the library's own `RealtimeTranslateStream` as a client written for the
 * service), and behind it the emulator (translations checked bit for bit), the reference server
 * (drops and replays) or a scripted fake (what reaches the service, misbehaviour). Each refusal
 * is checked for its answer and for what it did not do: no upstream connection was opened.
 * Long waits (the first-message limit, token expiry) run on fake clocks; the sockets stay real.
 */
import { inspect } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import type { EmulatorOptions, RunningEmulator } from '../lib/emulator/server.js';
import { ConfigError, ValidationError } from '../lib/errors.js';
import { createRealtimeRelay, RealtimeTranslateStream, type RealtimeRelayOptions } from '../lib/index.js';
import { mintToken } from '../lib/relay/relay-tokens.js';
import { BrowserClient } from './helpers/browser-client.js';
import type { FakeRealtimeServer } from './helpers/fake-realtime-server.js';
import { RELAY_SECRET, SERVICE_KEY, SESSION, closedAfterEachTest, listen, startRelay, until, type RunningRelay } from './helpers/relay-setup.js';
import { runSession } from './helpers/realtime-session.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';

const closers = closedAfterEachTest(() => vi.useRealTimers());

const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);

const emulator = (options?: EmulatorOptions): Promise<RunningEmulator> => closers.emulator(options);
const fake = (): Promise<FakeRealtimeServer> => closers.fake();

/** Fake clocks for the long bounds; sockets, `setImmediate` and `nextTick` stay real. */
function fakeClock(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
}

/** A stream of the library as a client of the relay, the token in place of the key. */
function streamThrough(r: RunningRelay, token: string, extra: Partial<ConstructorParameters<typeof RealtimeTranslateStream>[0]> = {}): RealtimeTranslateStream {
  return new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: token, realtimeUrl: r.host, quietPeriodMs: 500, reconnect: false, ...extra });
}

/* ------------------------------------------------------------------------------------------- */

describe('a client written for the service works through the relay, a token in place of the key', () => {
  it.for([
    ['in the x-api-key header (the library default)', false],
    ['in auth.api_key of the first session.update', true],
  ] as const)('RealtimeTranslateStream, the token %s: the speech fixture translated bit for bit', async ([, inSessionUpdate]) => {
    const service = await emulator();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const outcome = await runSession(streamThrough(r, r.relay.mintToken(), { sendKeyInSessionUpdate: inSessionUpdate }), [fixture.pcm]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.output.equals(expected)).toBe(true);
    expect(outcome.transcripts).toHaveLength(fixture.utterances.length);
  });

  it('what reaches the service: the relay key in x-api-key, model and mode passed on, no token anywhere, session.update without auth', async () => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, headers: { 'user-agent': 'relay-test' } });
    const token = r.relay.mintToken();
    const browser = await r.connect({ token: null, query: 'model=lilac&mode=fast&other=1' });
    browser.send({ type: 'session.update', session: SESSION, auth: { api_key: token }, extra: { kept: true } });
    const request = await service.nextUpgradeRequest();
    const peer = await service.nextPeer();
    const update = await peer.waitForEvent('session.update');
    expect(request.headers['x-api-key']).toBe(SERVICE_KEY);
    expect(request.headers['user-agent']).toBe('relay-test');
    expect(new URL(request.url!, 'http://x').search).toBe('?model=lilac&mode=fast');
    expect(JSON.stringify(request.headers)).not.toContain(token);
    expect(update).toEqual({ type: 'session.update', session: SESSION, extra: { kept: true } });
  });

  it('the token as a subprotocol: answered with rt-translate when offered beside it, else with the token protocol itself', async () => {
    const service = await emulator();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const both = await r.connect({ token: null, protocols: ['rt-translate', `rt-translate.token.${r.relay.mintToken()}`] });
    expect(both.protocol).toBe('rt-translate');
    const alone = r.relay.mintToken();
    const only = await r.connect({ token: null, protocols: [`rt-translate.token.${alone}`] });
    expect(only.protocol).toBe(`rt-translate.token.${alone}`);
    for (const browser of [both, only]) {
      browser.send({ type: 'session.update', session: SESSION });
      expect(await browser.waitForEvent('session.created')).toMatchObject({ type: 'session.created' });
    }
    expect(service.realtimeSessions()).toHaveLength(2);
  });

  it('upper layers: Express and Fastify hand over their http.Server, and the relay leaves other upgrade paths to their listeners', async () => {
    const service = await emulator();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    // Another WebSocket endpoint on the same server, with its own listener.
    r.server.on('upgrade', (req, socket) => {
      if (req.url === '/other') socket.end('HTTP/1.1 418 I am a teapot\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
    expect(await BrowserClient.refusal(`${r.host}/other`)).toEqual({ status: 418, body: '' });
    const browser = await r.connect();
    browser.send({ type: 'session.update', session: SESSION });
    await browser.waitForEvent('session.created');
  });

  it('alone on its server, an upgrade on another path gets 404 (nobody else would answer it)', async () => {
    const r = await startRelay(closers, { realtimeUrl: (await fake()).realtimeUrl });
    const refusal = await BrowserClient.refusal(`${r.host}/elsewhere`);
    expect(refusal.status).toBe(404);
  });
});

/* ------------------------------------------------------------------------------------------- */

describe('refused at the handshake, before any upstream connection', () => {
  const SECRET_B = 'another-relay-secret-of-at-least-32-bytes';

  it.for([
    ['a token that is not one', (): string => 'not-a-token', 'unauthorized', 'The relay token is not valid.'],
    ['a token of another relay (another secret)', (): string => mintToken(Buffer.from(SECRET_B), {}, 10), 'unauthorized', 'The relay token is not valid.'],
    [
      'a tampered token (its expiry pushed back)',
      (): string => {
        const token = mintToken(Buffer.from(RELAY_SECRET), { ttlMs: 1000 }, 10);
        const [prefix, claims, signature] = token.split('.');
        const forged = { ...(JSON.parse(Buffer.from(claims!, 'base64url').toString()) as object), e: Date.now() + 86_400_000 };
        return `${prefix}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${signature}`;
      },
      'unauthorized',
      'The relay token is not valid.',
    ],
    [
      'an expired token',
      (): string => mintToken(Buffer.from(RELAY_SECRET), { ttlMs: 1 }, 10, Date.now() - 1000),
      'expired',
      'The relay token has expired: get a new one.',
    ],
  ] as const)("%s: HTTP 401 in the service's error shape", async ([, token, reason, message]) => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    for (const where of ['query', 'subprotocol', 'header'] as const) {
      const t = token();
      const options =
        where === 'query'
          ? { token: t }
          : where === 'subprotocol'
            ? { token: null, protocols: [`rt-translate.token.${t}`] }
            : { token: null, headers: { 'x-api-key': t } };
      const url = options.token === null ? r.url : `${r.url}?token=${encodeURIComponent(t)}`;
      const refusal = await BrowserClient.refusal(url, options);
      expect(refusal.status).toBe(401);
      expect(JSON.parse(refusal.body)).toEqual({ error: message, status: 401 });
    }
    expect(r.relay.stats.refused[reason]).toBe(3);
    expect(service.upgradeRequests).toBe(0);
  });

  it('a token that expires: accepted until its last millisecond, 401 from then on', async () => {
    fakeClock();
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const token = r.relay.mintToken({ ttlMs: 60_000 });
    vi.setSystemTime(Date.now() + 59_999);
    const browser = await r.connect({ token });
    expect(browser.isClosed).toBe(false);
    vi.setSystemTime(Date.now() + 1);
    expect(await BrowserClient.refusal(`${r.url}?token=${token}`)).toMatchObject({ status: 401 });
    expect(r.relay.stats.refused.expired).toBe(1);
  });

  it('no credential, with tokens in session.update turned off: 401', async () => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, tokenInSessionUpdate: false });
    const refusal = await BrowserClient.refusal(r.url);
    expect(refusal).toEqual({
      status: 401,
      body: JSON.stringify({ error: 'No relay token: pass it as ?token= or in the subprotocol rt-translate.token.<token>.', status: 401 }),
    });
    expect(service.upgradeRequests).toBe(0);
  });

  it.for([
    ['a page of another site', { origin: 'https://evil.example' }, undefined, 403],
    ['a sandboxed frame (Origin: null)', { origin: 'null' }, undefined, 403],
    ["the page's own host", { origin: 'http://HOST' }, undefined, 101],
    ['a loopback page (development)', { origin: 'http://localhost:5173' }, undefined, 101],
    ['no Origin (not a browser)', {}, undefined, 101],
    ['a listed origin', { origin: 'https://app.example.com' }, ['https://app.example.com:443'], 101],
    ['an unlisted origin, the list given', { origin: 'http://localhost:5173' }, ['https://app.example.com'], 403],
    ["any origin, with '*'", { origin: 'https://evil.example' }, '*', 101],
  ] as const)('origin: %s', async ([, options, allowedOrigins, status]) => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, ...(allowedOrigins ? { allowedOrigins } : {}) });
    const origin = 'origin' in options ? options.origin.replace('HOST', `127.0.0.1:${r.port}`) : undefined;
    const url = `${r.url}?token=${r.relay.mintToken()}`;
    if (status === 101) {
      const browser = await BrowserClient.connect(url, origin ? { origin } : {});
      closers.add(() => browser.ws.terminate());
      expect(browser.ws.readyState).toBe(WebSocket.OPEN);
    } else {
      const refusal = await BrowserClient.refusal(url, { origin });
      expect(refusal).toEqual({ status: 403, body: JSON.stringify({ error: "This page's origin may not connect to the relay.", status: 403 }) });
      expect(r.relay.stats.refused.origin).toBe(1);
    }
    expect(service.upgradeRequests).toBe(0);
  });
});

describe('a token in the first session.update', () => {
  it.for([
    ['no token', undefined, 'unauthorized', 401, 'No relay token: send it in auth.api_key of the first session.update.'],
    ['a token that is not valid', 'rtt1.abc.def', 'unauthorized', 401, 'The relay token is not valid.'],
    ['the service key itself', SERVICE_KEY, 'unauthorized', 401, 'The relay token is not valid.'],
  ] as const)("%s: the service's error event, then 1008; nothing opened upstream", async ([, token, reason, code, message]) => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browser = await r.connect({ token: null });
    expect(r.relay.stats.pending).toBe(1);
    browser.send({ type: 'session.update', session: SESSION, ...(token ? { auth: { api_key: token } } : {}) });
    expect(await browser.closed).toEqual({ code: 1008, reason: message });
    expect(browser.events).toEqual([{ type: 'error', error: { message, code } }]);
    expect(r.relay.stats.refused[reason]).toBe(1);
    expect(service.upgradeRequests).toBe(0);
    await until(() => r.relay.stats.pending === 0, 'the pending slot to be freed');
  });
});

describe('caps', () => {
  it('maxSessions: one more gets 429; a slot freed (its session over) takes the next', async () => {
    const service = await emulator();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, maxSessions: 2, maxSessionsPerToken: 2 });
    const first = await r.connect();
    await r.connect();
    const refusal = await BrowserClient.refusal(`${r.url}?token=${r.relay.mintToken()}`);
    expect(refusal).toEqual({ status: 429, body: JSON.stringify({ error: 'The relay has its most sessions at once (2); try again later.', status: 429 }) });
    expect(r.relay.stats).toMatchObject({ sessions: 2, refused: { maxSessions: 1 } });
    first.ws.close();
    await until(() => r.relay.stats.sessions === 1, 'the slot to be freed');
    await r.connect();
  });

  it("a token's maxSessions (else maxSessionsPerToken): one more on that token gets 429, another token is admitted", async () => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const one = r.relay.mintToken();
    const two = r.relay.mintToken({ maxSessions: 2 });
    await r.connect({ token: one });
    expect(await BrowserClient.refusal(`${r.url}?token=${one}`)).toEqual({
      status: 429,
      body: JSON.stringify({ error: 'This token holds its most sessions at once; close one first.', status: 429 }),
    });
    await r.connect({ token: two });
    await r.connect({ token: two });
    expect((await BrowserClient.refusal(`${r.url}?token=${two}`)).status).toBe(429);
    expect(r.relay.stats).toMatchObject({ sessions: 3, refused: { maxSessionsPerToken: 2 } });
  });

  it("over the token's cap with the token in session.update: the error event (429), then 1013", async () => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const token = r.relay.mintToken();
    await r.connect({ token });
    const late = await r.connect({ token: null });
    late.send({ type: 'session.update', session: SESSION, auth: { api_key: token } });
    const message = 'This token holds its most sessions at once; close one first.';
    expect(await late.closed).toEqual({ code: 1013, reason: message });
    expect(late.events).toEqual([{ type: 'error', error: { message, code: 429 } }]);
    expect(service.upgradeRequests).toBe(0);
  });

  it('maxPendingConnections: connections without a credential beyond it get 429; admitted ones do not count', async () => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, maxPendingConnections: 1 });
    await r.connect({ token: null });
    expect((await BrowserClient.refusal(r.url)).status).toBe(429);
    await r.connect();
    expect(r.relay.stats).toMatchObject({ sessions: 1, pending: 1, refused: { maxPendingConnections: 1 } });
  });
});

describe("authorize: the application's own check", () => {
  it('false: 401; true: admitted without a token; the request is what the browser sent', async () => {
    const service = await emulator();
    const seen: string[] = [];
    const r = await startRelay(closers, {
      realtimeUrl: service.realtimeUrl,
      tokenInSessionUpdate: false,
      authorize: (req) => {
        seen.push(req.headers.cookie ?? '');
        return req.headers.cookie === 'session=ok';
      },
    });
    expect(await BrowserClient.refusal(r.url, { headers: { cookie: 'session=no' } })).toEqual({
      status: 401,
      body: JSON.stringify({ error: 'Not authorized to use the relay.', status: 401 }),
    });
    const browser = await r.connect({ token: null, headers: { cookie: 'session=ok' } });
    browser.send({ type: 'session.update', session: SESSION });
    await browser.waitForEvent('session.created');
    expect(seen).toEqual(['session=no', 'session=ok']);
    // With a token too: both must agree.
    expect((await BrowserClient.refusal(`${r.url}?token=${r.relay.mintToken()}`, { headers: { cookie: 'session=no' } })).status).toBe(401);
  });

  it("a grant with a key: the key's sessions are capped, other keys are not", async () => {
    const r = await startRelay(closers, {
      realtimeUrl: (await fake()).realtimeUrl,
      authorize: (req) => ({ key: req.headers['x-user'] as string, maxSessions: 1 }),
    });
    await r.connect({ token: null, headers: { 'x-user': 'ada' } });
    expect((await BrowserClient.refusal(r.url, { headers: { 'x-user': 'ada' } })).status).toBe(429);
    await r.connect({ token: null, headers: { 'x-user': 'grace' } });
    expect(r.relay.stats).toMatchObject({ sessions: 2, pending: 0, refused: { maxSessionsPerKey: 1 } });
  });

  it.for([
    ['throws', () => Promise.reject(new Error('db down'))],
    ['answers something else than a boolean or a grant', () => 'yes' as unknown as boolean],
  ] as const)('authorize %s: 503, nothing opened', async ([, authorize]) => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, authorize });
    expect(await BrowserClient.refusal(r.url)).toEqual({
      status: 503,
      body: JSON.stringify({ error: 'Authorization is unavailable; try again later.', status: 503 }),
    });
    expect(r.relay.stats.refused.authorize).toBe(1);
    expect(service.upgradeRequests).toBe(0);
  });

  it('an authorize that never answers: 503 at firstMessageTimeoutMs, not before', async () => {
    fakeClock();
    const service = await fake();
    let asked = 0;
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, authorize: () => (asked++, new Promise<boolean>(() => undefined)) });
    const refused = BrowserClient.refusal(r.url);
    await until(() => asked === 1, 'authorize to be asked');
    await vi.advanceTimersByTimeAsync(9_999);
    expect(r.relay.stats.refused.authorize).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(await refused).toMatchObject({ status: 503 });
  });
  it('close() while authorize has not answered: the handshake is dropped at once, not left waiting on authorize', async () => {
    fakeClock();
    const service = await fake();
    let asked = 0;
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, authorize: () => (asked++, new Promise<boolean>(() => undefined)) });
    const attempt = BrowserClient.connect(r.url).then(
      () => 'upgraded',
      (error: unknown) => error,
    );
    await until(() => asked === 1, 'authorize to be asked');
    await r.relay.close();
    expect(await attempt).toBeInstanceOf(Error);
    expect(r.relay.stats.refused).toMatchObject({ authorize: 0, closing: 0 });
    expect(service.upgradeRequests).toBe(0);
  });
});

describe('the first message', () => {
  it('none within 10 s: the error event, then 1008 at 10 000 ms (open at 9 999); nothing opened upstream', async () => {
    fakeClock();
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const admitted = await r.connect();
    const pending = await r.connect({ token: null });
    await vi.advanceTimersByTimeAsync(9_999);
    expect(admitted.isClosed || pending.isClosed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const message = 'No session.update within 10000 ms of connecting.';
    for (const browser of [admitted, pending]) {
      expect(await browser.closed).toEqual({ code: 1008, reason: message });
      expect(browser.events).toEqual([{ type: 'error', error: { message, code: 408 } }]);
    }
    expect(r.relay.stats.refused.firstMessage).toBe(2);
    expect(service.upgradeRequests).toBe(0);
  });

  it.for([
    ['an append', { type: 'input_audio_buffer.append', audio: 'AAAA' }, 'The first event must be session.update (got audio).'],
    ['another event', { type: 'response.cancel' }, 'The first event must be session.update (got "response.cancel").'],
    ['text that is not JSON', 'hello', 'The event is not valid JSON. It was not forwarded. The first event must be session.update.'],
  ] as const)('%s first: the error event (400), then 1008', async ([, first, message]) => {
    const service = await fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browser = await r.connect();
    browser.send(first);
    expect(await browser.closed).toEqual({ code: 1008, reason: message.length > 123 ? expect.any(String) : message });
    expect(browser.events).toEqual([{ type: 'error', error: { message, code: 400 } }]);
    expect(r.relay.stats.refused.protocol).toBe(1);
    expect(service.upgradeRequests).toBe(0);
  });
});

/* ------------------------------------------------------------------------------------------- */

describe('options', () => {
  const server = { on() {}, off() {}, listenerCount: () => 0 } as unknown as RealtimeRelayOptions['server'];
  const base = { server, apiKey: SERVICE_KEY, realtimeUrl: 'wss://realtime.example.com' };

  it.for([
    [
      'server',
      { server: {} },
      'Invalid server: expected an http.Server or https.Server (Express: the value of app.listen(); Fastify: fastify.server) (got an object).',
    ],
    ['path', { path: 'v1/realtime' }, `Invalid path: expected a URL path starting with '/' (no query) (got "v1/realtime").`],
    ['secret', { secret: 'short' }, 'Invalid secret: expected a string or Buffer of at least 32 bytes (e.g. randomBytes(32)) (got 5 bytes).'],
    [
      'allowedOrigins',
      { allowedOrigins: 'https://a.example' },
      `Invalid allowedOrigins: expected '*' or an array of origins such as 'https://app.example.com' (got "https://a.example").`,
    ],
    [
      'allowedOrigins[1]',
      { allowedOrigins: ['https://a.example', 'https://b.example/app'] },
      `Invalid allowedOrigins[1]: expected an origin such as 'https://app.example.com' (scheme, host and port only) (got "https://b.example/app").`,
    ],
    ['authorize', { authorize: true }, 'Invalid authorize: expected a function (request) => boolean | { maxSessions?, key? } | a promise of one (got true).'],
    ['tokenInSessionUpdate', { tokenInSessionUpdate: 'no' }, 'Invalid tokenInSessionUpdate: expected true or false (got "no").'],
    ['maxSessions', { maxSessions: 0 }, 'Invalid maxSessions: expected an integer from 1 to 100000 (got 0).'],
    ['maxSessionsPerToken', { maxSessions: 5, maxSessionsPerToken: 6 }, 'Invalid maxSessionsPerToken: expected an integer from 1 to 5 (got 6).'],
    ['maxPendingConnections', { maxPendingConnections: -1 }, 'Invalid maxPendingConnections: expected an integer from 0 to 100000 (got -1).'],
    ['firstMessageTimeoutMs', { firstMessageTimeoutMs: 0 }, 'Invalid firstMessageTimeoutMs: expected an integer >= 1 (got 0).'],
    ['clientPingIntervalMs', { clientPingIntervalMs: 1.5 }, 'Invalid clientPingIntervalMs: expected an integer >= 1 (got 1.5).'],
    ['maxClientBufferBytes', { maxClientBufferBytes: 0 }, 'Invalid maxClientBufferBytes: expected an integer >= 1 (got 0).'],
    ['reconnect.maxAttempts', { reconnect: { maxAttempts: 0 } }, 'Invalid reconnect.maxAttempts: expected an integer from 1 to 1000 (got 0).'],
  ] as const)('%s: a ValidationError naming it', ([field, bad, message]) => {
    const attempt = () => createRealtimeRelay({ ...base, ...(bad as object) } as RealtimeRelayOptions);
    expect(attempt).toThrow(ValidationError);
    expect(attempt).toThrow(message);
    try {
      attempt();
    } catch (error) {
      expect((error as ValidationError).field).toBe(field);
    }
  });

  it('no key, and plain text to a host that is not loopback: ConfigErrors; the key is never quoted', () => {
    const saved = process.env.RT_TRANSLATE_API_KEY;
    delete process.env.RT_TRANSLATE_API_KEY;
    try {
      expect(() => createRealtimeRelay({ server, realtimeUrl: 'wss://realtime.example.com' })).toThrow(ConfigError);
    } finally {
      if (saved !== undefined) process.env.RT_TRANSLATE_API_KEY = saved;
    }
    const insecure = () => createRealtimeRelay({ ...base, realtimeUrl: 'ws://realtime.example.com' });
    expect(insecure).toThrow(ConfigError);
    expect(insecure).toThrow('Refusing plain-text ws:// to realtime.example.com');
    expect(() => createRealtimeRelay({ ...base, realtimeUrl: 'ws://realtime.example.com', allowInsecure: true })).not.toThrow();
    expect(() => createRealtimeRelay({ ...base, maxSessions: SERVICE_KEY as unknown as number })).toThrow(
      `Invalid maxSessions: expected an integer from 1 to 100000 (got a string of ${SERVICE_KEY.length} characters).`,
    );
  });

  it('neither the relay, its stats nor its options show the key or the secret when inspected', async () => {
    const { server: real } = await listen(closers);
    const relay = createRealtimeRelay({ server: real, apiKey: SERVICE_KEY, realtimeUrl: 'wss://realtime.example.com', secret: RELAY_SECRET });
    closers.add(() => relay.close());
    const shown = inspect(relay, { depth: 10, showHidden: true }) + JSON.stringify(relay.stats) + inspect(relay.stats);
    expect(shown).not.toContain(SERVICE_KEY);
    expect(shown).not.toContain(RELAY_SECRET);
  });
});
