/**
 * The service's official TypeScript SDK (`@camb-ai/sdk` 1.2.0, `client.realtime.connect()`)
 * through the relay, a token in place of the key. npm has only 1.0.1 (no realtime client), so
 * `SdkWire` below is written from the 1.2.0 source (typescript/api/resources/realtime/ of
 * Camb-ai/cambai-typescript-sdk) to put on the wire exactly what that client does:
 *
 * - the key from `connect({ apiKey })`, else the client's `apiKey`, a value or a function of one
 *   (the SDK's Supplier), read once per `connect()`;
 * - the URL: `baseUrl` with http(s) turned into ws(s) and one trailing slash dropped, then
 *   `/v1/realtime?model=<model>` (`iris` when none is given); nothing else in the query;
 * - no subprotocol; no header of its own: in a browser the platform WebSocket (the page's Origin
 *   goes with it), in Node the `ws` package with the client's own `headers` and its default
 *   options (permessage-deflate offered), and no Origin;
 * - right after the handshake, one text frame: `{"type":"session.update","session":{"model",
 *   "source_language","target_language","output_modalities"[,"voice":{"type":"cloned",
 *   "voice_id"}]},"auth":{"api_key":KEY}}`, the tags as the caller wrote them (`en-US`),
 *   `output_modalities` `["text","audio"]` by default;
 * - audio as `{"type":"input_audio_buffer.append","audio":BASE64}`, one per `sendAudio(chunk)`,
 *   the chunk's bytes as given (any length; the SDK's file example sends 100 ms, 4800 bytes, once
 *   the session is ready; its Node microphone passes on what sox gives);
 * - `close()`: a close frame 1000, no reason;
 * - reading: audio from binary frames and from `response.audio.delta`'s `delta`, an `error`
 *   event's `error.message`, ready on `session.created`, and a close before it ends
 *   `waitUntilReady()` with `WebSocket closed before the session became ready: code=C reason=R`.
 *
 * Behind the relay: the emulator (the fixture translated bit for bit) or the scripted fake
 * service (what reaches the service, byte for byte). `npm run check:sdk` runs the real SDK's
 * realtime client through the relay when the installed SDK has one.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { WebSocket, type RawData } from 'ws';
import type { RealtimeRelay, RealtimeRelayOptions } from '../lib/index.js';
import { mintToken } from '../lib/relay/relay-tokens.js';
import { RELAY_SECRET, SERVICE_KEY, closedAfterEachTest, startRelay, until } from './helpers/relay-setup.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { waitFor } from './helpers/wait-for.js';

const closers = closedAfterEachTest();

const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** What `connect()` takes (the SDK's ConnectOptions and the client's options it reads). */
interface SdkConnect {
  baseUrl: string;
  /** A value, or a function of one (sync or async): the SDK's Supplier. */
  apiKey: string | (() => string | Promise<string>);
  sourceLanguage: string;
  targetLanguage: string;
  model?: string;
  outputModalities?: string[];
  voiceId?: number;
  /** The client's `headers`: in Node, what makes it use `ws` (and send them). */
  headers?: Record<string, string>;
  /** The page's origin, when it runs in a browser (sent by the platform, not by the SDK). */
  pageOrigin?: string;
}

/** One realtime session as the SDK 1.2.0 runs it, on the wire. */
class SdkWire {
  readonly ws: WebSocket;
  /** Text events received, parsed, in order. */
  readonly events: Array<Record<string, unknown>> = [];
  /** `error` events as the SDK hands them to its listeners: the nested message. */
  readonly errors: string[] = [];
  /** Output audio received (binary frames and JSON deltas), in order. */
  readonly #audio: Buffer[] = [];
  readonly ready: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(ws: WebSocket, first: string) {
    this.ws = ws;
    ws.binaryType = 'arraybuffer';
    // Listeners before the handshake completes, as the SDK attaches them.
    let ready!: () => void;
    let notReady!: (error: Error) => void;
    this.ready = new Promise((resolve, reject) => ((ready = resolve), (notReady = reject)));
    this.ready.catch(() => undefined);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const bytes = Buffer.from(data as ArrayBuffer);
      if (isBinary) {
        this.#audio.push(bytes);
        return;
      }
      const event = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
      this.events.push(event);
      if (event.type === 'response.audio.delta') this.#audio.push(Buffer.from(String(event.delta ?? ''), 'base64'));
      if (event.type === 'error') this.errors.push(String((event.error as { message?: unknown } | undefined)?.message ?? 'Unknown error'));
      if (event.type === 'session.created') ready();
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code: number, reason: Buffer) => {
        notReady(new Error(`WebSocket closed before the session became ready: code=${code} reason=${reason.toString('utf8')}`));
        resolve({ code, reason: reason.toString('utf8') });
      }),
    );
    ws.once('open', () => ws.send(first));
  }

  /** `client.realtime.connect(options)`: resolves once the handshake is done and session.update sent; rejects as the SDK's transport does when it fails. */
  static async connect(options: SdkConnect): Promise<SdkWire> {
    const key = typeof options.apiKey === 'function' ? await options.apiKey() : options.apiKey;
    const base = options.baseUrl
      .replace(/^https:\/\//, 'wss://')
      .replace(/^http:\/\//, 'ws://')
      .replace(/\/$/, '');
    const url = `${base}/v1/realtime?${new URLSearchParams({ model: options.model ?? 'iris' }).toString()}`;
    const session: Record<string, unknown> = {
      model: options.model ?? 'iris',
      source_language: options.sourceLanguage,
      target_language: options.targetLanguage,
      output_modalities: options.outputModalities ?? ['text', 'audio'],
    };
    if (options.voiceId !== undefined) session.voice = { type: 'cloned', voice_id: options.voiceId };
    const first = JSON.stringify({ type: 'session.update', session, auth: { api_key: key } });
    const ws = new WebSocket(url, { headers: options.headers ?? {}, ...(options.pageOrigin !== undefined ? { origin: options.pageOrigin } : {}) });
    const wire = new SdkWire(ws, first);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', (error) => reject(new Error(`WebSocket connect failed: ${error.message}`)));
    });
    ws.on('error', () => undefined);
    return wire;
  }

  /** `session.sendAudio(chunk)`. */
  sendAudio(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: chunk.toString('base64') }));
  }

  /** `session.close()`. */
  close(): void {
    this.ws.close(1000);
  }

  audio(): Buffer {
    return Buffer.concat(this.#audio);
  }

  ofType(type: string): Array<Record<string, unknown>> {
    return this.events.filter((e) => e.type === type);
  }

  /** Resolves once `bytes` of output audio have come. */
  waitForAudio(bytes: number): Promise<Buffer> {
    return waitFor(() => (this.#audio.reduce((n, b) => n + b.length, 0) >= bytes ? this.audio() : undefined), { onEvent: [this.ws, 'message'] });
  }
}

/**
 * An application: its HTTP server answers `GET /realtime-token` for a signed-in user (the
 * `session=USER` cookie) with a token minted for them, and holds the relay.
 */
async function startApp(
  options: Partial<RealtimeRelayOptions> & { realtimeUrl: string },
): Promise<{ relay: RealtimeRelay; base: string; origin: string; tokensFor: string[] }> {
  const tokensFor: string[] = [];
  let relay: RealtimeRelay | undefined;
  const r = await startRelay(closers, options, (req: IncomingMessage, res: ServerResponse) => {
    const user = /(?:^|;\s*)session=([a-z]+)/.exec(req.headers.cookie ?? '')?.[1];
    if (req.url !== '/realtime-token' || user === undefined || relay === undefined) return void res.writeHead(user === undefined ? 401 : 404).end();
    tokensFor.push(user);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: relay.mintToken({ ttlMs: 60_000, maxSessions: 1 }) }));
  });
  relay = r.relay;
  const origin = `http://127.0.0.1:${r.port}`;
  return { relay, base: `${origin}/`, origin, tokensFor };
}

/** The SDK's key supplier in an app: the signed-in user's token, fetched from the app. */
function tokenSupplier(origin: string, user: string): () => Promise<string> {
  return async () => {
    const response = await fetch(`${origin}/realtime-token`, { headers: { cookie: `session=${user}` } });
    return ((await response.json()) as { token: string }).token;
  };
}

/** The fixture in the SDK file example's appends: 100 ms (4800 bytes) each. */
function speak(session: SdkWire): void {
  for (let at = 0; at < fixture.pcm.length; at += 4800) session.sendAudio(fixture.pcm.subarray(at, at + 4800));
}

/* ------------------------------------------------------------------------------------------- */

describe('the official SDK realtime client through the relay, a token in place of the key', () => {
  it.for([
    ["in Node (the ws package, the client's headers, no Origin)", 'node'],
    ["in a browser (no headers, the page's Origin: the app's own)", 'browser'],
  ] as const)('%s: the fixture translated bit for bit; the token came from the app for its signed-in user', async ([, runsIn]) => {
    const service = await closers.emulator();
    const app = await startApp({ realtimeUrl: service.realtimeUrl });
    const session = await SdkWire.connect({
      baseUrl: app.base,
      apiKey: tokenSupplier(app.origin, 'ada'),
      sourceLanguage: 'en-US',
      targetLanguage: 'es-ES',
      ...(runsIn === 'node' ? { headers: { 'x-app': 'sdk-test' } } : { pageOrigin: app.origin }),
    });
    closers.add(() => session.ws.terminate());
    await session.ready;
    expect(session.ofType('session.created')).toEqual([
      {
        type: 'session.created',
        session: expect.objectContaining({ model: 'iris', source_language: 'en-us', target_language: 'es-es', id: expect.any(String) }),
      },
    ]);
    speak(session);
    expect((await session.waitForAudio(expected.length)).equals(expected)).toBe(true);
    await waitFor(() => session.ofType('response.audio.done').length === fixture.utterances.length, { onEvent: [session.ws, 'message'] });
    expect(session.ofType('conversation.item.input_audio_transcription.completed')).toHaveLength(fixture.utterances.length);
    expect(session.errors).toEqual([]);
    expect(app.tokensFor).toEqual(['ada']);
    expect(JSON.stringify(session.events)).not.toContain(SERVICE_KEY);
    session.close();
    expect(await session.closed).toEqual({ code: 1000, reason: '' });
    await until(() => app.relay.stats.sessions === 0 && app.relay.stats.upstream === 0, 'the session to end on both sides');
  });

  it('binary output audio (newer servers): reaches the SDK as binary frames, bit for bit', async () => {
    const service = await closers.emulator({ audioFrames: 'binary' });
    const app = await startApp({ realtimeUrl: service.realtimeUrl });
    const session = await SdkWire.connect({
      baseUrl: app.base,
      apiKey: tokenSupplier(app.origin, 'ada'),
      sourceLanguage: 'en-US',
      targetLanguage: 'es-ES',
      headers: { 'x-app': 'sdk-test' },
    });
    closers.add(() => session.ws.terminate());
    await session.ready;
    speak(session);
    expect((await session.waitForAudio(expected.length)).equals(expected)).toBe(true);
    expect(session.ofType('response.audio.delta')).toEqual([]);
  });

  it("what reaches the service: the relay's key and ?model=, the SDK's session.update without auth, its audio byte for byte (odd-sized appends included); nothing of the token", async () => {
    const service = await closers.fake();
    const app = await startApp({ realtimeUrl: service.realtimeUrl });
    let token = '';
    const session = await SdkWire.connect({
      baseUrl: app.base,
      apiKey: async () => (token = await tokenSupplier(app.origin, 'grace')()),
      sourceLanguage: 'en-US',
      targetLanguage: 'de-DE',
      model: 'lilac',
      outputModalities: ['audio'],
      voiceId: 4242,
      headers: { 'x-app': 'sdk-test' },
    });
    closers.add(() => session.ws.terminate());
    const request = await service.nextUpgradeRequest();
    const peer = await service.nextPeer();
    const update = await peer.waitForEvent('session.update');
    expect(request.headers['x-api-key']).toBe(SERVICE_KEY);
    expect(request.headers['x-app']).toBeUndefined();
    expect(new URL(request.url!, 'http://x').search).toBe('?model=lilac');
    expect(JSON.stringify(request.headers)).not.toContain(token);
    expect(update).toEqual({
      type: 'session.update',
      session: { model: 'lilac', source_language: 'en-US', target_language: 'de-DE', output_modalities: ['audio'], voice: { type: 'cloned', voice_id: 4242 } },
    });
    peer.sendSessionCreated();
    await session.ready;
    // Chunks as a microphone pipe gives them: any length, odd ones included.
    const sizes = [4801, 3, 9600, 1, 2047];
    const sent: Buffer[] = [];
    let at = 0;
    for (let i = 0; at < 96_000; i++) {
      const chunk = fixture.pcm.subarray(at, at + sizes[i % sizes.length]!);
      session.sendAudio(chunk);
      sent.push(chunk);
      at += chunk.length;
    }
    const all = Buffer.concat(sent);
    const whole = all.subarray(0, all.length & ~1);
    await peer.waitForAudioBytes(whole.length);
    expect(peer.audioDigest()).toBe(sha256(whole));
    expect(peer.events.filter((e) => JSON.stringify(e).includes(token))).toEqual([]);
    session.close();
    expect((await peer.closed).code).toBe(1000);
  });

  it("a token that has expired: the SDK's session gets the service's error shape, then 1008; waitUntilReady fails with it; nothing opened upstream", async () => {
    const service = await closers.fake();
    const app = await startApp({ realtimeUrl: service.realtimeUrl });
    const expired = mintToken(Buffer.from(RELAY_SECRET), { ttlMs: 1000 }, 10, Date.now() - 2000);
    const session = await SdkWire.connect({ baseUrl: app.base, apiKey: expired, sourceLanguage: 'en-US', targetLanguage: 'es-ES', pageOrigin: app.origin });
    await expect(session.ready).rejects.toThrow(
      'WebSocket closed before the session became ready: code=1008 reason=The relay token has expired: get a new one.',
    );
    expect(session.errors).toEqual(['The relay token has expired: get a new one.']);
    expect(service.upgradeRequests).toBe(0);
    expect(app.relay.stats.refused.expired).toBe(1);
  });

  it.for([
    ['a page of another site', { pageOrigin: 'https://elsewhere.example' }, {}, 403],
    [
      'tokens only in the handshake (tokenInSessionUpdate: false), which the SDK cannot do',
      { headers: { 'x-app': 'sdk-test' } },
      { tokenInSessionUpdate: false },
      401,
    ],
  ] as const)("%s: the SDK's connect() fails at the handshake (HTTP %i), nothing opened upstream", async ([, transport, relayOptions, status]) => {
    const service = await closers.fake();
    const app = await startApp({ realtimeUrl: service.realtimeUrl, ...relayOptions });
    const attempt = SdkWire.connect({
      baseUrl: app.base,
      apiKey: tokenSupplier(app.origin, 'ada'),
      sourceLanguage: 'en-US',
      targetLanguage: 'es-ES',
      ...transport,
    });
    await expect(attempt).rejects.toThrow(`WebSocket connect failed: Unexpected server response: ${status}`);
    expect(service.upgradeRequests).toBe(0);
  });
});
