/**
 * The emulator's live transcription endpoint over a real WebSocket: the handshake's key and
 * parameters, Ready, interim and final results with word timings for the speech fixture (as
 * linear16 at 24 kHz, and as mu-law at 8 kHz from a phone call), CloseStream flushing the last
 * utterance, KeepAlive against the idle timeout (fake timers), and errors that keep the session.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { createConverter } from '../lib/audio/convert.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import {
  LIVE_TRANSCRIPTION_PATH,
  decodeLiveServerEvent,
  encodeCloseStream,
  encodeKeepAlive,
  encodeLiveQuery,
  type LiveServerEvent,
  type LiveTranscriptionParams,
} from '../lib/realtime/transcription-codec.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { collect } from './http-test-helpers.js';

const KEY = 'live-key-0123456789';
const fixture = loadSpeechFixture();
const SENTENCES = fixture.utterances.map((u) => u.text);
const running: RunningEmulator[] = [];

afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(running.splice(0).map((e) => e.close()));
});

async function emulator(options: Parameters<typeof startEmulator>[0] = {}): Promise<RunningEmulator> {
  const emu = await startEmulator({ port: 0, apiKeys: [KEY], ...options });
  running.push(emu);
  return emu;
}

interface Session {
  ws: WebSocket;
  events: LiveServerEvent[];
  /** Resolves with the next event that satisfies `match`. */
  next(match: (event: LiveServerEvent) => boolean): Promise<LiveServerEvent>;
  closed: Promise<{ code: number; reason: string }>;
}

function connect(emu: RunningEmulator, params: Partial<LiveTranscriptionParams> | string = {}, key: string | undefined = KEY): Session {
  const query = typeof params === 'string' ? params : encodeLiveQuery(params).toString();
  const ws = new WebSocket(`${emu.realtimeUrl}${LIVE_TRANSCRIPTION_PATH}?${query}`, { headers: key === undefined ? {} : { 'x-api-key': key } });
  const events: LiveServerEvent[] = [];
  const waiters: Array<{ match: (e: LiveServerEvent) => boolean; resolve: (e: LiveServerEvent) => void }> = [];
  ws.on('message', (data, isBinary) => {
    expect(isBinary).toBe(false);
    const event = decodeLiveServerEvent((data as Buffer).toString('utf8'));
    events.push(event);
    for (const waiter of waiters.splice(0)) {
      if (waiter.match(event)) waiter.resolve(event);
      else waiters.push(waiter);
    }
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  return {
    ws,
    events,
    closed,
    next: (match) => {
      const found = events.find(match);
      return found ? Promise.resolve(found) : new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

function finals(events: LiveServerEvent[]): Extract<LiveServerEvent, { type: 'Results' }>[] {
  return events.filter((e): e is Extract<LiveServerEvent, { type: 'Results' }> => e.type === 'Results' && e.isFinal);
}

/** Sends `audio` in frames of `frameBytes`, then CloseStream, and waits for the close. */
async function stream(session: Session, audio: Buffer, frameBytes: number): Promise<{ code: number; reason: string }> {
  await session.next((e) => e.type === 'Ready');
  for (let at = 0; at < audio.length; at += frameBytes) session.ws.send(audio.subarray(at, at + frameBytes));
  session.ws.send(encodeCloseStream());
  return session.closed;
}

describe('speech in, results out', () => {
  it('linear16 at 24 kHz: an interim and a final result per sentence, words timed in seconds', async () => {
    const emu = await emulator();
    const session = connect(emu, { encoding: 'linear16', sampleRate: 24_000 });
    const close = await stream(session, fixture.pcm, 960);
    expect(close).toEqual({ code: 1000, reason: 'CloseStream' });
    expect(session.events[0]).toMatchObject({ type: 'Ready', requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const results = session.events.filter((e) => e.type === 'Results');
    expect(results.map((r) => (r as { isFinal: boolean }).isFinal)).toEqual([false, true, false, true, false, true]);
    const done = finals(session.events);
    expect(done.map((r) => r.transcript)).toEqual(SENTENCES);
    expect(done.map((r) => [r.start, Number((r.start + r.duration).toFixed(3))])).toEqual([
      [0.32, 2.62],
      [3.82, 5.04],
      [6.26, 7.34],
    ]);
    const first = done[0]!;
    expect(first.words.map((w) => w.word)).toEqual(SENTENCES[0]!.split(' '));
    expect(first.words[0]!.start).toBeCloseTo(0.32, 3);
    expect(first.words.at(-1)!.end).toBeCloseTo(2.62, 3);
    const interim = results[0] as Extract<LiveServerEvent, { type: 'Results' }>;
    expect(interim.transcript).toBe('Hello, this is a');
  });

  it('mu-law at 8 kHz (a phone call): the same utterances at the same times', async () => {
    const emu = await emulator();
    const mulaw = await collect(createConverter({ format: 's16le', rate: 24_000, channels: 1 }, { format: 'mulaw', rate: 8000, channels: 1 }).end(fixture.pcm));
    const session = connect(emu, { encoding: 'mulaw', sampleRate: 8000 });
    await stream(session, mulaw, 160);
    const done = finals(session.events);
    expect(done.map((r) => r.transcript)).toEqual(['Speech segment 1.', 'Speech segment 2.', 'Speech segment 3.']);
    // Within two 20 ms detector frames: mu-law quantization and resampling move the edges.
    for (const [i, r] of done.entries()) {
      expect(Math.abs(r.start - fixture.utterances[i]!.startSample / 24_000)).toBeLessThan(0.041);
    }
  });

  it('linear32 stereo at 48 kHz is converted too', async () => {
    const emu = await emulator();
    const s16 = await collect(createConverter({ format: 's16le', rate: 24_000, channels: 1 }, { format: 's16le', rate: 48_000, channels: 2 }).end(fixture.pcm));
    const s32 = Buffer.alloc(s16.length * 2);
    for (let i = 0; i < s16.length / 2; i++) s32.writeInt32LE(s16.readInt16LE(i * 2) * 65536, i * 4);
    const session = connect(emu, { encoding: 'linear32', sampleRate: 48_000, channels: 2 });
    await stream(session, s32, 4093); // frames cut inside samples
    expect(finals(session.events)).toHaveLength(3);
  });

  it('CloseStream in the middle of a sentence still answers it', async () => {
    const emu = await emulator();
    const session = connect(emu);
    const cut = fixture.pcm.subarray(0, 2 * 50_000); // inside the first sentence (ends at sample 62880)
    await stream(session, Buffer.from(collectTo16k(cut)), 640);
    expect(finals(session.events)).toHaveLength(1);
  });
});

/** The default session is 16 kHz linear16: the fixture resampled. */
function collectTo16k(pcm24k: Buffer): Buffer {
  const converter = createConverter({ format: 's16le', rate: 24_000, channels: 1 }, { format: 's16le', rate: 16_000, channels: 1 });
  const out: Buffer[] = [];
  converter.on('data', (c: Buffer) => out.push(c));
  converter.write(pcm24k);
  converter.end();
  return Buffer.concat(out);
}

describe('handshake and errors', () => {
  it('no key or an unknown key is refused with 401 at the handshake', async () => {
    const emu = await emulator();
    for (const key of [undefined, 'wrong-key-000000']) {
      const status = await new Promise<number>((resolve) => {
        const ws = new WebSocket(`${emu.realtimeUrl}${LIVE_TRANSCRIPTION_PATH}`, { headers: key ? { 'x-api-key': key } : {} });
        ws.on('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          res.resume();
          ws.terminate();
        });
        ws.on('error', () => undefined);
      });
      expect(status).toBe(401);
    }
  });

  it.each([
    ['encoding=opus', /encoding/],
    ['sample_rate=11025', /11025/],
    ['channels=3', /1 or 2 channels/],
  ])('%s: an Error, then close 1008', async (query, message) => {
    const emu = await emulator();
    const session = connect(emu, query);
    const error = await session.next((e) => e.type === 'Error');
    expect(error).toMatchObject({ code: 'INVALID_PARAMETERS', message: expect.stringMatching(message) });
    expect((await session.closed).code).toBe(1008);
  });

  it('an unknown or malformed message is an Error; the session goes on', async () => {
    const emu = await emulator();
    const session = connect(emu);
    await session.next((e) => e.type === 'Ready');
    session.ws.send('{"type":"Finalize"}');
    expect(await session.next((e) => e.type === 'Error')).toMatchObject({ code: 'UNKNOWN_MESSAGE' });
    session.ws.send('not json');
    expect(await session.next((e) => e.type === 'Error' && e.code === 'INVALID_MESSAGE')).toBeTruthy();
    session.ws.send(encodeCloseStream());
    expect((await session.closed).code).toBe(1000);
  });

  it('KeepAlive holds an idle session open; silence past the idle time ends it (fake timers)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const emu = await emulator({ liveIdleTimeoutMs: 10_000 });
    const session = connect(emu);
    await session.next((e) => e.type === 'Ready');
    await vi.advanceTimersByTimeAsync(9_000);
    session.ws.send(encodeKeepAlive());
    session.ws.send('{"type":"Probe"}'); // answered with an Error: the KeepAlive before it was read
    await session.next((e) => e.type === 'Error');
    await vi.advanceTimersByTimeAsync(9_000);
    expect(session.events.filter((e) => e.type === 'Error')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1_500);
    const idle = await session.next((e) => e.type === 'Error' && e.code === 'IDLE_TIMEOUT');
    expect(idle).toMatchObject({ message: expect.stringMatching(/KeepAlive/) });
    vi.useRealTimers();
    expect((await session.closed).code).toBe(1008);
  });
});
