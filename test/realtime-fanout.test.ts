/**
 * RealtimeFanout over real sockets: one input, one session per language, against the emulator
 * (through a recording proxy, `helpers/session-proxy.ts`, where a test needs what each session
 * sent or one language's network to misbehave) and against the independent reference server.
 *
 * Each target's output is checked byte for byte against what its own sessions sent (the proxy
 * marks each language's audio differently, so audio routed to the wrong target is caught);
 * then a slow reader, a failing target, a dropped target that reconnects, a target that lags,
 * targets joining and leaving mid-stream, an `events()` consumer that is behind, an abort, the
 * options' validation, and the memory figures over a long input.
 */
import { Readable, Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { RtTranslateError, ValidationError } from '../lib/errors.js';
import { RealtimeFanout, fanoutEventToRecord, type FanoutEvent, type RealtimeFanoutOptions } from '../lib/realtime/fanout.js';
import { startReferenceServer, type ReferenceServer, type ReferenceServerOptions } from './reference-server/index.js';
import { countHandles, expectNoLeakedHandles, type HandleCounts } from './helpers/handles.js';
import { startSessionProxy, type SessionProxy, type SessionProxyOptions } from './helpers/session-proxy.js';
import { answerVariants, answersIn, chunked, emulatorUtterances, expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { collector } from './helpers/streams.js';
import { waitFor } from './helpers/wait-for.js';

const KEY = 'fanout-test-key';
const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
const MS = 48;

const closers: Array<() => Promise<void>> = [];
let baseline: HandleCounts;

beforeEach(() => {
  baseline = countHandles();
});

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await expectNoLeakedHandles(baseline);
});

async function emulate(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emu = await startEmulator({ apiKeys: [KEY], ...options });
  closers.push(() => emu.close());
  return emu;
}

async function proxied(options: SessionProxyOptions = {}, emulator: EmulatorOptions = {}): Promise<SessionProxy> {
  const emu = await emulate(emulator);
  const proxy = await startSessionProxy(emu.realtimeUrl, options);
  closers.push(() => proxy.close());
  return proxy;
}

function fanout(realtimeUrl: string, options: Partial<RealtimeFanoutOptions> = {}, apiKey = KEY): RealtimeFanout {
  return new RealtimeFanout({ from: 'en-us', to: ['es-es', 'fr-fr', 'de-de'], apiKey, realtimeUrl, quietPeriodMs: 400, ...options });
}

/** Reads a target's output into memory; resolves with all of it once it ends. */
function drain(output: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  return pipeline(output, collector(chunks)).then(() => Buffer.concat(chunks));
}

interface Run {
  outputs: Map<string, Buffer>;
  events: FanoutEvent[];
  error: unknown;
}

/** Feeds `input` into `fan` while reading every initial target's output; resolves once all are done. */
async function run(fan: RealtimeFanout, input: Iterable<Buffer> | Readable): Promise<Run> {
  const events: FanoutEvent[] = [];
  fan.on('event', (event) => events.push(event));
  const outputs = new Map<string, Buffer>();
  let error: unknown;
  await Promise.all([
    pipeline(input instanceof Readable ? input : Readable.from(input), fan).catch((caught: unknown) => void (error = caught)),
    ...fan.targets.map(async (t) => outputs.set(t.lang, await drain(t.output))),
  ]);
  return { outputs, events, error };
}

/** Each language's events, in order, by type. */
function typesOf(events: FanoutEvent[], lang: string): string[] {
  return events.filter((e) => e.lang === lang).map((e) => e.type);
}

/**
 * Polls `probe` every few ms until it holds (for states no event announces, such as a socket
 * paused for a consumer that is behind); the test's timeout bounds it.
 */
async function until(probe: () => boolean, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`Gave up waiting for ${what}.`);
    await sleep(5);
  }
}

const MARKS = { 'es-es': 0x11, 'fr-fr': 0x5a, 'de-de': 0xa5 };

describe('RealtimeFanout: one input, a session per language', () => {
  it('each target outputs exactly what its own session sent, in its language, with tagged events and figures per language', async () => {
    const proxy = await proxied({ mark: MARKS });
    const fan = fanout(proxy.realtimeUrl);
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    expect(result.error).toBeUndefined();
    for (const lang of ['es-es', 'fr-fr', 'de-de']) {
      const output = result.outputs.get(lang)!;
      expect(output.length, lang).toBe(expected.length);
      expect(output.equals(proxy.sent(lang)), lang).toBe(true);
      // The session answered the whole input: its audio, unmarked, is the emulator's answer.
      expect(Buffer.from(output.map((b) => b ^ MARKS[lang as keyof typeof MARKS])).equals(expected), lang).toBe(true);
      const texts = result.events.flatMap((e) => (e.type === 'text.done' && e.lang === lang ? [e.text] : []));
      expect(texts).toHaveLength(3);
      for (const text of texts) expect(text).toMatch(new RegExp(`^\\[${lang} translation of utterance`));
      const types = typesOf(result.events, lang);
      expect(types[0]).toBe('target.added');
      expect(types.slice(-2)).toEqual(['ended', 'target.done']);
      expect(proxy.inputBytes(lang)).toBe(fixture.pcm.length + 800 * MS);
    }
    const stats = fan.stats;
    expect(stats.inputBytes).toBe(fixture.pcm.length);
    expect(stats.lagged).toBe(0);
    expect(stats.targets.map((t) => [t.lang, t.status, t.outcome, t.responses, t.bytesReceived, t.latency.firstAudioMs.count])).toEqual([
      ['es-es', 'ended', 'complete', 3, expected.length, 3],
      ['fr-fr', 'ended', 'complete', 3, expected.length, 3],
      ['de-de', 'ended', 'complete', 3, expected.length, 3],
    ]);
    const done = result.events.flatMap((e) => (e.type === 'target.done' ? [`${e.lang} ${e.outcome}`] : []));
    expect(done.sort()).toEqual(['de-de complete', 'es-es complete', 'fr-fr complete']);
    expect(inspect(fan)).toBe("RealtimeFanout { from: 'en-us', targets: ['es-es' (ended), 'fr-fr' (ended), 'de-de' (ended)], inputBytes: 399644 }");
  });

  it.each([
    ['odd sizes, a sample split across writes', [1, 3, 4093, 65_537]],
    ['one write of the whole input', [1024 * 1024]],
  ])('whatever the chunking (%s), every target gets whole samples and the same translation', async (_name, sizes) => {
    const emu = await emulate();
    const result = await run(fanout(emu.realtimeUrl, { to: ['es-es', 'ja-jp'] }), chunked(fixture.pcm, sizes));
    expect([...result.outputs.keys()].sort()).toEqual(['es-es', 'ja-jp']);
    for (const output of result.outputs.values()) expect(output.equals(expected)).toBe(true);
  });

  it('a trailing odd byte is dropped with one warning of the fan-out (lang undefined), not one per target', async () => {
    const emu = await emulate();
    const fan = fanout(emu.realtimeUrl, { to: ['es-es', 'fr-fr'] });
    const warnings: RtTranslateError[] = [];
    fan.on('warning', (w) => warnings.push(w));
    const result = await run(fan, [fixture.pcm, Buffer.from([7])]);
    expect(warnings.map((w) => w.code)).toEqual(['RTT_VALIDATION']);
    expect(result.events.filter((e) => e.type === 'warning').map((e) => e.lang)).toEqual([undefined]);
    expect(fan.stats.inputBytes).toBe(fixture.pcm.length);
    for (const output of result.outputs.values()) expect(output.equals(expected)).toBe(true);
  });

  it('a slow reader pauses its own socket only: the other languages finish meanwhile, then it gets all of its audio', async () => {
    const proxy = await proxied({ mark: MARKS });
    const fan = fanout(proxy.realtimeUrl, { readableHighWaterMark: 4096 });
    const events: FanoutEvent[] = [];
    fan.on('event', (e) => events.push(e));
    // fr-fr's reader takes one chunk, then holds its callback until released.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const slow: Buffer[] = [];
    const slowReader = new Writable({
      highWaterMark: 1,
      write(chunk: Buffer, _encoding, callback) {
        slow.push(chunk);
        if (slow.length === 1) void released.then(() => callback());
        else callback();
      },
    });
    const frDone = pipeline(fan.target('fr-fr')!.output, slowReader);
    const others = Promise.all(['es-es', 'de-de'].map((lang) => drain(fan.target(lang)!.output)));
    const input = pipeline(Readable.from(chunked(fixture.pcm, [4800])), fan);
    let frPaused = false;
    fan.on('event', () => (frPaused ||= fan.target('fr-fr')!.stats.paused));
    const [es, de] = await others;
    expect(es!.equals(proxy.sent('es-es'))).toBe(true);
    expect(de!.equals(proxy.sent('de-de'))).toBe(true);
    expect(fan.target('es-es')!.outcome).toBe('complete');
    expect(fan.target('de-de')!.outcome).toBe('complete');
    // fr-fr is held by its reader: its socket is paused, its session not over, its audio not all read.
    expect(frPaused).toBe(true);
    expect(fan.target('fr-fr')!.outcome).toBeUndefined();
    expect(fan.stats.targets.filter((t) => t.lang !== 'fr-fr').every((t) => t.paused === false)).toBe(true);
    release();
    await Promise.all([frDone, input]);
    expect(Buffer.concat(slow).equals(proxy.sent('fr-fr'))).toBe(true);
    expect(Buffer.from(Buffer.concat(slow).map((b) => b ^ MARKS['fr-fr'])).equals(expected)).toBe(true);
    expect(fan.target('fr-fr')!.outcome).toBe('complete');
  });

  it('a target whose voice is rejected fails alone: its error in its target.done and stats; the others complete', async () => {
    const proxy = await proxied({ mark: MARKS });
    const fan = fanout(proxy.realtimeUrl, { to: ['es-es', { lang: 'fr-fr', voiceId: 424242 }, 'de-de'] });
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    expect(result.error).toBeUndefined();
    const fr = fan.target('fr-fr')!;
    expect(fr.outcome).toBe('failed');
    expect(fr.error?.code).toBe('RTT_VOICE_REJECTED');
    expect(fr.stats.status).toBe('failed');
    expect(fr.stats.error).toBe(fr.error);
    const done = result.events.find((e) => e.type === 'target.done' && e.lang === 'fr-fr');
    expect(done && done.type === 'target.done' && done.error?.code).toBe('RTT_VOICE_REJECTED');
    expect(fanoutEventToRecord(done!)).toMatchObject({ type: 'target.done', lang: 'fr-fr', outcome: 'failed', error: { code: 'RTT_VOICE_REJECTED' } });
    expect(result.outputs.get('fr-fr')!.length).toBe(0);
    for (const lang of ['es-es', 'de-de']) {
      expect(result.outputs.get(lang)!.equals(proxy.sent(lang)), lang).toBe(true);
      expect(fan.target(lang)!.outcome).toBe('complete');
      expect(proxy.responses(lang)).toBe(3);
    }
  });

  it('a language the service refuses fails alone, the others complete', async () => {
    const proxy = await proxied({ refuse: { 'de-de': 'unsupported target_language de-de' } });
    const fan = fanout(proxy.realtimeUrl);
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    expect(fan.target('de-de')!.outcome).toBe('failed');
    expect(fan.target('de-de')!.error?.message).toMatch(/unsupported target_language de-de/);
    expect(result.outputs.get('es-es')!.equals(expected)).toBe(true);
    expect(result.outputs.get('fr-fr')!.equals(expected)).toBe(true);
  });

  it('a dropped target reconnects and replays only its own input; the others never notice', async () => {
    const proxy = await proxied({ mark: MARKS });
    proxy.cutAfterResponses('fr-fr', 1);
    const fan = fanout(proxy.realtimeUrl);
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    expect(result.error).toBeUndefined();
    expect(typesOf(result.events, 'fr-fr')).toContain('reconnected');
    expect(proxy.connections('fr-fr')).toBe(2);
    const byLang = Object.fromEntries(fan.stats.targets.map((t) => [t.lang, t]));
    expect(byLang['fr-fr']!.reconnects).toBe(1);
    expect(byLang['fr-fr']!.bytesReplayed).toBeGreaterThan(0);
    for (const lang of ['es-es', 'de-de']) {
      expect(byLang[lang]!.reconnects, lang).toBe(0);
      expect(byLang[lang]!.bytesReplayed, lang).toBe(0);
      expect(proxy.connections(lang)).toBe(1);
      expect(result.outputs.get(lang)!.equals(proxy.sent(lang)), lang).toBe(true);
    }
    // Its output is what its two sessions sent: every answer once (the second session's grid may fall elsewhere).
    const fr = result.outputs.get('fr-fr')!;
    expect(fr.equals(proxy.sent('fr-fr'))).toBe(true);
    expect(answersIn(Buffer.from(fr.map((b) => b ^ MARKS['fr-fr'])), answerVariants(fixture.pcm))).toBeInstanceOf(Array);
    expect(fan.target('fr-fr')!.outcome).toBe('complete');
  });

  it('a target whose service stops reading is stopped after maxLagMs with a TimeoutError; the others finish', async () => {
    const proxy = await proxied({ mark: MARKS });
    // Long enough that a target whose service reads (the emulator runs in this process, on a
    // machine that may be busy) is never 1 s behind; the stalled one is, for good.
    const fan = fanout(proxy.realtimeUrl, { maxLagMs: 1000, maxSocketBufferBytes: 16 * 1024 });
    // Several megabytes, so that the stalled socket's kernel buffers fill.
    const input = Buffer.concat(Array.from({ length: 12 }, () => fixture.pcm));
    fan.once('target.added', () => proxy.stall('fr-fr'));
    const result = await run(fan, chunked(input, [48_000]));
    proxy.unstall('fr-fr');
    expect(result.error).toBeUndefined();
    const fr = fan.target('fr-fr')!;
    expect(fr.outcome).toBe('failed');
    expect(fr.error?.code).toBe('RTT_TIMEOUT');
    expect(fr.error?.message).toMatch(/fr-fr target kept the input waiting for more than 1000 ms/);
    expect(fan.stats.lagged).toBe(1);
    for (const lang of ['es-es', 'de-de']) {
      expect(fan.target(lang)!.outcome, lang).toBe('complete');
      expect(proxy.inputBytes(lang)).toBe(input.length + 800 * MS);
      expect(result.outputs.get(lang)!.equals(proxy.sent(lang)), lang).toBe(true);
    }
    expect(fan.stats.writeWaitMs).toBeGreaterThanOrEqual(1000);
  });

  it('targets join mid-stream (from the moment they join) and leave (removed: at the end of their input, or at once)', async () => {
    const proxy = await proxied({ mark: MARKS });
    const fan = fanout(proxy.realtimeUrl, { to: ['es-es', 'de-de'] });
    const events: FanoutEvent[] = [];
    fan.on('event', (e) => events.push(e));
    const es = drain(fan.target('es-es')!.output);
    const de = drain(fan.target('de-de')!.output);
    // The first sentence and half of the pause after it, and one byte of the next sample: a
    // target that joins now starts on a whole sample, the one that byte begins.
    const split = fixture.utterances[0]!.endSample * 2 + 600 * MS + 1;
    const joinedAt = split - 1;
    const answered = (lang: string, n: number) => () => proxy.responses(lang) >= n;
    await new Promise<void>((resolve) => fan.write(fixture.pcm.subarray(0, split), () => resolve()));
    await waitFor(answered('es-es', 1), { onEvent: [proxy.events, 'changed'] });
    await waitFor(answered('de-de', 1), { onEvent: [proxy.events, 'changed'] });
    // fr-fr joins; de-de leaves: its input ends here.
    const fr = fan.addTarget('fr-fr');
    expect(fr.stats.inputOffset).toBe(joinedAt);
    const frOut = drain(fr.output);
    expect(fan.removeTarget('de-de')).toBe(true);
    expect(fan.removeTarget('de-de')).toBe(false);
    await new Promise<void>((resolve) => fan.write(fixture.pcm.subarray(split), () => resolve()));
    // A listener that goes away: its output destroyed, its target stops at once.
    const ja = fan.addTarget({ lang: 'ja-jp' });
    ja.output.destroy();
    await ja.done();
    fan.end();
    const [esAudio, deAudio, frAudio] = await Promise.all([es, de, frOut]);
    await finished(fan);
    expect(esAudio!.equals(proxy.sent('es-es'))).toBe(true);
    expect(Buffer.from(esAudio!.map((b) => b ^ MARKS['es-es'])).equals(expected)).toBe(true);
    // de-de answered its first sentence only: its input ended before the second.
    expect(deAudio!.equals(proxy.sent('de-de'))).toBe(true);
    expect(Buffer.from(deAudio!.map((b) => b ^ MARKS['de-de'])).equals(emulatorUtterances(fixture.pcm.subarray(0, joinedAt))[0]!.audio)).toBe(true);
    expect(fan.target('de-de')!.outcome).toBe('removed');
    expect(fan.target('de-de')!.stats.ending?.complete).toBe(true);
    // fr-fr got the input from where it joined, and answered the two sentences after it.
    expect(proxy.inputBytes('fr-fr')).toBe(fixture.pcm.length - joinedAt + 800 * MS);
    const frExpected = Buffer.concat(emulatorUtterances(fixture.pcm.subarray(joinedAt)).map((u) => u.audio));
    expect(frAudio!.equals(proxy.sent('fr-fr'))).toBe(true);
    expect(Buffer.from(frAudio!.map((b) => b ^ MARKS['fr-fr'])).equals(frExpected)).toBe(true);
    expect(fan.target('fr-fr')!.outcome).toBe('complete');
    expect(fan.target('ja-jp')!.outcome).toBe('removed');
    expect(events.filter((e) => e.type === 'target.added').map((e) => [e.lang, e.type === 'target.added' && e.inputOffset])).toEqual([
      ['es-es', 0],
      ['de-de', 0],
      ['fr-fr', joinedAt],
      ['ja-jp', fixture.pcm.length],
    ]);
    expect(fan.targets.map((t) => t.lang)).toEqual(['es-es', 'de-de', 'fr-fr', 'ja-jp']);
  });

  it("one events() iterator yields every target's events, in order per target; a consumer that is behind pauses the sockets and loses nothing", async () => {
    const emu = await emulate();
    const fan = fanout(emu.realtimeUrl, { maxQueuedEvents: 4 });
    const emitted: FanoutEvent[] = [];
    fan.on('event', (e) => emitted.push(e));
    const iterator = fan.events();
    const outputs = fan.targets.map((t) => drain(t.output));
    const input = pipeline(Readable.from(chunked(fixture.pcm, [4800])), fan);
    // Nothing is pulled until every target's socket was paused by the events waiting.
    await until(() => fan.stats.targets.every((t) => t.paused), 'every socket paused');
    const held = emitted.length;
    expect(fan.target('es-es')!.outcome).toBeUndefined();
    const yielded: FanoutEvent[] = [];
    for await (const event of iterator) yielded.push(event);
    await input;
    for (const output of await Promise.all(outputs)) expect(output.equals(expected)).toBe(true);
    expect(yielded).toEqual(emitted);
    expect(held).toBeLessThan(emitted.length);
    for (const lang of ['es-es', 'fr-fr', 'de-de']) {
      const types = typesOf(yielded, lang);
      expect(types.filter((t) => t === 'audio.done')).toHaveLength(3);
      expect(types.at(-1)).toBe('target.done');
    }
  });

  it('twelve targets under one abort signal: every one complete, and the signal holds one listener, not one per target', async () => {
    const emu = await emulate();
    const controller = new AbortController();
    const langs = ['es-es', 'fr-fr', 'de-de', 'ja-jp', 'ko-kr', 'zh-cn', 'pt-br', 'hi-in', 'ar-ae', 'ar-eg', 'ar-sa', 'fr-ca'];
    const fan = fanout(emu.realtimeUrl, { to: langs, maxTargets: 12, signal: controller.signal });
    const result = await run(fan, chunked(fixture.pcm, [48_000]));
    expect(result.error).toBeUndefined();
    expect([...result.outputs.keys()].sort()).toEqual([...langs].sort());
    for (const [lang, output] of result.outputs) expect(output.equals(expected), lang).toBe(true);
    expect(fan.stats.targets.every((t) => t.outcome === 'complete')).toBe(true);
    // (Node warns past 10 listeners on one signal; the suite fails on any process warning.)
  });

  it('an abort stops every target with an AbortError; their outputs end with what arrived', async () => {
    const emu = await emulate();
    const controller = new AbortController();
    const fan = fanout(emu.realtimeUrl, { signal: controller.signal });
    const outputs = fan.targets.map((t) => drain(t.output));
    const source = new Readable({ read() {} });
    const input = pipeline(source, fan).then(
      () => undefined,
      (error: unknown) => error,
    );
    source.push(fixture.pcm.subarray(0, fixture.utterances[0]!.endSample * 2 + 600 * MS));
    await waitFor(() => fan.stats.targets.every((t) => t.responses >= 1), { onEvent: [fan, 'event'] });
    controller.abort();
    const error = (await input) as RtTranslateError;
    expect(error.code).toBe('RTT_ABORTED');
    const received = await Promise.all(outputs);
    for (const [i, target] of fan.targets.entries()) {
      expect(target.outcome).toBe('failed');
      expect(target.error?.code).toBe('RTT_ABORTED');
      expect(received[i]!.equals(emulatorUtterances(fixture.pcm)[0]!.audio)).toBe(true);
    }
  });
});

describe('RealtimeFanout options: checked before any traffic', () => {
  let emu: RunningEmulator;
  beforeEach(async () => {
    emu = await emulate();
  });

  it.each([
    ['to is not a list', { to: 'es-es' }, 'to'],
    ['an unknown language', { to: ['es-es', 'xx-yy'] }, 'to[1]'],
    ['a bad language in an object', { to: [{ lang: 'klingon' }] }, 'to[0].lang'],
    ['a bad voice of one target', { to: ['es-es', { lang: 'fr-fr', voiceId: -3 }] }, 'to[1].voiceId'],
    ['a language twice', { to: ['es-es', 'ES-ES'] }, 'to[1]'],
    ['more targets than maxTargets', { to: ['es-es', 'fr-fr', 'de-de'], maxTargets: 2 }, 'to'],
    ['maxTargets 0', { maxTargets: 0 }, 'maxTargets'],
    ['maxTargets above 64', { maxTargets: 65 }, 'maxTargets'],
    ['maxLagMs 0', { maxLagMs: 0 }, 'maxLagMs'],
    ['a bad shared voice', { voiceId: 1.5 }, 'voiceId'],
    ['a bad shared option', { quietPeriodMs: -1 }, 'quietPeriodMs'],
    ['a bad source language', { from: 'en' }, 'from'],
  ])('%s: a ValidationError naming %s', (_name, options, field) => {
    let error: unknown;
    try {
      fanout(emu.realtimeUrl, options as Partial<RealtimeFanoutOptions>);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect(emu.realtimeSessions()).toEqual([]);
  });

  it('without a key: a ConfigError naming apiKey; the key never in a message', () => {
    expect(() => new RealtimeFanout({ from: 'en-us', to: ['es-es'], realtimeUrl: emu.realtimeUrl })).toThrow(
      expect.objectContaining({ code: 'RTT_CONFIG', field: 'apiKey' }),
    );
    const secret = 'sk-this-is-a-secret-key-123456';
    let message = '';
    try {
      new RealtimeFanout({ from: 'en-us', to: ['es-es'], apiKey: secret, realtimeUrl: emu.realtimeUrl, headers: { 'X-Api-Key': secret } });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/headers/);
    expect(message).not.toContain(secret);
  });

  it('addTarget refuses a running language, one target too many and a closed input, naming the field', async () => {
    const fan = fanout(emu.realtimeUrl, { to: ['es-es'], maxTargets: 2 });
    const field = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return (error as ValidationError).field;
      }
      return undefined;
    };
    expect(field(() => fan.addTarget('ES-es'))).toBe('target');
    expect(field(() => fan.addTarget({ lang: 'zz' as 'es-es' }))).toBe('target.lang');
    expect(field(() => fan.addTarget({ lang: 'fr-fr', voiceId: 0 }))).toBe('target.voiceId');
    fan.addTarget('fr-fr');
    expect(field(() => fan.addTarget('de-de'))).toBe('target');
    expect(() => fan.removeTarget('nope')).toThrow(expect.objectContaining({ field: 'lang' }));
    const outputs = fan.targets.map((t) => drain(t.output));
    await pipeline(Readable.from([fixture.pcm]), fan);
    await Promise.all(outputs);
    expect(field(() => fan.addTarget('de-de'))).toBe('addTarget');
  });

  it('with no target the input is taken and dropped; the fan-out finishes', async () => {
    const fan = fanout(emu.realtimeUrl, { to: [] });
    await pipeline(Readable.from(chunked(fixture.pcm, [4800])), fan);
    expect(fan.stats).toEqual({ inputBytes: fixture.pcm.length, writeWaitMs: expect.any(Number), lagged: 0, targets: [] });
    expect(emu.realtimeSessions()).toEqual([]);
  });
});

describe('RealtimeFanout memory over a long input', () => {
  it('the queued and kept audio of every target stays under its bounds, whatever the length of the input', async () => {
    const emu = await emulate();
    const bounds = { maxSocketBufferBytes: 64 * 1024, writableHighWaterMark: 32 * 1024, reconnect: { maxReplayMs: 2000 } };
    const fan = fanout(emu.realtimeUrl, bounds);
    // Three minutes of speech, written as fast as the sessions take it.
    const minutes = 3;
    const loops = Math.ceil((minutes * 60 * 48_000) / fixture.pcm.length);
    let peakKept = 0;
    let peakKeptFirstHalf = 0;
    let written = 0;
    const sample = () => {
      for (const t of fan.stats.targets) {
        const kept = t.inputWaiting + t.replayBytes + t.bytesQueued;
        peakKept = Math.max(peakKept, kept);
        if (written < (loops * fixture.pcm.length) / 2) peakKeptFirstHalf = Math.max(peakKeptFirstHalf, kept);
      }
    };
    function* input(): Generator<Buffer> {
      for (let i = 0; i < loops; i++) {
        for (const piece of chunked(fixture.pcm, [48_000])) {
          sample();
          written += piece.length;
          yield piece;
        }
      }
    }
    const received = new Map<string, number>();
    const outputs = fan.targets.map((t) =>
      pipeline(
        t.output,
        new Writable({
          write(chunk: Buffer, _encoding, callback) {
            received.set(t.lang, (received.get(t.lang) ?? 0) + chunk.length);
            callback();
          },
        }),
      ),
    );
    await Promise.all([pipeline(Readable.from(input()), fan), ...outputs]);
    // Sent but unanswered input (at most the replay bound plus the answer's silence) and queued input, per target.
    const bound = 2000 * MS + bounds.maxSocketBufferBytes + bounds.writableHighWaterMark + 48_000 + 1200 * MS;
    expect(peakKept).toBeLessThanOrEqual(bound);
    expect(peakKept).toBeLessThanOrEqual(Math.max(peakKeptFirstHalf * 1.5, 256 * 1024));
    expect(fan.writableLength).toBe(0);
    expect(fan.stats.inputBytes).toBe(loops * fixture.pcm.length);
    const perLoop = expected.length;
    for (const lang of ['es-es', 'fr-fr', 'de-de']) expect(received.get(lang)).toBeGreaterThanOrEqual(perLoop * loops * 0.95);
  }, 60_000);
});

describe("RealtimeFanout against the reference server (a service whose judgement is not the emulator's)", () => {
  async function reference(options: ReferenceServerOptions = {}): Promise<ReferenceServer> {
    const server = await startReferenceServer(options);
    closers.push(() => server.close());
    return server;
  }

  /** The audio the reference server sent to the sessions of `lang` (its texts name the target). */
  function sentTo(server: ReferenceServer, lang: string): Buffer {
    return Buffer.concat(server.responses.filter((r) => r.text.startsWith(`[${lang}]`)).map((r) => r.audio));
  }

  it.each([
    ['one answer per utterance, JSON audio', {}],
    ['merged answers as binary frames', { answer: 'merge', audio: 'binary' }],
    ['split answers after a cold start', { answer: 'split', coldStartMs: 300 }],
  ] as Array<[string, ReferenceServerOptions]>)('%s: each target outputs what its session sent', async (_name, options) => {
    const server = await reference(options);
    const fan = fanout(server.realtimeUrl, {}, server.apiKey);
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    expect(result.error).toBeUndefined();
    expect(server.sessions).toBe(3);
    for (const lang of ['es-es', 'fr-fr', 'de-de']) {
      const sent = sentTo(server, lang);
      expect(sent.length, lang).toBeGreaterThan(0);
      expect(result.outputs.get(lang)!.equals(sent), lang).toBe(true);
      expect(fan.target(lang)!.outcome, lang).toBe('complete');
    }
  });

  it('a voice the service does not know fails that target alone', async () => {
    const server = await reference({ clonedVoices: [77] });
    const fan = fanout(
      server.realtimeUrl,
      {
        to: [
          { lang: 'es-es', voiceId: 77 },
          { lang: 'fr-fr', voiceId: 78 },
        ],
      },
      server.apiKey,
    );
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    expect(fan.target('fr-fr')!.outcome).toBe('failed');
    expect(fan.target('fr-fr')!.error).toBeInstanceOf(RtTranslateError);
    expect(fan.target('es-es')!.outcome).toBe('complete');
    expect(result.outputs.get('es-es')!.equals(sentTo(server, 'es-es'))).toBe(true);
  });

  it('a dropped target reconnects alone and outputs what its two sessions sent', async () => {
    const server = await reference({ dropAfterInputMs: 4000, drops: 1 });
    const fan = fanout(server.realtimeUrl, { to: ['es-es', 'fr-fr'] }, server.apiKey);
    const result = await run(fan, chunked(fixture.pcm, [4800]));
    // The first session to hear 4 s is cut: one of the two languages reconnects, the other does not.
    const reconnects = fan.stats.targets.map((t) => t.reconnects).sort();
    expect(reconnects).toEqual([0, 1]);
    for (const lang of ['es-es', 'fr-fr']) {
      expect(result.outputs.get(lang)!.equals(sentTo(server, lang)), lang).toBe(true);
      expect(fan.target(lang)!.outcome, lang).toBe('complete');
    }
  });
});
