import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { inspect } from 'node:util';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../lib/realtime/realtime-translate-stream.js';
import type { RealtimeEvent } from '../lib/realtime/realtime-events.js';
import { RtTranslateError } from '../lib/errors.js';
import { chunked, expectedTranslation, loadSpeechFixture } from './helpers/speech.js';

const KEY = 'test-key-0123456789';
const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);

let emulator: RunningEmulator | undefined;

async function emulate(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  emulator = await startEmulator({ apiKeys: [KEY], ...options });
  return emulator;
}

afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

function open(emu: RunningEmulator, options: Partial<RealtimeTranslateOptions> = {}): RealtimeTranslateStream {
  return new RealtimeTranslateStream({
    from: 'en-us',
    to: 'es-es',
    apiKey: KEY,
    realtimeUrl: emu.realtimeUrl,
    quietPeriodMs: 400,
    ...options,
  });
}

interface Collected {
  audio: Buffer;
  transcripts: string[];
  texts: string[];
  deltas: string[];
  audioDone: number;
  warnings: RtTranslateError[];
  sessionIds: string[];
}

/** Runs `input` (pieces) through the stream with pipeline() and collects everything. */
async function translate(stream: RealtimeTranslateStream, input: Buffer[]): Promise<Collected> {
  const out: Collected = { audio: Buffer.alloc(0), transcripts: [], texts: [], deltas: [], audioDone: 0, warnings: [], sessionIds: [] };
  const audio: Buffer[] = [];
  stream.on('transcript.done', (t) => out.transcripts.push(t));
  stream.on('text.done', (t) => out.texts.push(t));
  stream.on('text.delta', (d) => out.deltas.push(d));
  stream.on('audio.done', () => out.audioDone++);
  stream.on('warning', (w) => out.warnings.push(w));
  stream.on('session.created', (s) => out.sessionIds.push(s.id));
  await pipeline(
    Readable.from(input),
    stream,
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        audio.push(chunk);
        cb();
      },
    }),
  );
  out.audio = Buffer.concat(audio);
  return out;
}

describe('RealtimeTranslateStream against the emulator', () => {
  it('translates the speech fixture: output audio is bit for bit the expected utterances', async () => {
    const emu = await emulate();
    const stream = open(emu);
    const result = await translate(stream, chunked(fixture.pcm, [4800]));
    expect(result.audio.length).toBe(expected.length);
    expect(result.audio.equals(expected)).toBe(true);
    expect(result.transcripts).toHaveLength(3);
    // Durations of the emulator's own voiced regions (30 ms frames), not the client's.
    const seconds = fixture.utterances.map((u) => ((u.emulator.endSample - u.emulator.startSample) / 24_000).toFixed(2));
    expect(seconds).toEqual(['2.34', '1.23', '1.11']);
    expect(result.transcripts[0]).toMatch(/en-us utterance 1, 2\.34 s/);
    expect(result.texts).toEqual(seconds.map((d, i) => `[es-es translation of utterance ${i + 1}, ${d} s]`));
    // Text deltas are additive: their concatenation is the final text of each response.
    expect(result.deltas.join('')).toBe(result.texts.join(''));
    expect(result.audioDone).toBe(3);
    expect(result.warnings).toEqual([]);
    expect(result.sessionIds[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(stream.sessionId).toBe(result.sessionIds[0]);
    expect(stream.stats.responses).toBe(3);
    expect(stream.stats.bytesReceived).toBe(expected.length);
  });

  it.each([
    ['single odd bytes then large blocks', [1, 3, 4093, 65_537]],
    ['one 1 MiB block', [1024 * 1024]],
    ['20 ms frames', [960]],
  ])('gives the same audio whatever the input chunking: %s', async (_name, sizes) => {
    const emu = await emulate();
    const result = await translate(open(emu), chunked(fixture.pcm, sizes));
    expect(result.audio.equals(expected)).toBe(true);
  });

  it('splits a write larger than 256 KiB into appends the service accepts', async () => {
    const emu = await emulate();
    const stream = open(emu, { maxAppendBytes: 262_144 });
    // One write of the whole fixture (about 390 KiB): more than one append event must be sent.
    const result = await translate(stream, [fixture.pcm]);
    expect(result.warnings).toEqual([]);
    expect(result.audio.equals(expected)).toBe(true);
  });

  it('accepts output audio as binary WebSocket frames', async () => {
    const emu = await emulate({ audioFrames: 'binary' });
    const events: RealtimeEvent[] = [];
    const stream = open(emu);
    stream.on('event', (e) => events.push(e));
    const result = await translate(stream, chunked(fixture.pcm, [4800]));
    expect(result.audio.equals(expected)).toBe(true);
    const audioEvents = events.filter((e) => e.type === 'audio.delta');
    expect(audioEvents.length).toBeGreaterThan(3);
    expect(audioEvents.every((e) => e.type === 'audio.delta' && e.wireType === 'binary' && e.raw === undefined)).toBe(true);
  });

  it('text only: no audio comes out, the translated texts do', async () => {
    const emu = await emulate();
    const result = await translate(open(emu, { outputModalities: ['text'] }), chunked(fixture.pcm, [4800]));
    expect(result.audio.length).toBe(0);
    expect(result.texts).toHaveLength(3);
    expect(result.audioDone).toBe(0);
  });

  it('waits through a cold start (session.starting) and sends no audio before session.created', async () => {
    const emu = await emulate({ coldStartMs: 300 });
    const stream = open(emu);
    let starting = 0;
    stream.on('session.starting', () => starting++);
    // Audio sent before session.created would be discarded by the service, and the output
    // would then be shorter than expected.
    const result = await translate(stream, chunked(fixture.pcm, [4800]));
    expect(starting).toBe(1);
    expect(result.audio.equals(expected)).toBe(true);
  });

  it('waits after end() for a response that arrives late, within the quiet period', async () => {
    const emu = await emulate({ latencyMs: 250 });
    const result = await translate(open(emu, { quietPeriodMs: 1000 }), chunked(fixture.pcm, [4800]));
    expect(result.texts).toHaveLength(3);
    expect(result.audio.equals(expected)).toBe(true);
  });

  it('after end(), waits for the answer to speech it sent even when the service is slower than the quiet period', async () => {
    // The emulator starts each response 1.2 s after the utterance ends; the quiet period is
    // 0.3 s. Without tracking unanswered speech, the last response(s) would be cut off.
    const emu = await emulate({ latencyMs: 1200 });
    const result = await translate(open(emu, { quietPeriodMs: 300 }), [fixture.pcm]);
    expect(result.texts).toHaveLength(3);
    expect(result.audio.equals(expected)).toBe(true);
    expect(result.warnings).toEqual([]);
  });

  it('input without speech ends after the quiet period, not the stall timeout', { timeout: 8000 }, async () => {
    // responseStallTimeoutMs is far beyond the test's time limit: only the quiet-period rule
    // can end this session in time.
    const emu = await emulate();
    const stream = open(emu, { quietPeriodMs: 300, responseStallTimeoutMs: 60_000 });
    const result = await translate(stream, [Buffer.alloc(48_000)]);
    expect(result.audio.length).toBe(0);
    expect(result.transcripts).toEqual([]);
    expect(result.warnings).toEqual([]);
  });

  it('events() yields every server event in order and ends when the stream ends', async () => {
    const emu = await emulate();
    const stream = open(emu);
    const types: string[] = [];
    const iterate = (async () => {
      for await (const event of stream.events()) types.push(event.type);
    })();
    await translate(stream, chunked(fixture.pcm, [4800]));
    await iterate;
    expect(types.slice(0, 2)).toEqual(['session.created', 'session.updated']);
    expect(types.at(-1)).toBe('ended');
    const perResponse = types.slice(2, -1);
    // transcript, text deltas, text done, audio deltas, audio done, the response's timing: three times.
    const compact = perResponse
      .join(' ')
      .replace(/(text\.delta ?)+/g, 'text.delta+ ')
      .replace(/(audio\.delta ?)+/g, 'audio.delta+ ')
      .trim();
    expect(compact).toBe(Array(3).fill('transcript.done text.delta+ text.done audio.delta+ audio.done response').join(' '));
  });

  it('sends the key in auth.api_key only when asked, and the session works that way', async () => {
    const emu = await emulate();
    const result = await translate(open(emu, { sendKeyInSessionUpdate: true }), chunked(fixture.pcm, [4800]));
    expect(result.audio.equals(expected)).toBe(true);
  });

  it('drops a trailing odd byte with a warning naming the input', async () => {
    const emu = await emulate();
    const odd = Buffer.concat([fixture.pcm, Buffer.from([7])]);
    const result = await translate(open(emu), [odd]);
    expect(result.audio.equals(expected)).toBe(true);
    expect(result.warnings.map((w) => [w.code, (w as { field?: string }).field])).toEqual([['RTT_VALIDATION', 'input']]);
  });
});

describe('RealtimeTranslateStream failures', () => {
  it('a bad key is refused at the handshake: AuthError with status 401, key not in the message', async () => {
    const emu = await emulate();
    const stream = open(emu, { apiKey: 'wrong-key-ABCDEFGH' });
    const error = await translate(stream, [fixture.pcm]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RtTranslateError);
    expect((error as RtTranslateError).code).toBe('RTT_AUTH');
    expect((error as RtTranslateError).status).toBe(401);
    expect((error as Error).message).not.toContain('wrong-key-ABCDEFGH');
    expect(inspect(error)).not.toContain('wrong-key-ABCDEFGH');
  });

  it('a bad key in auth.api_key is an AuthError carrying the server message', async () => {
    const emu = await emulate();
    const stream = open(emu, { apiKey: 'wrong-key-ABCDEFGH', sendKeyInSessionUpdate: true });
    const error = (await translate(stream, [fixture.pcm]).catch((e: unknown) => e)) as RtTranslateError;
    expect(error.code).toBe('RTT_AUTH');
    expect(error.serverMessage).toBeTruthy();
    expect(error.message).toContain(error.serverMessage!);
    expect(error.message).not.toContain('wrong-key-ABCDEFGH');
  });

  it('a cloned voice the key does not own is rejected: VoiceRejectedError with the server message', async () => {
    const emu = await emulate({ clonedVoices: { [KEY]: [5001] } });
    const error = (await translate(open(emu, { voiceId: 5002 }), [fixture.pcm]).catch((e: unknown) => e)) as RtTranslateError;
    expect(error.code).toBe('RTT_VOICE_REJECTED');
    expect(error.serverMessage).toMatch(/5002/);
  });

  it('an owned cloned voice is accepted and echoed in the session', async () => {
    const emu = await emulate({ clonedVoices: { [KEY]: [5001] } });
    const stream = open(emu, { voiceId: 5001 });
    const result = await translate(stream, chunked(fixture.pcm, [4800]));
    expect(stream.session?.voice).toEqual({ type: 'cloned', voiceId: 5001 });
    expect(result.audio.equals(expected)).toBe(true);
  });

  it('a billing stop delivers everything received before it, then fails with BillingError', async () => {
    // 4 s of credit: the first utterance (ends at 2.9 s incl. padding) completes, the rest does not.
    const emu = await emulate({ creditSeconds: 4 });
    const stream = open(emu);
    const audio: Buffer[] = [];
    let texts = 0;
    stream.on('text.done', () => texts++);
    const warnings: RtTranslateError[] = [];
    stream.on('warning', (w) => warnings.push(w));
    const error = (await pipeline(
      Readable.from(chunked(fixture.pcm, [4800])),
      stream,
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          audio.push(chunk);
          setTimeout(cb, 2); // a slow consumer
        },
      }),
    ).catch((e: unknown) => e)) as RtTranslateError;
    expect(error.code).toBe('RTT_BILLING');
    expect(error.serverMessage).toMatch(/credit/i);
    // The service closed right after its error: that error is the cause, not also a warning.
    expect(warnings).toEqual([]);
    expect(texts).toBe(1);
    const first = expectedTranslation(fixture.pcm, fixture.utterances.slice(0, 1));
    expect(Buffer.concat(audio).equals(first)).toBe(true);
  });

  it('refuses plain ws:// to a host that is not loopback, before any traffic', () => {
    expect(() => new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: 'ws://example.com' })).toThrow(
      expect.objectContaining({ code: 'RTT_CONFIG', field: 'realtimeUrl' }),
    );
  });

  it.each([
    ['from', { from: 'xx-yy' }, 'from'],
    ['to', { to: 'en' }, 'to'],
    ['voiceId', { voiceId: 0 }, 'voiceId'],
    ['outputModalities', { outputModalities: [] as never }, 'outputModalities'],
    ['maxAppendBytes', { maxAppendBytes: 300_000 }, 'maxAppendBytes'],
    ['readyTimeoutMs', { readyTimeoutMs: -1 }, 'readyTimeoutMs'],
    ['headers', { headers: { 'X-Api-Key': 'k' } }, 'headers'],
  ])('bad %s throws a ValidationError naming the field, synchronously', (_name, bad, field) => {
    expect(() => new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: 'ws://127.0.0.1:1', ...bad })).toThrow(
      expect.objectContaining({ code: 'RTT_VALIDATION', field }),
    );
  });

  it('without a key or URL anywhere it is a ConfigError naming the option and the variable', () => {
    const saved = { key: process.env.RT_TRANSLATE_API_KEY, url: process.env.RT_TRANSLATE_REALTIME_URL };
    delete process.env.RT_TRANSLATE_API_KEY;
    delete process.env.RT_TRANSLATE_REALTIME_URL;
    try {
      expect(() => new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', realtimeUrl: 'ws://127.0.0.1:1' })).toThrow(/RT_TRANSLATE_API_KEY/);
      expect(() => new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY })).toThrow(/RT_TRANSLATE_REALTIME_URL/);
    } finally {
      if (saved.key !== undefined) process.env.RT_TRANSLATE_API_KEY = saved.key;
      if (saved.url !== undefined) process.env.RT_TRANSLATE_REALTIME_URL = saved.url;
    }
  });

  it('never shows the key in inspection output', async () => {
    const emu = await emulate();
    const stream = open(emu);
    const shown = inspect(stream, { depth: 10, showHidden: true });
    expect(shown).not.toContain(KEY);
    expect(shown).toContain('es-es');
    stream.destroy();
    await new Promise((resolve) => stream.once('close', resolve));
  });

  it('a connection refused is a retryable ConnectionError', async () => {
    const emu = await emulate();
    const url = emu.realtimeUrl;
    await emu.close();
    emulator = undefined;
    const error = (await translate(new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: url }), [fixture.pcm]).catch(
      (e: unknown) => e,
    )) as RtTranslateError;
    expect(error.code).toBe('RTT_CONNECTION');
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/ECONNREFUSED/);
  });
});

describe('RealtimeTranslateStream environment', () => {
  const saved: Record<string, string | undefined> = {};
  beforeEach(() => {
    saved.key = process.env.RT_TRANSLATE_API_KEY;
    saved.url = process.env.RT_TRANSLATE_REALTIME_URL;
  });
  afterEach(() => {
    for (const [name, value] of [
      ['RT_TRANSLATE_API_KEY', saved.key],
      ['RT_TRANSLATE_REALTIME_URL', saved.url],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it('reads the key and the realtime URL from the environment', async () => {
    const emu = await emulate();
    process.env.RT_TRANSLATE_API_KEY = KEY;
    process.env.RT_TRANSLATE_REALTIME_URL = emu.realtimeUrl;
    const stream = new RealtimeTranslateStream({ from: 'EN-US', to: 'ES-ES', quietPeriodMs: 400 });
    const result = await translate(stream, chunked(fixture.pcm, [4800]));
    expect(stream.session?.sourceLanguage).toBe('en-us');
    expect(result.audio.equals(expected)).toBe(true);
  });
});
