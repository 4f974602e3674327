import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import {
  DEFAULT_SESSION_UPDATE_TIMEOUT_MS,
  MAX_GROUP_BYTES,
  createRealtimeEmulator,
  type RealtimeEmulator,
  type RealtimeEmulatorOptions,
} from '../lib/emulator/realtime.js';
import { DEFAULT_VOICE_ID } from '../lib/realtime/codec.js';
import { VoiceRegistry } from '../lib/emulator/voices.js';
import { countHandles, expectNoLeakedHandles } from './helpers/handles.js';

/* ------------------------------------------------------------------------------------------- */
/* Audio: PCM16 LE mono 24 kHz                                                                 */

/** Bytes per millisecond. */
const MS = 48;
/** One frame of the emulator's detector (30 ms): inputs here keep their edges on that grid. */
const FRAME = 30 * MS;
const PIECE = 19_200;
const PAD = 300 * MS;

/** A 440 Hz tone, peak at -12 dBFS by default. */
function tone(ms: number, dbfs = -12): Buffer {
  const samples = Math.round(ms * 24);
  const amplitude = 32767 * 10 ** (dbfs / 20);
  const out = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return out;
}

/** Seeded uniform noise, peak at -12 dBFS. */
function noise(ms: number, seed: number): Buffer {
  const samples = ms * 24;
  const out = Buffer.alloc(samples * 2);
  let state = seed >>> 0;
  for (let i = 0; i < samples; i++) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    out.writeInt16LE(Math.round(((state / 2 ** 32) * 2 - 1) * 8190), i * 2);
  }
  return out;
}

function zeros(ms: number): Buffer {
  return Buffer.alloc(ms * MS);
}

/**
 * Input with three bursts; `bursts` are their byte ranges. Every edge is on the emulator's 30 ms
 * grid; the pauses (990 ms) are longer than its 900 ms of silence, and the 810 ms after the last
 * burst are not: that one is ended when the audio stops arriving (idle).
 */
function threeBursts(): { pcm: Buffer; bursts: Array<[number, number]> } {
  const parts = [zeros(120), tone(810), zeros(990), noise(1200, 7), zeros(990), tone(1500), zeros(810)];
  const bursts: Array<[number, number]> = [];
  let at = 0;
  parts.forEach((part, i) => {
    if (i % 2 === 1) bursts.push([at, at + part.length]);
    at += part.length;
  });
  return { pcm: Buffer.concat(parts), bursts };
}

/** Each burst with 300 ms of padding, clamped to the input's start. */
function paddedSlices(bursts: Array<[number, number]>): Array<[number, number]> {
  return bursts.map(([start, end]) => [Math.max(0, start - PAD), end + PAD]);
}

function appendEvent(pcm: Buffer): string {
  return JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
}

/* ------------------------------------------------------------------------------------------- */
/* A raw client that records every frame                                                       */

type Frame = { binary: Buffer } | { event: Record<string, any> };

const SESSION = { source_language: 'en-us', target_language: 'es-es' };

class Client {
  readonly frames: Frame[] = [];
  private readonly counts = new Map<string, number>();
  readonly closed: Promise<{ code: number; reason: string }>;
  private listeners = new Set<() => void>();

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      const buf = Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[]);
      const frame: Frame = isBinary ? { binary: buf } : { event: JSON.parse(buf.toString('utf8')) };
      this.frames.push(frame);
      const type = 'event' in frame ? String(frame.event.type) : 'binary';
      this.counts.set(type, (this.counts.get(type) ?? 0) + 1);
      for (const listener of this.listeners) listener();
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        for (const listener of this.listeners) listener();
      });
    });
  }

  /** JSON events only. */
  get events(): Array<Record<string, any>> {
    return this.frames.flatMap((frame) => ('event' in frame ? [frame.event] : []));
  }

  types(): string[] {
    return this.frames.map((frame) => ('event' in frame ? frame.event.type : 'binary'));
  }

  send(event: unknown): void {
    this.ws.send(typeof event === 'string' ? event : JSON.stringify(event));
  }

  sendAudio(pcm: Buffer, piece = 4800): void {
    for (let at = 0; at < pcm.length; at += piece) this.ws.send(appendEvent(pcm.subarray(at, at + piece)));
  }

  /** Resolves once `count` frames have arrived, or the socket closed (then with what came). */
  async waitFrames(count: number): Promise<Frame[]> {
    await this.until(() => this.frames.length >= count || this.ws.readyState === WebSocket.CLOSED);
    return this.frames;
  }

  /** Resolves once `count` events of `type` have arrived (or the socket closed). */
  async waitType(type: string, count = 1): Promise<void> {
    await this.until(() => (this.counts.get(type) ?? 0) >= count || this.ws.readyState === WebSocket.CLOSED);
  }

  private until(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      const check = (): void => {
        if (!done()) return;
        this.listeners.delete(check);
        resolve();
      };
      this.listeners.add(check);
    });
  }
}

type Closable = { realtimeUrl: string; close(): Promise<void> };
let running: Closable[] = [];
const clients: Client[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.ws.terminate();
  await Promise.all(running.map((emulator) => emulator.close()));
  running = [];
  vi.useRealTimers();
});

/** Most cases here are written for 300 ms of padding (the default is none; its own case says so). */
async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const started = await startEmulator({ port: 0, apiKeys: ['k1', 'k2'], paddingMs: 300, ...options });
  running.push(started);
  return started;
}

/**
 * The realtime part alone behind a bare HTTP server, for the tests that look at a session's
 * flow-control state (`sessions()`), which `startEmulator` does not expose.
 */
async function realtimePart(options: RealtimeEmulatorOptions): Promise<Closable & { part: RealtimeEmulator }> {
  const part = createRealtimeEmulator({ paddingMs: 300, ...options }, { apiKeys: new Set(['k1']), voices: new VoiceRegistry(), baseUrl: () => '' });
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req, socket, head) => part.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const closable = {
    part,
    realtimeUrl: `ws://127.0.0.1:${port}`,
    async close() {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      await part.close();
      server.closeAllConnections();
      await stopped;
    },
  };
  running.push(closable);
  return closable;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function connect(server: { realtimeUrl: string }, { key = 'k1', query = '' }: { key?: string | null; query?: string } = {}): Promise<Client> {
  const ws = new WebSocket(`${server.realtimeUrl}/v1/realtime${query}`, {
    headers: key === null ? {} : { 'x-api-key': key },
  });
  const client = new Client(ws);
  clients.push(client);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return client;
}

/** Connects, sends `session.update` and waits for `session.created` and `session.updated`. */
async function session(server: { realtimeUrl: string }, config: Record<string, unknown> = SESSION): Promise<Client> {
  const client = await connect(server);
  client.send({ type: 'session.update', session: config });
  await client.waitFrames(2);
  expect(client.types()).toEqual(['session.created', 'session.updated']);
  return client;
}

/** The frames one answered utterance must produce, in order. */
function responseTypes(audioBytes: number, options: { text?: boolean; audio?: boolean; framing?: 'json' | 'binary' } = {}): string[] {
  const { text = true, audio = true, framing = 'json' } = options;
  const types = ['conversation.item.input_audio_transcription.completed'];
  // The placeholder translation has seven words: "[es-es translation of utterance N, D.DD s]".
  if (text) types.push(...Array(7).fill('response.text.delta'), 'response.text.done');
  if (audio) {
    const pieces = Math.ceil(audioBytes / PIECE);
    types.push(...Array(pieces).fill(framing === 'json' ? 'response.audio.delta' : 'binary'), 'response.audio.done');
  }
  return types;
}

/** Output audio of the frames, in order, from JSON deltas and binary frames alike. */
function outputAudio(frames: Frame[]): Buffer[] {
  return frames.flatMap((frame) => {
    if ('binary' in frame) return [frame.binary];
    return frame.event.type === 'response.audio.delta' ? [Buffer.from(frame.event.delta, 'base64')] : [];
  });
}

function slices(pcm: Buffer, ranges: Array<[number, number]>): Buffer {
  return Buffer.concat(ranges.map(([a, b]) => pcm.subarray(a, b)));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/* ------------------------------------------------------------------------------------------- */

describe('realtime emulator: the happy path', () => {
  it.each(['json', 'binary'] as const)('returns each utterance as transcript, text, then its own audio (%s frames)', async (framing) => {
    const server = await emulator({ audioFrames: framing });
    const client = await session(server);
    const { pcm, bursts } = threeBursts();
    client.sendAudio(pcm);
    await client.waitType('response.audio.done', 3);

    const expected = paddedSlices(bursts);
    const durations = ['0.81', '1.20', '1.50'];
    const types = expected.flatMap(([a, b]) => responseTypes(b - a, { framing }));
    const frames = client.frames.slice(2);
    expect(frames.map((f) => ('event' in f ? f.event.type : 'binary'))).toEqual(types);

    const events = frames.flatMap((f) => ('event' in f ? [f.event] : []));
    expect(events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed')).toEqual(
      durations.map((d, i) => ({ type: 'conversation.item.input_audio_transcription.completed', transcript: `[en-us utterance ${i + 1}, ${d} s]` })),
    );
    const translations = durations.map((d, i) => `[es-es translation of utterance ${i + 1}, ${d} s]`);
    expect(events.filter((e) => e.type === 'response.text.done')).toEqual(translations.map((text) => ({ type: 'response.text.done', text })));
    const deltas = events.filter((e) => e.type === 'response.text.delta').map((e) => e.delta as string);
    expect(deltas.slice(0, 7)).toEqual(['[es-es', ' translation', ' of', ' utterance', ' 1,', ' 0.81', ' s]']);
    expect(deltas.join('')).toBe(translations.join(''));

    const audio = outputAudio(frames);
    expect(Buffer.concat(audio).equals(slices(pcm, expected))).toBe(true);
    // Pieces of 400 ms, the last of each response shorter.
    let at = 0;
    for (const [a, b] of expected) {
      const pieces = Math.ceil((b - a) / PIECE);
      const sizes = audio.slice(at, at + pieces).map((p) => p.length);
      expect(sizes).toEqual([...Array(pieces - 1).fill(PIECE), b - a - (pieces - 1) * PIECE]);
      at += pieces;
    }
  });
});

describe('realtime emulator: the first session.update', () => {
  it('waits 10 s by default, then sends error and closes', async () => {
    expect(DEFAULT_SESSION_UPDATE_TIMEOUT_MS).toBe(10_000);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const server = await emulator();
    const client = await connect(server);
    await vi.advanceTimersByTimeAsync(9_999);
    expect(client.frames).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    vi.useRealTimers();
    const closed = await client.closed;
    expect(client.events).toEqual([
      {
        type: 'error',
        error: { message: 'No session.update within 10000 ms of connecting: the first event must be session.update.', code: 408 },
      },
    ]);
    expect(closed.code).toBe(1008);
  });

  it('honours sessionUpdateTimeoutMs', async () => {
    const server = await emulator({ sessionUpdateTimeoutMs: 150 });
    const client = await connect(server);
    const closed = await client.closed;
    expect(client.events).toEqual([
      {
        type: 'error',
        error: { message: 'No session.update within 150 ms of connecting: the first event must be session.update.', code: 408 },
      },
    ]);
    expect(closed.code).toBe(1008);
  });

  it('ends the session when the first event is not session.update', async () => {
    const server = await emulator();
    const client = await connect(server);
    client.sendAudio(zeros(100));
    const closed = await client.closed;
    expect(client.events).toEqual([
      { type: 'error', error: { message: 'The first event must be session.update (got "input_audio_buffer.append").', code: 400 } },
    ]);
    expect(closed.code).toBe(1008);
  });

  it('sends session.created with a UUID, the resolved voice and modalities, then session.updated', async () => {
    const server = await emulator();
    const client = await session(server, { source_language: 'EN-us', target_language: 'Es-ES' });
    const [created, updated] = client.events;
    const expected = {
      id: expect.stringMatching(UUID),
      source_language: 'en-us',
      target_language: 'es-es',
      output_modalities: ['text', 'audio'],
      voice: { type: 'default' },
    };
    expect(created).toStrictEqual({ type: 'session.created', session: expected });
    expect(updated).toStrictEqual({ type: 'session.updated', session: { ...expected, id: created!.session.id } });
    const other = await session(server);
    expect(other.events[0]!.session.id).toMatch(UUID);
    expect(other.events[0]!.session.id).not.toBe(created!.session.id);
  });

  it('echoes ?model= and ?mode= of the handshake in session.created', async () => {
    const server = await emulator();
    const client = await connect(server, { query: '?model=iris&mode=fast' });
    client.send({ type: 'session.update', session: { ...SESSION, output_modalities: ['audio', 'text', 'audio'] } });
    await client.waitFrames(2);
    expect(client.events[0]).toStrictEqual({
      type: 'session.created',
      session: {
        id: expect.stringMatching(UUID),
        source_language: 'en-us',
        target_language: 'es-es',
        output_modalities: ['audio', 'text'],
        voice: { type: 'default' },
        model: 'iris',
        mode: 'fast',
      },
    });
  });

  it.each([
    ['source_language', { ...SESSION, source_language: 'en' }, 'session.source_language'],
    ['target_language', { ...SESSION, target_language: 'xx-yy' }, 'session.target_language'],
    ['output_modalities', { ...SESSION, output_modalities: ['video'] }, 'session.output_modalities'],
    ['empty output_modalities', { ...SESSION, output_modalities: [] }, 'session.output_modalities'],
    ['cloned voice without voice_id', { ...SESSION, voice: { type: 'cloned' } }, 'session.voice.voice_id'],
    ['voice type', { ...SESSION, voice: { type: 'stock' } }, 'session.voice.type'],
  ])('rejects an invalid %s with an error naming the field, then closes', async (_name, config, field) => {
    const server = await emulator();
    const client = await connect(server);
    client.send({ type: 'session.update', session: config });
    const closed = await client.closed;
    expect(client.events).toHaveLength(1);
    expect(client.events[0]).toMatchObject({ type: 'error', error: { code: 400 } });
    expect(client.events[0]!.error.message).toMatch(new RegExp(`^Invalid ${field.replace(/\./g, '\\.')}: expected `));
    expect(closed.code).toBe(1008);
  });
});

describe('realtime emulator: authentication', () => {
  it('answers a bad x-api-key header with HTTP 401 and a JSON body at the handshake', async () => {
    const server = await emulator();
    const ws = new WebSocket(`${server.realtimeUrl}/v1/realtime`, { headers: { 'x-api-key': 'not-a-key' } });
    ws.on('error', () => {});
    const response = await new Promise<{ status: number | undefined; type: string | undefined; body: string }>((resolve) => {
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], body }));
      });
    });
    ws.terminate();
    expect(response.status).toBe(401);
    expect(response.type).toBe('application/json');
    expect(JSON.parse(response.body)).toEqual({ error: 'Invalid API key in the x-api-key header.', status: 401 });
  });

  it('accepts auth.api_key in the first session.update when there is no header', async () => {
    const server = await emulator();
    const client = await connect(server, { key: null });
    client.send({ type: 'session.update', session: SESSION, auth: { api_key: 'k2' } });
    await client.waitFrames(2);
    expect(client.types()).toEqual(['session.created', 'session.updated']);
  });

  it('lets the header win over auth.api_key', async () => {
    const server = await emulator();
    const client = await connect(server, { key: 'k1' });
    client.send({ type: 'session.update', session: SESSION, auth: { api_key: 'wrong' } });
    await client.waitFrames(2);
    expect(client.types()).toEqual(['session.created', 'session.updated']);
  });

  it.each([
    ['no key at all', undefined, 'Missing API key: send it in the x-api-key handshake header, or in auth.api_key of the first session.update.'],
    ['a bad auth.api_key', { api_key: 'wrong' }, 'Invalid API key in auth.api_key.'],
  ])('answers %s with an error of code 401, then closes', async (_name, auth, message) => {
    const server = await emulator();
    const client = await connect(server, { key: null });
    client.send({ type: 'session.update', session: SESSION, ...(auth ? { auth } : {}) });
    const closed = await client.closed;
    expect(client.events).toEqual([{ type: 'error', error: { message, code: 401 } }]);
    expect(closed.code).toBe(1008);
  });
});

describe('realtime emulator: voices', () => {
  it('accepts a cloned voice the key owns and echoes it', async () => {
    const server = await emulator({ clonedVoices: { k1: [111, 112] } });
    const client = await session(server, { ...SESSION, voice: { type: 'cloned', voice_id: 112 } });
    expect(client.events[0]!.session.voice).toEqual({ type: 'cloned', voice_id: 112 });
    expect(client.events[1]!.session.voice).toEqual({ type: 'cloned', voice_id: 112 });
  });

  it.each([
    ['a voice nobody owns', 'k1', 999, 'Voice 999 is not a cloned voice owned by this API key.'],
    ['a voice another key owns', 'k2', 111, 'Voice 111 is not a cloned voice owned by this API key.'],
    ['the stock default voice', 'k1', DEFAULT_VOICE_ID, `Voice ${DEFAULT_VOICE_ID} is a stock voice; voice.type "cloned" needs a voice you cloned.`],
  ])('rejects %s with an error, then closes', async (_name, key, voiceId, message) => {
    const server = await emulator({ clonedVoices: { k1: [111, DEFAULT_VOICE_ID] } });
    const client = await connect(server, { key });
    client.send({ type: 'session.update', session: { ...SESSION, voice: { type: 'cloned', voice_id: voiceId } } });
    const closed = await client.closed;
    expect(client.events).toEqual([{ type: 'error', error: { message, code: 403 } }]);
    expect(closed.code).toBe(1008);
  });
});

describe('realtime emulator: events after activation', () => {
  it('answers a later session.update with session.updated, and an invalid one with error while the session goes on', async () => {
    const server = await emulator();
    const client = await session(server);
    const id = client.events[0]!.session.id;
    client.send({ type: 'session.update', session: { source_language: 'de-de', target_language: 'fr-fr', output_modalities: ['text'] } });
    client.send({ type: 'session.update', session: { ...SESSION, target_language: 'klingon' } });
    client.sendAudio(Buffer.concat([zeros(210), tone(510), zeros(700)]));
    await client.waitType('response.text.done');
    expect(client.frames.slice(2)).toEqual([
      {
        event: {
          type: 'session.updated',
          session: { id, source_language: 'de-de', target_language: 'fr-fr', output_modalities: ['text'], voice: { type: 'default' } },
        },
      },
      {
        event: {
          type: 'error',
          error: {
            message:
              'Invalid session.target_language: expected one of the realtime language tags ar-ae, ar-eg, ar-sa, de-de, en-gb, ' +
              'en-us, es-es, fr-ca, fr-fr, hi-in, ja-jp, ko-kr, pt-br, zh-cn (case-insensitive) (got "klingon"). ' +
              'The previous configuration stays active.',
            code: 400,
          },
        },
      },
      { event: { type: 'conversation.item.input_audio_transcription.completed', transcript: '[de-de utterance 1, 0.51 s]' } },
      ...['[fr-fr', ' translation', ' of', ' utterance', ' 1,', ' 0.51', ' s]'].map((delta) => ({ event: { type: 'response.text.delta', delta } })),
      { event: { type: 'response.text.done', text: '[fr-fr translation of utterance 1, 0.51 s]' } },
    ]);
  });

  it.each([
    [['text'], { text: true, audio: false }],
    [['audio'], { text: false, audio: true }],
  ] as const)('respects output_modalities %j (the transcript is always sent)', async (modalities, kinds) => {
    const server = await emulator();
    const client = await session(server, { ...SESSION, output_modalities: [...modalities] });
    // 990 ms between the two: more than the emulator's 900 ms of silence.
    const input = Buffer.concat([zeros(390), tone(600), zeros(990)]);
    client.sendAudio(input);
    client.sendAudio(Buffer.concat([tone(300), zeros(700)]));
    await client.waitType('conversation.item.input_audio_transcription.completed', 2);
    // A round trip after the last response: nothing else is on its way.
    client.send({ type: 'session.update', session: { ...SESSION, output_modalities: [...modalities] } });
    await client.waitType('session.updated', 2);
    const first = responseTypes(1200 * MS, kinds);
    const second = responseTypes(900 * MS, kinds);
    expect(client.types().slice(2)).toEqual([...first, ...second, 'session.updated']);
    if (kinds.audio) {
      expect(
        Buffer.concat(outputAudio(client.frames)).equals(
          slices(Buffer.concat([input, tone(300), zeros(700)]), [
            [90 * MS, 1290 * MS],
            [1680 * MS, 2580 * MS],
          ]),
        ),
      ).toBe(true);
    }
  });

  it('answers an event of more than 1 MiB with error and goes on; exactly 1 MiB is accepted', async () => {
    const server = await emulator();
    const client = await session(server);
    const base = JSON.stringify({ type: 'session.update', session: SESSION, note: '' });
    const exact = JSON.stringify({ type: 'session.update', session: SESSION, note: 'x'.repeat(1024 * 1024 - base.length) });
    const over = JSON.stringify({ type: 'session.update', session: SESSION, note: 'x'.repeat(1024 * 1024 - base.length + 1) });
    expect(Buffer.byteLength(exact)).toBe(1024 * 1024);
    client.send(over);
    client.send(exact);
    await client.waitFrames(4);
    expect(client.frames.slice(2)).toEqual([
      {
        event: {
          type: 'error',
          error: { message: 'The event is 1048577 bytes; a client event may be at most 1048576 bytes (1 MiB) of JSON text. It was ignored.', code: 413 },
        },
      },
      { event: { type: 'session.updated', session: client.events[1]!.session } },
    ]);
  });

  it('discards an append of more than 256 KiB of audio with an error; 256 KiB is accepted', async () => {
    const server = await emulator();
    const client = await session(server);
    // Over the limit, and voiced: were it kept, it would make an utterance.
    client.send(appendEvent(tone(6000).subarray(0, 256 * 1024 + 2)));
    // Exactly the limit: a 5.01 s tone followed by silence.
    const accepted = Buffer.concat([zeros(720), Buffer.concat([tone(5010), Buffer.alloc(256 * 1024 - 5010 * MS)]), zeros(700)]);
    client.sendAudio(accepted.subarray(0, 720 * MS));
    client.send(appendEvent(accepted.subarray(720 * MS, 720 * MS + 256 * 1024)));
    client.sendAudio(accepted.subarray(720 * MS + 256 * 1024));
    await client.waitType('response.audio.done');
    expect(client.events[2]).toEqual({
      type: 'error',
      error: {
        message: 'input_audio_buffer.append carries 262146 bytes of audio; at most 262144 bytes (256 KiB) of decoded audio per event. The audio was discarded.',
        code: 413,
      },
    });
    expect(client.events[3]).toEqual({ type: 'conversation.item.input_audio_transcription.completed', transcript: '[en-us utterance 1, 5.01 s]' });
    expect(Buffer.concat(outputAudio(client.frames)).equals(accepted.subarray(420 * MS, 6030 * MS))).toBe(true);
  });

  it.each([
    ['no audio field', { type: 'input_audio_buffer.append' }, 'input_audio_buffer.append needs an "audio" field: a base64 string of PCM16 audio.'],
    ['a number as audio', { type: 'input_audio_buffer.append', audio: 5 }, 'input_audio_buffer.append needs an "audio" field: a base64 string of PCM16 audio.'],
    [
      'characters outside base64',
      { type: 'input_audio_buffer.append', audio: 'AA*=' },
      'input_audio_buffer.append "audio" is not valid base64. The audio was discarded.',
    ],
    [
      'a truncated base64 string',
      { type: 'input_audio_buffer.append', audio: 'AAAAA' },
      'input_audio_buffer.append "audio" is not valid base64. The audio was discarded.',
    ],
  ])('answers an append with %s with error and goes on', async (_name, event, message) => {
    const server = await emulator();
    const client = await session(server);
    client.send(event);
    client.send({ type: 'session.update', session: SESSION });
    await client.waitFrames(4);
    expect(client.events.slice(2)).toEqual([
      { type: 'error', error: { message, code: 400 } },
      { type: 'session.updated', session: client.events[1]!.session },
    ]);
  });

  it.each(['input_audio_buffer.clear', 'input_audio_buffer.commit', 'response.cancel'])(
    'answers %s with error saying it is not supported, and goes on',
    async (type) => {
      const server = await emulator();
      const client = await session(server);
      client.send({ type });
      client.send({ type: 'session.update', session: SESSION });
      await client.waitFrames(4);
      expect(client.events.slice(2)).toEqual([
        { type: 'error', error: { message: `${type} is recognised but not supported by the realtime service.`, code: 400 } },
        { type: 'session.updated', session: client.events[1]!.session },
      ]);
    },
  );

  it.each([
    ['an unknown type', '{"type":"conversation.item.create"}', 'Unknown event type "conversation.item.create"; it was ignored.'],
    ['text that is not JSON', 'hello', 'The event is not valid JSON. It was ignored.'],
    ['JSON without a type', '[1,2]', 'The event is not a JSON object with a string "type" field. It was ignored.'],
  ])('answers %s with error and goes on', async (_name, text, message) => {
    const server = await emulator();
    const client = await session(server);
    client.send(text);
    client.send({ type: 'session.update', session: SESSION });
    await client.waitFrames(4);
    expect(client.events.slice(2)).toEqual([
      { type: 'error', error: { message, code: 400 } },
      { type: 'session.updated', session: client.events[1]!.session },
    ]);
  });

  it('ignores binary client frames, before and after session.update', async () => {
    const server = await emulator();
    const client = await connect(server);
    client.ws.send(tone(200), { binary: true });
    client.send({ type: 'session.update', session: SESSION });
    await client.waitFrames(2);
    // Voiced PCM as binary frames, then silence as events: no utterance may come of it.
    client.ws.send(Buffer.concat([zeros(100), tone(600)]), { binary: true });
    client.sendAudio(zeros(700));
    client.send({ type: 'session.update', session: SESSION });
    await client.waitFrames(3);
    expect(client.types()).toEqual(['session.created', 'session.updated', 'session.updated']);
  });

  it('answers pings', async () => {
    const server = await emulator();
    const client = await session(server);
    const pong = new Promise<Buffer>((resolve) => client.ws.once('pong', resolve));
    client.ws.ping(Buffer.from('are you there'));
    expect((await pong).toString()).toBe('are you there');
  });
});

describe('realtime emulator: options', () => {
  it('cold start: session.starting at once, session.created after coldStartMs, audio meanwhile discarded', async () => {
    const server = await emulator({ coldStartMs: 150 });
    const client = await connect(server);
    client.send({ type: 'session.update', session: SESSION });
    await client.waitFrames(1);
    expect(client.events).toEqual([{ type: 'session.starting' }]);
    // Sent during the cold start: a whole utterance that must never be answered.
    client.sendAudio(Buffer.concat([tone(500), zeros(700)]));
    await client.waitFrames(3);
    expect(client.types()).toEqual(['session.starting', 'session.created', 'session.updated']);
    const input = Buffer.concat([zeros(210), tone(510), zeros(700)]);
    client.sendAudio(input);
    await client.waitType('response.audio.done');
    expect(client.events[3]).toEqual({ type: 'conversation.item.input_audio_transcription.completed', transcript: '[en-us utterance 1, 0.51 s]' });
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(0, 1020 * MS))).toBe(true);
  });

  it('latencyMs delays each response and keeps them in order', async () => {
    const server = await emulator({ latencyMs: 400 });
    const client = await session(server);
    const { pcm, bursts } = threeBursts();
    client.sendAudio(pcm);
    // Answered at once, while the three responses wait out their latency.
    client.send({ type: 'session.update', session: SESSION });
    await client.waitType('response.audio.done', 3);
    const expected = paddedSlices(bursts);
    expect(client.types()).toEqual(['session.created', 'session.updated', 'session.updated', ...expected.flatMap(([a, b]) => responseTypes(b - a))]);
    expect(Buffer.concat(outputAudio(client.frames)).equals(slices(pcm, expected))).toBe(true);
  });

  it('handles odd byte counts across appends', async () => {
    const server = await emulator();
    const client = await session(server);
    const { pcm, bursts } = threeBursts();
    const sizes = [4801, 4799, 1, 333, 9999];
    for (let at = 0, i = 0; at < pcm.length; i++) {
      const size = sizes[i % sizes.length]!;
      client.send(appendEvent(pcm.subarray(at, at + size)));
      at += size;
    }
    await client.waitType('response.audio.done', 3);
    expect(Buffer.concat(outputAudio(client.frames)).equals(slices(pcm, paddedSlices(bursts)))).toBe(true);
  });

  it('vadSilenceMs and paddingMs shape the utterances; padding never overlaps the previous output', async () => {
    const server = await emulator({ vadSilenceMs: 200, paddingMs: 300 });
    const client = await session(server);
    const input = Buffer.concat([zeros(120), tone(390), zeros(420), noise(390, 3), zeros(420)]);
    client.sendAudio(input);
    await client.waitType('response.audio.done', 2);
    const transcripts = client.events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    expect(transcripts.map((e) => e.transcript)).toEqual(['[en-us utterance 1, 0.39 s]', '[en-us utterance 2, 0.39 s]']);
    // First: from the input's start to 210 ms after its end (the silence heard: 200 ms in whole
    // 30 ms frames); second: from there.
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(0, 1530 * MS))).toBe(true);
    const audioDone = client.types().indexOf('response.audio.done');
    expect(Buffer.concat(outputAudio(client.frames.slice(0, audioDone))).equals(input.subarray(0, 720 * MS))).toBe(true);
  });

  it('vadThresholdDbfs decides what is voice', async () => {
    // A -50 dBFS tone: silence at the default -45 dBFS, voice at -60.
    const input = Buffer.concat([zeros(390), tone(600, -50), zeros(700)]);
    const quiet = await session(await emulator());
    quiet.sendAudio(input);
    quiet.send({ type: 'session.update', session: SESSION });
    await quiet.waitType('session.updated', 2);
    const server = await emulator({ vadThresholdDbfs: -60 });
    const client = await session(server);
    client.sendAudio(input);
    await client.waitType('response.audio.done');
    expect(client.events[2]).toEqual({ type: 'conversation.item.input_audio_transcription.completed', transcript: '[en-us utterance 1, 0.60 s]' });
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(90 * MS, 1290 * MS))).toBe(true);
    // Long after the quiet session's audio stopped: it answered nothing.
    expect(quiet.types()).toEqual(['session.created', 'session.updated', 'session.updated']);
  });

  it('maxUtteranceMs ends endless speech', async () => {
    const server = await emulator({ maxUtteranceMs: 420 });
    const client = await session(server);
    const input = Buffer.concat([zeros(510), tone(990), zeros(700)]);
    client.sendAudio(input);
    await client.waitType('response.audio.done', 3);
    const transcripts = client.events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    expect(transcripts.map((e) => e.transcript)).toEqual(['[en-us utterance 1, 0.42 s]', '[en-us utterance 2, 0.42 s]', '[en-us utterance 3, 0.15 s]']);
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(210 * MS, 1800 * MS))).toBe(true);
  });

  it('creditSeconds: sends the scheduled responses, then error with the reason, then closes', async () => {
    const server = await emulator({ creditSeconds: 3, latencyMs: 200 });
    const client = await session(server);
    const { pcm, bursts } = threeBursts();
    client.sendAudio(pcm);
    const closed = await client.closed;
    const [first] = paddedSlices(bursts);
    expect(client.types().slice(2)).toEqual([...responseTypes(first![1] - first![0]), 'error']);
    expect(client.events.at(-1)).toEqual({
      type: 'error',
      error: { message: 'Session stopped: the account has no credits left (used 3.0 s of 3.0 s).', code: 402 },
    });
    expect(Buffer.concat(outputAudio(client.frames)).equals(pcm.subarray(first![0], first![1]))).toBe(true);
    expect(closed.code).toBe(1008);
  });

  it('a refusal triggered at run time answers its own way once; the refusals armed by a drop keep the configured status', async () => {
    const server = await emulator({ faults: { refuseAfterDrop: 1, refuseStatus: 503, refuseRetryAfterS: 2 } });
    /** The status (and Retry-After) a handshake meets; 101 when it is accepted. */
    const handshake = () =>
      new Promise<[number, string | undefined]>((resolve, reject) => {
        const ws = new WebSocket(`${server.realtimeUrl}/v1/realtime`, { headers: { 'x-api-key': 'k1' } });
        ws.once('unexpected-response', (_req, res) => {
          resolve([res.statusCode!, res.headers['retry-after'] as string | undefined]);
          res.resume();
          ws.terminate();
        });
        ws.once('open', () => {
          resolve([101, undefined]);
          ws.terminate();
        });
        ws.once('error', (error) => (ws.readyState === ws.CLOSED ? undefined : reject(error)));
      });
    server.realtimeFaults.refuseNextHandshakes(1, 401);
    expect(await handshake()).toEqual([401, undefined]);
    const client = await session(server);
    server.realtimeFaults.drop();
    await client.closed;
    expect(await handshake()).toEqual([503, '2']);
    expect(await handshake()).toEqual([101, undefined]);
  });

  it('rejects a bad option when the emulator starts', async () => {
    await expect(startEmulator({ port: 0, paddingMs: 500 })).rejects.toMatchObject({ code: 'RTT_VALIDATION', field: 'paddingMs' });
    await expect(startEmulator({ port: 0, audioFrames: 'xml' as 'json' })).rejects.toMatchObject({ code: 'RTT_VALIDATION', field: 'audioFrames' });
  });

  it.each([
    ['faults.dropAfterMs', { dropAfterMs: -1 }],
    ['faults.dropAfterResponses', { dropAfterResponses: 1.5 }],
    ['faults.dropCode', { dropCode: 999 }],
    ['faults.halfOpenAfterMs', { halfOpenAfterMs: Number.NaN }],
    ['faults.refuseHandshakes', { refuseHandshakes: -2 }],
    ['faults.refuseStatus', { refuseStatus: 200 }],
    ['faults.refuseAfterDrop', { refuseAfterDrop: -1 }],
    ['faults.stallAfterDrop', { stallAfterDrop: 0.5 }],
    ['faults.mergeUtterances', { mergeUtterances: 0 }],
    ['faults.lateUtterances', { lateUtterances: { 0: 100 } }],
    ['faults.lateUtterances.2', { lateUtterances: { 2: -5 } }],
  ])('rejects a bad fault switch (%s) when the emulator starts', async (field, faults) => {
    await expect(startEmulator({ port: 0, faults })).rejects.toMatchObject({ code: 'RTT_VALIDATION', field });
  });
});

describe('realtime emulator: when it answers (idle, segmentation, merged and held answers)', () => {
  /** Fake clocks for the emulator's timers (and its `Date.now()`), real sockets. */
  const FAKE: Parameters<typeof vi.useFakeTimers>[0] = { toFake: ['setTimeout', 'clearTimeout', 'Date'] };

  afterEach(() => {
    vi.useRealTimers();
  });

  /** A `session.update` answered: everything the emulator sent before it has arrived. */
  async function roundTrip(client: Client): Promise<void> {
    const count = client.types().filter((type) => type === 'session.updated').length;
    client.send({ type: 'session.update', session: SESSION });
    await client.waitType('session.updated', count + 1);
  }

  function transcripts(client: Client): string[] {
    return client.events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed').map((e) => e.transcript as string);
  }

  /** Resolves once `done()` holds, checked at each turn of the event loop (no clock involved). */
  async function untilTrue(done: () => boolean): Promise<void> {
    while (!done()) await new Promise((resolve) => setImmediate(resolve));
  }

  it.each([
    ['the default 300 ms', undefined, 300],
    ['idleMs 1000', 1000, 1000],
  ])('idle (%s): the utterance in progress is answered once the appends pause that long, not before', async (_name, idleMs, wait) => {
    const server = await emulator(idleMs === undefined ? {} : { idleMs });
    const client = await session(server);
    vi.useFakeTimers(FAKE);
    // 300 ms of silence after the speech: far from the 900 ms that would end it.
    const input = Buffer.concat([zeros(90), tone(300), zeros(300)]);
    client.sendAudio(input);
    await roundTrip(client);
    await vi.advanceTimersByTimeAsync(wait - 1);
    // An append, even of silence, starts the wait again.
    client.sendAudio(zeros(60));
    await roundTrip(client);
    await vi.advanceTimersByTimeAsync(wait - 1);
    await roundTrip(client);
    expect(transcripts(client)).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    await client.waitType('response.audio.done');
    expect(transcripts(client)).toEqual(['[en-us utterance 1, 0.30 s]']);
    // Its voiced region with 300 ms of padding: all of the input before the extra silence.
    expect(Buffer.concat(outputAudio(client.frames)).equals(input)).toBe(true);
  });

  it('idle does not count while the emulator holds back its reading (inputBytesPerSecond): the utterance goes on', async () => {
    const rt = await realtimePart({ inputBytesPerSecond: 48_000 });
    const client = await session(rt);
    vi.useFakeTimers(FAKE);
    // 600 ms of speech at 48000 bytes a second: the emulator stops reading for 600 ms after it.
    const first = tone(600);
    client.send(appendEvent(first));
    await untilTrue(() => rt.part.sessions()[0]!.audioBytes === first.length);
    expect(rt.part.sessions()[0]!.readingPaused).toBe(true);
    // Longer than idleMs without an append processed, but not while reading.
    await vi.advanceTimersByTimeAsync(590);
    const rest = Buffer.concat([tone(300), zeros(1200)]);
    client.send(appendEvent(rest));
    await vi.advanceTimersByTimeAsync(10);
    // Read once the throttle lets it: the speech goes on, and 900 ms of silence end it.
    await client.waitType('response.audio.done');
    expect(transcripts(client)).toEqual(['[en-us utterance 1, 0.90 s]']);
    expect(Buffer.concat(outputAudio(client.frames)).equals(Buffer.concat([first, rest]).subarray(0, 1200 * MS))).toBe(true);
  });

  it("segmentation 'idle': nothing is answered while appends arrive; once they pause, everything heard since the last answer, as one", async () => {
    const server = await emulator({ segmentation: 'idle' });
    const client = await session(server);
    vi.useFakeTimers(FAKE);
    const { pcm, bursts } = threeBursts();
    // Two utterances have ended (each would have its answer by now in the default mode).
    const split = bursts[1]![1] + 990 * MS;
    client.sendAudio(pcm.subarray(0, split));
    await roundTrip(client);
    client.sendAudio(pcm.subarray(split));
    await roundTrip(client);
    expect(transcripts(client)).toEqual([]);
    await vi.advanceTimersByTimeAsync(300);
    await client.waitType('response.audio.done');
    expect(transcripts(client)).toEqual(['[en-us utterances 1-3, 3.51 s]']);
    expect(client.events.filter((e) => e.type === 'response.text.done').map((e) => e.text)).toEqual(['[es-es translation of utterances 1-3, 3.51 s]']);
    expect(Buffer.concat(outputAudio(client.frames)).equals(slices(pcm, paddedSlices(bursts)))).toBe(true);
    // Speech after that answer is the next one's.
    client.sendAudio(Buffer.concat([tone(300), zeros(300)]));
    await roundTrip(client);
    await vi.advanceTimersByTimeAsync(300);
    await client.waitType('response.audio.done', 2);
    expect(transcripts(client)).toEqual(['[en-us utterances 1-3, 3.51 s]', '[en-us utterance 4, 0.30 s]']);
  });

  it("segmentation 'idle' with appends that never pause: what is held is answered once it reaches 60 s of audio", async () => {
    const server = await emulator({ segmentation: 'idle', paddingMs: 0 });
    const client = await session(server);
    // The appends never pause: no idle time passes on this clock.
    vi.useFakeTimers(FAKE);
    // 1.2 s of speech, 1.2 s of silence (a pause the detector hears, while appends keep coming):
    // each utterance's answer is 1.2 s of audio, so the 50th brings the group to 60 s.
    const stretch = Buffer.concat([tone(1200), zeros(1200)]);
    for (let i = 0; i < 51; i++) client.sendAudio(stretch);
    await client.waitType('response.audio.done');
    expect(transcripts(client)).toEqual(['[en-us utterances 1-50, 60.00 s]']);
    expect(Buffer.concat(outputAudio(client.frames)).length).toBe(MAX_GROUP_BYTES);
  });

  it.each([
    ['the default splitMs (700 ms, 720 in whole frames)', undefined, 720],
    ['splitMs 300', 300, 300],
  ])("segmentation 'split', %s: a first answer while the speech goes on, the rest when it ends", async (_name, splitMs, at) => {
    const server = await emulator({ segmentation: 'split', ...(splitMs === undefined ? {} : { splitMs }) });
    const client = await session(server);
    const start = [zeros(120), tone(at + 30)];
    const input = Buffer.concat([...start, tone(420), zeros(990)]);
    // Only the start of the speech: its first part is answered before any silence is sent.
    client.sendAudio(Buffer.concat(start));
    await client.waitType('response.audio.done');
    expect(transcripts(client)).toEqual([`[en-us utterance 1 part 1, ${(at / 1000).toFixed(2)} s]`]);
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(0, (120 + at) * MS))).toBe(true);
    client.sendAudio(input.subarray((120 + at + 30) * MS));
    await client.waitType('response.audio.done', 2);
    expect(transcripts(client)).toEqual([
      `[en-us utterance 1 part 1, ${(at / 1000).toFixed(2)} s]`,
      `[en-us utterance 1 part 2, ${((450 - 0) / 1000).toFixed(2)} s]`,
    ]);
    // The two parts, one after the other: the unsplit answer (300 ms of padding after it).
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(0, (120 + at + 450 + 300) * MS))).toBe(true);
  });

  it('mergeUtterances: a partial group is answered once the appends pause, however long they kept coming', async () => {
    const server = await emulator({ faults: { mergeUtterances: 2 } });
    const client = await session(server);
    vi.useFakeTimers(FAKE);
    const { pcm, bursts } = threeBursts();
    // 990 ms of silence after the third burst: it ends while the appends go on.
    client.sendAudio(Buffer.concat([pcm, zeros(180)]));
    await client.waitType('response.audio.done');
    expect(transcripts(client)).toEqual(['[en-us utterances 1-2, 2.01 s]']);
    // Three more seconds of silence, in appends 100 ms apart: the third one waits for its group.
    for (let i = 0; i < 30; i++) {
      client.sendAudio(zeros(100));
      await roundTrip(client);
      await vi.advanceTimersByTimeAsync(100);
    }
    await vi.advanceTimersByTimeAsync(199);
    await roundTrip(client);
    expect(transcripts(client)).toEqual(['[en-us utterances 1-2, 2.01 s]']);
    await vi.advanceTimersByTimeAsync(1);
    await client.waitType('response.audio.done', 2);
    expect(transcripts(client)).toEqual(['[en-us utterances 1-2, 2.01 s]', '[en-us utterance 3, 1.50 s]']);
    expect(Buffer.concat(outputAudio(client.frames)).equals(slices(pcm, paddedSlices(bursts)))).toBe(true);
  });

  it.each([
    ['never', 'never' as const],
    ['{ lateMs: 5000 }', { lateMs: 5000 }],
  ])('lastAnswer %s: each answer waits for speech to be heard again; the last one, for the appends to pause', async (_name, lastAnswer) => {
    const server = await emulator({ lastAnswer });
    const client = await session(server);
    vi.useFakeTimers(FAKE);
    const { pcm, bursts } = threeBursts();
    const [one, two, three] = paddedSlices(bursts) as [[number, number], [number, number], [number, number]];
    // The first utterance and the silence that ends it: held.
    const firstEnd = bursts[0]![1] + 990 * MS;
    client.sendAudio(pcm.subarray(0, firstEnd));
    await roundTrip(client);
    expect(transcripts(client)).toEqual([]);
    // The second one's first frame: the first answer goes out.
    client.sendAudio(pcm.subarray(firstEnd, bursts[1]![0] + FRAME));
    await roundTrip(client);
    expect(transcripts(client)).toEqual(['[en-us utterance 1, 0.81 s]']);
    // The rest: the second is answered once the third starts; the third is in progress.
    client.sendAudio(pcm.subarray(bursts[1]![0] + FRAME));
    await roundTrip(client);
    expect(transcripts(client)).toEqual(['[en-us utterance 1, 0.81 s]', '[en-us utterance 2, 1.20 s]']);
    // The appends pause: the third is ended and is the last answer.
    await vi.advanceTimersByTimeAsync(300);
    await roundTrip(client);
    expect(transcripts(client)).toHaveLength(2);
    if (lastAnswer === 'never') {
      await vi.advanceTimersByTimeAsync(60_000);
      await roundTrip(client);
      expect(transcripts(client)).toHaveLength(2);
      expect(Buffer.concat(outputAudio(client.frames)).equals(slices(pcm, [one, two]))).toBe(true);
      return;
    }
    await vi.advanceTimersByTimeAsync(4999);
    await roundTrip(client);
    expect(transcripts(client)).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    await client.waitType('response.audio.done', 3);
    expect(transcripts(client)).toEqual(['[en-us utterance 1, 0.81 s]', '[en-us utterance 2, 1.20 s]', '[en-us utterance 3, 1.50 s]']);
    expect(Buffer.concat(outputAudio(client.frames)).equals(slices(pcm, [one, two, three]))).toBe(true);
  });

  it.each([
    ['segmentation', { segmentation: 'words' as 'idle' }, /^Invalid segmentation: expected one of 'utterance', 'idle', 'split' \(got "words"\)\.$/],
    ['splitMs', { splitMs: 500 }, /^Invalid splitMs: expected to be given with segmentation 'split' only \(got 500\)\.$/],
    ['splitMs', { segmentation: 'split' as const, splitMs: 0 }, /^Invalid splitMs: expected a positive number of milliseconds \(got 0\)\.$/],
    ['idleMs', { idleMs: 0 }, /^Invalid idleMs: expected a finite number above 0 \(got 0\)\.$/],
    ['vadThresholdDbfs', { vadThresholdDbfs: 1 }, /^Invalid vadThresholdDbfs: expected a number of dBFS, at most 0 \(got 1\)\.$/],
    ['vadSilenceMs', { vadSilenceMs: -5 }, /^Invalid vadSilenceMs: expected a positive number of milliseconds \(got -5\)\.$/],
    ['lastAnswer', { lastAnswer: 'sometimes' as 'never' }, /^Invalid lastAnswer: expected 'prompt', 'never' or \{ lateMs \}.* \(got "sometimes"\)\.$/],
    ['lastAnswer.lateMs', { lastAnswer: { lateMs: -1 } }, /^Invalid lastAnswer\.lateMs: expected a finite number, 0 or more \(got -1\)\.$/],
  ])('rejects a bad %s when the emulator starts, saying what is accepted', async (field, options, message) => {
    const failure = startEmulator({ port: 0, ...options });
    await expect(failure).rejects.toMatchObject({ code: 'RTT_VALIDATION', field });
    await expect(failure).rejects.toThrow(message);
  });
});

describe('realtime emulator: flow control', () => {
  it('inputBytesPerSecond: reads audio no faster than the rate, so the client sees TCP backpressure', async () => {
    const rate = 480_000;
    const rt = await realtimePart({ inputBytesPerSecond: rate });
    const client = await session(rt);
    const event = appendEvent(Buffer.alloc(256 * 1024));
    const started = Date.now();
    for (let i = 0; i < 48; i++) client.send(event);
    await sleep(300);
    const [stats] = rt.part.sessions();
    const elapsed = Date.now() - started;
    expect(stats!.readingPaused).toBe(true);
    expect(stats!.audioBytes).toBeGreaterThanOrEqual(256 * 1024);
    // At most one append read ahead of the rate.
    expect(stats!.audioBytes).toBeLessThanOrEqual((rate * elapsed) / 1000 + 256 * 1024);
    // 16 MB were sent; what the kernel cannot hold stays in the client's send buffer.
    expect(client.ws.bufferedAmount).toBeGreaterThan(1024 * 1024);
  });

  it('a client that reads slowly: stops reading its input while the send buffer is over the bound, and loses nothing', async () => {
    const limit = 256 * 1024;
    const rt = await realtimePart({ maxUtteranceMs: 4000, sendBufferLimitBytes: limit });
    const client = await session(rt, { ...SESSION, output_modalities: ['audio'] });
    client.ws.pause();
    // 30 appends of 256 KiB of tone (163.84 s, 7.9 MB), then silence: 41 utterances of up to 4.02 s
    // (4 s in whole 30 ms frames).
    const chunk = tone(131_072 / 24);
    const event = appendEvent(chunk);
    for (let i = 0; i < 30; i++) client.send(event);
    client.sendAudio(zeros(700));
    const total = 30 * chunk.length + 700 * MS;

    let stats = rt.part.sessions()[0]!;
    for (let i = 0; i < 75 && !stats.readingPaused; i++) {
      await sleep(20);
      stats = rt.part.sessions()[0]!;
    }
    expect(stats.readingPaused).toBe(true);
    await sleep(100);
    const before = rt.part.sessions()[0]!;
    await sleep(100);
    const after = rt.part.sessions()[0]!;
    expect(after.readingPaused).toBe(true);
    expect(after.audioBytes).toBe(before.audioBytes);
    expect(after.audioBytes).toBeLessThan(total);
    // The send buffer stays near its bound: past it, at most a response or two (256 KB each) go out.
    expect(after.peakBufferedAmount).toBeLessThanOrEqual(limit + 1024 * 1024);

    client.ws.resume();
    await client.waitType('response.audio.done', 41);
    expect(rt.part.sessions()[0]!.audioBytes).toBe(total);
    expect(rt.part.sessions()[0]!.readingPaused).toBe(false);
    const input = Buffer.concat([...Array(30).fill(chunk), zeros(700)]);
    // The tone ends inside a 30 ms frame, which is voiced: the answer runs to that frame's end.
    const voicedEnd = Math.ceil((30 * chunk.length) / FRAME) * FRAME;
    expect(Buffer.concat(outputAudio(client.frames)).equals(input.subarray(0, voicedEnd + PAD))).toBe(true);
  });
});

describe('realtime emulator: close()', () => {
  it('ends every session, clears every timer and leaves no handle open', async () => {
    const baseline = countHandles();
    const slow = await startEmulator({ port: 0, apiKeys: ['k1'], latencyMs: 5_000 });
    const cold = await startEmulator({ port: 0, apiKeys: ['k1'], coldStartMs: 5_000 });
    // One session waiting for session.update, one with a response waiting out its latency, one cold-starting.
    const waiting = await connect(slow);
    const answering = await session(slow);
    answering.sendAudio(Buffer.concat([tone(300), zeros(700)]));
    // The emulator handles a socket's messages in order: once this update is answered, the
    // utterance has ended and its response is waiting out the latency.
    answering.send({ type: 'session.update', session: SESSION });
    await answering.waitType('session.updated', 2);
    const starting = await connect(cold);
    starting.send({ type: 'session.update', session: SESSION });
    await starting.waitFrames(1);
    expect(countHandles().Timeout).toBeGreaterThan(baseline.Timeout);

    await Promise.all([slow.close(), cold.close()]);
    const codes = await Promise.all([waiting.closed, answering.closed, starting.closed]);
    expect(codes.map((c) => c.code)).toEqual([1006, 1006, 1006]);
    expect(answering.types()).toEqual(['session.created', 'session.updated', 'session.updated']);
    expect(starting.types()).toEqual(['session.starting']);
    // Handles are released by the event loop shortly after their close callbacks (no event says
    // when: the shared helper re-checks for a bounded time).
    await expectNoLeakedHandles(baseline);
  });
});

describe('realtime emulator: each state owns its timers, and leaving it clears them', () => {
  // Fake clocks from before the server starts, so that every timer of the session is counted
  // (`vi.getTimerCount()`, against the count before the client connects); real sockets.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  async function untilTrue(done: () => boolean): Promise<void> {
    while (!done()) await new Promise((resolve) => setImmediate(resolve));
  }

  /** A `session.update` answered: everything sent before it has been handled. */
  async function roundTrip(client: Client): Promise<void> {
    const count = client.types().filter((type) => type === 'session.updated').length;
    client.send({ type: 'session.update', session: SESSION });
    await client.waitType('session.updated', count + 1);
  }

  it('update timeout -> cold start -> the fault timers of the created session -> the half-open hold, one owner at a time', async () => {
    const rt = await realtimePart({ coldStartMs: 2000, faults: { dropAfterMs: 30_000 } });
    const base = vi.getTimerCount();
    const client = await connect(rt);
    expect(rt.part.sessions()[0]!.state).toBe('awaiting-update');
    expect(vi.getTimerCount() - base).toBe(1);

    client.send({ type: 'session.update', session: SESSION });
    await client.waitFrames(1);
    expect(rt.part.sessions()[0]!.state).toBe('starting');
    // The cold start's timer only: the update timeout went with the state that owned it.
    expect(vi.getTimerCount() - base).toBe(1);

    await vi.advanceTimersByTimeAsync(2000);
    await client.waitFrames(3);
    expect(client.types()).toEqual(['session.starting', 'session.created', 'session.updated']);
    expect(rt.part.sessions()[0]!.state).toBe('active');
    expect(vi.getTimerCount() - base).toBe(1); // dropAfterMs

    rt.part.faults.halfOpen();
    expect(rt.part.sessions()[0]!.state).toBe('half-open');
    expect(vi.getTimerCount() - base).toBe(1); // the hold: dropAfterMs went with the active state
    // Past dropAfterMs: nothing happens until the hold ends.
    await vi.advanceTimersByTimeAsync(59_999);
    expect(rt.part.sessions()[0]!.state).toBe('half-open');
    await vi.advanceTimersByTimeAsync(1);
    expect((await client.closed).code).toBe(1006);
    await untilTrue(() => rt.part.sessions().length === 0);
    expect(vi.getTimerCount() - base).toBe(0);
  });

  it("a drop leaves only its own backstop: the active state's idle, queue and fault timers go with it", async () => {
    const rt = await realtimePart({ latencyMs: 10_000, faults: { dropAfterMs: 60_000 } });
    const base = vi.getTimerCount();
    const client = await session(rt);
    // The first utterance has ended (its answer waits out the latency); the second goes on.
    client.sendAudio(Buffer.concat([tone(300), zeros(1200), tone(300)]));
    await roundTrip(client);
    expect(vi.getTimerCount() - base).toBe(3); // the queue, idle and dropAfterMs
    // Every frame sent so far is written: the drop cuts at once.
    await untilTrue(() => rt.part.sessions()[0]!.bufferedAmount === 0);
    await new Promise((resolve) => setImmediate(resolve));

    rt.part.faults.drop();
    expect(rt.part.sessions()[0]!.state).toBe('closed');
    expect(vi.getTimerCount() - base).toBe(1); // the backstop that cuts the socket if the client keeps it
    expect((await client.closed).code).toBe(1006);
    await untilTrue(() => rt.part.sessions().length === 0);
    expect(vi.getTimerCount() - base).toBe(0);
    expect(client.types()).toEqual(['session.created', 'session.updated', 'session.updated']);
  });

  it('a billing stop keeps the queue and drops the idle timer: what is queued still goes out, then the 402', async () => {
    const rt = await realtimePart({ latencyMs: 5000, creditSeconds: 2 });
    const base = vi.getTimerCount();
    const client = await session(rt);
    client.sendAudio(Buffer.concat([tone(300), zeros(1200), tone(300)]));
    await roundTrip(client);
    expect(vi.getTimerCount() - base).toBe(2); // the queue and idle

    // 2.4 s in all: the credit runs out in the second utterance.
    client.sendAudio(tone(600));
    await untilTrue(() => rt.part.sessions()[0]!.state === 'stopping');
    expect(vi.getTimerCount() - base).toBe(1); // the queue only

    await vi.advanceTimersByTimeAsync(5000);
    await client.waitType('error');
    expect(client.types().slice(3, 4)).toEqual(['conversation.item.input_audio_transcription.completed']);
    expect(client.events.at(-1)).toEqual({
      type: 'error',
      error: { message: 'Session stopped: the account has no credits left (used 2.0 s of 2.0 s).', code: 402 },
    });
    expect((await client.closed).code).toBe(1008);
    await untilTrue(() => rt.part.sessions().length === 0);
    expect(vi.getTimerCount() - base).toBe(0);
  });
});
