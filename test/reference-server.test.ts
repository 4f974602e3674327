/**
 * The reference server (test/reference-server) against a bare `ws` client: its detection, each
 * answering policy, the output it sends, the handshake and its faults. Input is synthesized here
 * (bursts of a 200 Hz square wave between digital silence) or read from the speech fixture.
 */
import { EventEmitter } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startReferenceServer, type ReferenceServer, type ReferenceServerOptions } from './reference-server/index.js';

/** PCM16 mono 24 kHz: bytes per millisecond. */
const MS = 48;
const TRANSCRIPT = 'conversation.item.input_audio_transcription.completed';

/** A 200 Hz square wave at amplitude 6000 (-14.7 dBFS): voiced in every 10 ms frame. */
function burst(ms: number): Buffer {
  const out = Buffer.alloc(ms * MS);
  for (let i = 0; i < out.length / 2; i++) out.writeInt16LE(i % 120 < 60 ? 6000 : -6000, i * 2);
  return out;
}

const silence = (ms: number): Buffer => Buffer.alloc(ms * MS);
const pcm = (...parts: Buffer[]): Buffer => Buffer.concat(parts);

const fixture = readFileSync(new URL('./fixtures/speech-en-24k.wav', import.meta.url)).subarray(44);
const fixtureUtterances = (
  JSON.parse(readFileSync(new URL('./fixtures/speech-en-24k.json', import.meta.url), 'utf8')) as {
    utterances: Array<{ startSample: number; endSample: number }>;
  }
).utterances;

/** A received event (binary frames as `{ type: 'binary', data }`), with how much audio the client had sent by then. */
interface Received {
  type: string;
  at: number;
  sentBytes: number;
  data?: Buffer;
  [field: string]: unknown;
}

class Client extends EventEmitter {
  readonly log: Received[] = [];
  sentBytes = 0;
  closeCode: number | undefined;

  private constructor(readonly ws: WebSocket) {
    super();
    ws.on('message', (data, isBinary) => {
      const bytes = data as Buffer;
      const event = isBinary ? { type: 'binary', data: bytes } : (JSON.parse(bytes.toString('utf8')) as { type: string });
      this.log.push({ ...event, at: Date.now(), sentBytes: this.sentBytes });
      this.emit('change');
    });
    ws.on('close', (code) => {
      this.closeCode = code;
      this.emit('change');
    });
  }

  /** Connects with `x-api-key` (the server's key unless `key` says otherwise; null: no header). */
  static open(server: ReferenceServer, key: string | null = server.apiKey, query = ''): Promise<Client> {
    const ws = new WebSocket(`${server.realtimeUrl}/v1/realtime${query}`, { headers: key === null ? {} : { 'x-api-key': key } });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new Client(ws)));
      ws.once('error', reject);
    });
  }

  /** Sends session.update and waits for session.updated. */
  async begin(session: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<void> {
    this.send({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es', ...session }, ...extra });
    await this.next('session.updated');
  }

  send(event: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(event));
  }

  /** Sends audio at once, in appends of `chunkMs`. */
  append(audio: Buffer, chunkMs = 100): void {
    for (let at = 0; at < audio.length; at += chunkMs * MS) this.appendChunk(audio.subarray(at, at + chunkMs * MS));
  }

  /** Sends audio in real time, like a microphone, in appends of `chunkMs`. */
  async stream(audio: Buffer, chunkMs = 40): Promise<void> {
    const start = performance.now();
    for (let i = 0; i * chunkMs * MS < audio.length; i++) {
      const wait = start + i * chunkMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      this.appendChunk(audio.subarray(i * chunkMs * MS, (i + 1) * chunkMs * MS));
    }
  }

  /** Resolves once `done()` holds; rejects if the connection closes before. */
  until(done: () => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!done() && this.closeCode === undefined) return;
        this.off('change', check);
        if (done()) resolve();
        else reject(new Error(`closed (${this.closeCode}) after ${this.log.map((e) => e.type).join(', ')}`));
      };
      this.on('change', check);
      check();
    });
  }

  /** The `n`th received event of `type` (from 1), once it has arrived. */
  async next(type: string, n = 1): Promise<Received> {
    await this.until(() => this.all(type).length >= n);
    return this.all(type)[n - 1]!;
  }

  /** Resolves with the close code. */
  async closed(): Promise<number> {
    await this.until(() => this.closeCode !== undefined);
    return this.closeCode!;
  }

  all(type: string): Received[] {
    return this.log.filter((event) => event.type === type);
  }

  private appendChunk(chunk: Buffer): void {
    this.send({ type: 'input_audio_buffer.append', audio: chunk.toString('base64') });
    this.sentBytes += chunk.length;
  }
}

/** The responses as the client received them. */
interface WireResponse {
  transcript: string;
  text: string;
  audio: Buffer;
  /** The event types in order, runs of one type collapsed. */
  shape: string[];
  pieces: Buffer[];
}

function wireResponses(log: readonly Received[]): WireResponse[] {
  const out: WireResponse[] = [];
  for (const event of log) {
    if (event.type === TRANSCRIPT) out.push({ transcript: event.transcript as string, text: '', audio: Buffer.alloc(0), shape: [], pieces: [] });
    const current = out[out.length - 1];
    if (!current) continue;
    if (current.shape[current.shape.length - 1] !== event.type) current.shape.push(event.type);
    if (event.type === 'response.text.delta') current.text += event.delta as string;
    if (event.type === 'response.audio.delta') current.pieces.push(Buffer.from(event.delta as string, 'base64'));
    if (event.type === 'binary') current.pieces.push(event.data!);
    current.audio = Buffer.concat(current.pieces);
  }
  return out;
}

const FULL_SHAPE = [TRANSCRIPT, 'response.text.delta', 'response.audio.delta', 'response.text.done', 'response.audio.done'];

let server: ReferenceServer | undefined;
const clients: Client[] = [];

async function start(options?: ReferenceServerOptions): Promise<ReferenceServer> {
  server = await startReferenceServer(options);
  return server;
}

async function connect(key?: string | null, query?: string): Promise<Client> {
  const client = await Client.open(server!, key === undefined ? server!.apiKey : key, query);
  clients.push(client);
  return client;
}

/** A server with `options`, and a client whose session has started. */
async function startSession(options?: ReferenceServerOptions, session?: Record<string, unknown>): Promise<{ s: ReferenceServer; client: Client }> {
  const s = await start(options);
  const client = await connect();
  await client.begin(session);
  return { s, client };
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.ws.terminate();
  await server?.close();
  server = undefined;
});

describe('reference server: detection and the utterance policy', () => {
  it('answers each utterance once it ends, ignores noise, and keeps a short pause inside one utterance', async () => {
    const { s, client } = await startSession(undefined, { source_language: 'EN-US', target_language: 'ES-es' });
    const created = client.all('session.created')[0]!;
    expect(created.session).toMatchObject({
      source_language: 'en-us',
      target_language: 'es-es',
      output_modalities: ['text', 'audio'],
      voice: { type: 'default' },
    });
    expect((created.session as { id: string }).id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    // utterance 1 at 100-400 ms; 100 ms of noise; utterance 2 at 1700-2650 ms with a 250 ms pause inside
    client.append(pcm(silence(100), burst(300), silence(600), burst(100), silence(600), burst(400), silence(250), burst(300), silence(600)));
    await client.next('response.audio.done', 2);

    expect(s.responses.map((r) => [r.transcript, r.text, r.from / MS, r.to / MS])).toEqual([
      ['utterance 1 (0.30 s)', '[es-es] response 1 of session 1', 100, 400],
      ['utterance 2 (0.95 s)', '[es-es] response 2 of session 1', 1700, 2650],
    ]);
    const wire = wireResponses(client.log);
    expect(wire.map((r) => r.shape)).toEqual([FULL_SHAPE, FULL_SHAPE]);
    expect(wire.map((r) => [r.transcript, r.text])).toEqual(s.responses.map((r) => [r.transcript, r.text]));
    // audio: 0.6 of the voiced span, in JSON pieces of 400 ms
    expect(wire.map((r) => r.audio.length)).toEqual([0.6 * 300 * MS, 0.6 * 950 * MS]);
    expect(wire.map((r) => r.pieces.map((p) => p.length))).toEqual([[8640], [19200, 8160]]);
    expect(Buffer.concat(wire.map((r) => r.audio))).toEqual(s.sentAudio());
    expect(client.all('response.text.done').map((e) => e.text)).toEqual(s.responses.map((r) => r.text));
    expect(client.all('binary')).toEqual([]);
    expect(s.sessions).toBe(1);
  });

  it('ends an utterance when the appends stop, and cuts one that reaches maxUtteranceMs', async () => {
    const { s, client } = await startSession({ maxUtteranceMs: 1000 });
    client.append(pcm(burst(2500), silence(600), burst(500)));
    const sentAt = Date.now();
    await s.waitForResponses(4);
    expect(s.responses.map((r) => [r.from / MS, r.to / MS])).toEqual([
      [0, 1000],
      [1000, 2000],
      [2000, 2500],
      [3100, 3600],
    ]);
    // the last one has no silence after it: answered once no append came for idleMs (300)
    expect(s.responses[3]!.startedAt - sentAt).toBeGreaterThanOrEqual(290);
  });

  it('finds the three sentences of the speech fixture sent at once', async () => {
    const { s, client } = await startSession();
    client.append(fixture);
    await s.waitForResponses(3);
    expect(s.responses.map((r) => r.transcript.split(' (')[0])).toEqual(['utterance 1', 'utterance 2', 'utterance 3']);
    for (const [i, r] of s.responses.entries()) {
      const measured = fixtureUtterances[i]!;
      // a different frame and threshold than the fixture's measurement: the edges agree within 60 ms
      expect(Math.abs(r.from / 2 - measured.startSample)).toBeLessThanOrEqual(60 * 24);
      expect(Math.abs(r.to / 2 - measured.endSample)).toBeLessThanOrEqual(60 * 24);
    }
  });
});

describe('reference server: other answering policies', () => {
  it("'idle' answers a file sent at once as one response, once the appends stop", async () => {
    const { s, client } = await startSession({ answer: 'idle' });
    client.append(fixture);
    await client.next('response.audio.done');
    const [only] = s.responses;
    expect(only!.transcript).toMatch(/^utterances 1-3 \(\d\.\d\d s\)$/);
    expect(only!.from / 2).toBeLessThan(fixtureUtterances[0]!.startSample + 60 * 24);
    expect(only!.to / 2).toBeGreaterThan(fixtureUtterances[2]!.endSample - 60 * 24);
    const seconds = Number(/\((\d\.\d\d) s\)/.exec(only!.transcript)![1]);
    expect(only!.audio.length / 2).toBeCloseTo(0.6 * seconds * 24_000, -3);
    client.ws.close();
    await s.allClosed();
    expect(s.responses).toHaveLength(1);
  });

  it("'merge' answers mergeCount utterances at a time, and the rest once the appends stop", async () => {
    const { s, client } = await startSession({ answer: 'merge', mergeCount: 3 });
    const one = pcm(burst(200), silence(500));
    client.append(pcm(one, one, one, one, one));
    await client.next('response.audio.done', 2);
    expect(s.responses.map((r) => [r.transcript, r.from / MS, r.to / MS])).toEqual([
      ['utterances 1-3 (0.60 s)', 0, 1600],
      ['utterances 4-5 (0.40 s)', 2100, 3000],
    ]);
    expect(s.responses.map((r) => r.audio.length)).toEqual([0.6 * 600 * MS, 0.6 * 400 * MS]);
  });

  it("'split' answers a long utterance once while it goes on, then the rest when it ends", async () => {
    // Streamed in real time: an idle time well above a busy machine's pauses between appends.
    const { s, client } = await startSession({ answer: 'split', splitMs: 400, idleMs: 1500 });
    await client.stream(pcm(silence(100), burst(1200), silence(600)));
    await client.next('response.audio.done', 2);
    expect(s.responses.map((r) => [r.transcript, r.from / MS, r.to / MS])).toEqual([
      ['utterance 1, part 1 (0.40 s)', 100, 500],
      ['utterance 1, part 2 (0.80 s)', 500, 1300],
    ]);
    // the first answer reached the client while the speech was still being sent
    expect(client.all('response.audio.done')[0]!.sentBytes).toBeLessThan(1300 * MS);
  });

  it('last { lateMs } holds each answer until speech comes again, and the last one until lateMs after the appends stop', async () => {
    const { s, client } = await startSession({ last: { lateMs: 400 } });
    const one = pcm(burst(300), silence(600));
    client.append(one);
    const sentAt = Date.now();
    await s.waitForResponses(1);
    expect(s.responses[0]!.doneAt - sentAt).toBeGreaterThanOrEqual(300 + 400 - 10);

    client.append(pcm(one, one));
    await s.waitForResponses(3);
    const [, second, third] = s.responses;
    // the second went out when the third utterance began; the third waited for idle + lateMs
    expect(third!.doneAt - second!.doneAt).toBeGreaterThanOrEqual(500);
    expect(s.heldAnswers).toBe(0);
  });

  it("last 'never' holds the final answer for good", async () => {
    const { s, client } = await startSession({ last: 'never' });
    client.append(pcm(burst(300), silence(600), burst(300), silence(600)));
    await s.waitForHeldAnswers(1);
    expect(s.responses.map((r) => r.transcript)).toEqual(['utterance 1 (0.30 s)']);
    await client.next('response.audio.done');
    client.ws.close();
    await s.allClosed();
    expect(s.responses).toHaveLength(1);
    expect(s.heldAnswers).toBe(1);
    expect(wireResponses(client.log)).toHaveLength(1);
  });
});

describe('reference server: output', () => {
  it("audio: 'binary' sends the audio as binary frames, one of them odd-sized", async () => {
    const { s, client } = await startSession({ audio: 'binary' });
    client.append(pcm(burst(1000), silence(600)));
    await client.next('response.audio.done');
    const [wire] = wireResponses(client.log);
    expect(wire!.shape).toEqual([TRANSCRIPT, 'response.text.delta', 'binary', 'response.text.done', 'response.audio.done']);
    expect(wire!.pieces.map((p) => p.length)).toEqual([19201, 9599]);
    expect(wire!.audio).toEqual(s.sentAudio());
    expect(wire!.audio.length).toBe(0.6 * 1000 * MS);
    expect(client.all('response.audio.delta')).toEqual([]);
  });

  it('audio is audioRatio of the voiced input, at least 100 ms, in pieces of pieceMs', async () => {
    const { s, client } = await startSession({ audioRatio: 0.5, pieceMs: 200 });
    client.append(pcm(burst(160), silence(600), burst(1000), silence(600)));
    await client.next('response.audio.done', 2);
    expect(s.responses.map((r) => r.audio.length)).toEqual([100 * MS, 500 * MS]);
    expect(wireResponses(client.log).map((r) => r.pieces.map((p) => p.length))).toEqual([[4800], [9600, 9600, 4800]]);
  });

  it('a text-only session gets no audio events and ends each response with response.text.done', async () => {
    const { s, client } = await startSession(undefined, { output_modalities: ['text'] });
    client.append(pcm(burst(300), silence(600), burst(300), silence(600)));
    await client.next('response.text.done', 2);
    expect(wireResponses(client.log).map((r) => r.shape)).toEqual([
      [TRANSCRIPT, 'response.text.delta', 'response.text.done'],
      [TRANSCRIPT, 'response.text.delta', 'response.text.done'],
    ]);
    expect(s.sentAudio().length).toBe(0);
  });

  it('a cold start sends session.starting at once and discards the audio sent before session.created', async () => {
    const s = await start({ coldStartMs: 200 });
    const client = await connect();
    client.send({ type: 'session.update', session: { source_language: 'en-us', target_language: 'fr-fr' } });
    client.append(pcm(burst(300), silence(600)));
    await client.next('session.updated');
    expect(client.log.map((e) => e.type)).toEqual(['session.starting', 'session.created', 'session.updated']);
    client.append(pcm(burst(200), silence(600)));
    await s.waitForResponses(1);
    expect(s.responses.map((r) => [r.transcript, r.text, r.from, r.to])).toEqual([['utterance 1 (0.20 s)', '[fr-fr] response 1 of session 1', 0, 200 * MS]]);
  });

  it('echoes the model and mode query parameters and an owned cloned voice in session.created', async () => {
    await start({ clonedVoices: [7] });
    const client = await connect(undefined, '?model=iris&mode=fast');
    await client.begin({ voice: { type: 'cloned', voice_id: 7 } });
    expect(client.all('session.created')[0]!.session).toMatchObject({ model: 'iris', mode: 'fast', voice: { type: 'cloned', voice_id: 7 } });
    expect(client.all('session.updated')[0]!.session).toMatchObject({ voice: { type: 'cloned', voice_id: 7 } });
  });
});

describe('reference server: handshake and errors', () => {
  it('accepts the key in auth.api_key without a header, and the header over a wrong auth.api_key', async () => {
    const s = await start({ apiKey: 'k-123' });
    const byAuth = await connect(null);
    await byAuth.begin({}, { auth: { api_key: 'k-123' } });
    const byHeader = await connect('k-123');
    await byHeader.begin({}, { auth: { api_key: 'wrong' } });
    expect(s.sessions).toBe(2);
  });

  it('answers a wrong x-api-key with HTTP 401 and an unknown path with 404', async () => {
    const s = await start();
    await expect(Client.open(s, 'wrong')).rejects.toThrow(/401/);
    const elsewhere = new WebSocket(`${s.realtimeUrl}/v2/realtime`, { headers: { 'x-api-key': s.apiKey } });
    await expect(new Promise((_resolve, reject) => elsewhere.once('error', reject))).rejects.toThrow(/404/);
    await s.allClosed();
  });

  it.each([
    ['a wrong auth.api_key', { auth: { api_key: 'wrong' } }, 401],
    ['no key at all', {}, 401],
  ])('without a header, %s gets error 401 and close 1008', async (_name, extra, code) => {
    await start();
    const client = await connect(null);
    client.send({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' }, ...extra });
    expect(await client.closed()).toBe(1008);
    expect(client.log.map((e) => [e.type, (e.error as { code: number }).code])).toEqual([['error', code]]);
  });

  it.each([
    ['an unsupported language', [{ type: 'session.update', session: { source_language: 'en-us', target_language: 'xx-yy' } }], 400],
    [
      'a cloned voice not owned',
      [{ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es', voice: { type: 'cloned', voice_id: 8 } } }],
      403,
    ],
    ['another event first', [{ type: 'input_audio_buffer.append', audio: '' }], 400],
  ])('%s as the first event gets an error and close 1008', async (_name, events, code) => {
    await start({ clonedVoices: [7] });
    const client = await connect();
    for (const event of events) client.send(event);
    expect(await client.closed()).toBe(1008);
    expect(client.log.map((e) => [e.type, (e.error as { code: number }).code])).toEqual([['error', code]]);
  });

  it('closes with 1008 when no session.update comes in time', async () => {
    await start({ sessionUpdateTimeoutMs: 100 });
    const client = await connect();
    expect(await client.closed()).toBe(1008);
    expect(client.log.map((e) => e.type)).toEqual(['error']);
  });

  it('answers unsupported, unknown, malformed and oversized events with error and stays open', async () => {
    const { s, client } = await startSession();
    for (const type of ['input_audio_buffer.clear', 'input_audio_buffer.commit', 'response.cancel', 'conversation.item.create']) client.send({ type });
    client.ws.send('{not json');
    client.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(256 * 1024 + 2).toString('base64') });
    client.send({ type: 'input_audio_buffer.append', audio: 'A'.repeat(1024 * 1024) });
    client.ws.send(Buffer.alloc(4800)); // binary client frames are ignored
    client.append(pcm(burst(300), silence(600)));
    await client.next('response.audio.done');
    const errors = client.all('error').map((e) => e.error as { code: number; message: string });
    expect(errors.map((e) => e.code)).toEqual([400, 400, 400, 400, 400, 413, 413]);
    expect(errors[0]!.message).toContain('input_audio_buffer.clear');
    expect(errors[3]!.message).toContain('conversation.item.create');
    expect(s.responses.map((r) => [r.from, r.to])).toEqual([[0, 300 * MS]]);
  });
});

describe('reference server: faults', () => {
  it('cuts the first session after dropAfterInputMs of audio, after the response in progress, and lets the next one be', async () => {
    // the utterance ends at 750 ms of input; the drop comes due at 800 ms, while its answer is on its way
    const s = await start({ dropAfterInputMs: 800 });
    const input = pcm(burst(300), silence(600));
    const first = await connect();
    await first.begin();
    first.append(input);
    expect(await first.closed()).toBe(1006);
    expect(wireResponses(first.log).map((r) => r.shape)).toEqual([FULL_SHAPE]);

    const second = await connect();
    await second.begin();
    second.append(input);
    await second.next('response.audio.done');
    second.ws.close();
    expect(await second.closed()).toBe(1005);
    expect(s.responses.map((r) => [r.session, r.index])).toEqual([
      [1, 1],
      [2, 1],
    ]);
  });

  it('spaces the pieces by pieceGapMs, and a drop due meanwhile waits for the last of them', async () => {
    // 600 ms of audio in two pieces; the drop comes due at 1500 ms of input, before the second piece
    const { s, client } = await startSession({ pieceGapMs: 100, dropAfterInputMs: 1500 });
    client.append(pcm(burst(1000), silence(600)));
    expect(await client.closed()).toBe(1006);
    const [wire] = wireResponses(client.log);
    expect(wire!.shape).toEqual(FULL_SHAPE);
    expect(wire!.audio.length).toBe(600 * MS);
    expect(client.all('response.audio.delta')).toHaveLength(2);
    // The gap is the server's: measured where the pieces are sent (their arrival times also
    // carry the client's own delays, which on a busy machine can bring them closer).
    const [response] = s.responses;
    expect(response!.doneAt - response!.startedAt).toBeGreaterThanOrEqual(99);
  });

  it('cuts at once when no response is on its way', async () => {
    const s = await start({ dropAfterInputMs: 200, drops: 2 });
    for (let i = 0; i < 2; i++) {
      const client = await connect();
      await client.begin();
      client.append(pcm(burst(300), silence(600)));
      expect(await client.closed()).toBe(1006);
    }
    expect(s.responses).toEqual([]);
    expect(s.sessions).toBe(2);
  });

  it('dropAll() cuts every open connection; close() ends the rest and the waits', async () => {
    const s = await start({ last: { lateMs: 5000 } });
    const a = await connect();
    const b = await connect();
    await a.begin();
    s.dropAll();
    expect([await a.closed(), await b.closed()]).toEqual([1006, 1006]);

    const c = await connect();
    await c.begin();
    c.append(pcm(burst(300), silence(600)));
    const waiting = s.waitForResponses(1);
    await s.close();
    await expect(waiting).rejects.toThrow(/closed/);
    expect(await c.closed()).toBe(1006);
    await s.allClosed();
  });
});

describe('reference server: options', () => {
  it.each<[ReferenceServerOptions, RegExp]>([
    [{ answer: 'sometimes' as 'idle' }, /option answer/],
    [{ mergeCount: 0 }, /option mergeCount/],
    [{ last: { lateMs: -1 } }, /option last/],
    [{ frameMs: 10.01 }, /option frameMs/],
    [{ answer: 'split', splitMs: 100 }, /option splitMs/],
    [{ idleMs: Number.NaN }, /option idleMs/],
    [{ hangover: 200 } as ReferenceServerOptions, /unknown option hangover/],
  ])('refuses %j', async (options, message) => {
    await expect(startReferenceServer(options)).rejects.toThrow(message);
  });
});

describe('independence', () => {
  it("imports nothing of the library's or the command's: only its own modules, Node's and ws", () => {
    const dir = new URL('./reference-server/', import.meta.url);
    const files = readdirSync(dir).filter((name) => name.endsWith('.ts'));
    expect(files.length).toBeGreaterThanOrEqual(5);
    const specifiers = files.flatMap((name) => {
      const source = readFileSync(new URL(name, dir), 'utf8');
      // Static imports and re-exports (`from '...'`), side-effect imports and dynamic imports.
      return [...source.matchAll(/\bfrom\s+'([^']+)'|\bimport\s*\(?\s*'([^']+)'/g)].map((m) => `${name}: ${m[1] ?? m[2]}`);
    });
    expect(specifiers.length).toBeGreaterThan(0);
    const foreign = specifiers.filter((entry) => {
      const specifier = entry.slice(entry.indexOf(': ') + 2);
      return !(/^\.\/[\w-]+\.js$/.test(specifier) || specifier.startsWith('node:') || specifier === 'ws');
    });
    expect(foreign).toEqual([]);
  });
});
