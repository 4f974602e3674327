/**
 * `RealtimeTranslator` in Chromium against a scripted service: `rt-translate serve` runs the
 * relay with the test's fake service as its upstream (test/helpers/fake-realtime-server.ts), so
 * the test decides when the session starts and what is answered, and reads the audio the page
 * sent as the service receives it. The page loads the browser module from `serve`. The
 * microphone is Chromium's fake capture device playing a steady 1 kHz tone, looped, with the
 * browser's own processing turned off, so a change of level in what reaches the service is the
 * module's doing.
 *
 * - Echo: while a translation plays (and `echoTailMs` after), `whilePlaying: 'duck'` lowers what
 *   is sent to `duckGain`, `'mute'` sends silence (still sent: the service's clock runs on),
 *   `'continue'` sends it as captured. Levels are measured in 20 ms windows of everything the
 *   service received.
 * - `start()` is bounded: `stop()` while it waits ends it at once (a microphone that opens
 *   afterwards is closed as it opens), and an AudioContext that never starts (as outside a user
 *   gesture) fails it after `readyTimeoutMs`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startFakeRealtimeServer, type FakePeer, type FakeRealtimeServer } from '../helpers/fake-realtime-server.js';
import { killAllChildren, startSpawnedListener, type SpawnedListener } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait-for.js';
import { launchChromium } from './chromium.js';

const SERVICE_KEY = 'rtt-translator-test-key-41d7c0b9e2';
/** The tone the microphone plays: 1 kHz at -12 dBFS, 48 kHz, one second (a whole number of cycles, so it loops without a seam). */
const TONE_RATE = 48_000;
const TONE_AMPLITUDE = 0.25;
/** 24 kHz frames per level window (20 ms). */
const WINDOW = 480;

function toneWav(): Buffer {
  const frames = TONE_RATE;
  const wav = Buffer.alloc(44 + frames * 2);
  wav.write('RIFF', 0);
  wav.writeUInt32LE(36 + frames * 2, 4);
  wav.write('WAVEfmt ', 8);
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(TONE_RATE, 24);
  wav.writeUInt32LE(TONE_RATE * 2, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write('data', 36);
  wav.writeUInt32LE(frames * 2, 40);
  for (let i = 0; i < frames; i++) wav.writeInt16LE(Math.round(32767 * TONE_AMPLITUDE * Math.sin((2 * Math.PI * 1000 * i) / TONE_RATE)), 44 + 2 * i);
  return wav;
}

/** `seconds` of a 600 Hz tone at 24 kHz: the translation the service answers with. */
function translation(seconds: number): Buffer {
  const pcm = Buffer.alloc(Math.round(seconds * 24_000) * 2);
  for (let i = 0; i < pcm.length / 2; i++) pcm.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 600 * i) / 24_000)), 2 * i);
  return pcm;
}

/** The input audio the service received in one session, from its appends, in order. */
class ReceivedAudio {
  readonly #pieces: Buffer[] = [];
  bytes = 0;

  constructor(readonly peer: FakePeer) {
    peer.ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const event = JSON.parse(String(data)) as { type: string; audio?: string };
      if (event.type !== 'input_audio_buffer.append' || event.audio === undefined) return;
      const pcm = Buffer.from(event.audio, 'base64');
      this.#pieces.push(pcm);
      this.bytes += pcm.length;
    });
  }

  /** Resolves once `bytes` have come. */
  async waitForBytes(bytes: number): Promise<void> {
    await waitFor(() => this.bytes >= bytes || this.peer.isClosed, { onEvent: [this.peer.ws, 'message', 'close'] });
    expect(this.bytes).toBeGreaterThanOrEqual(bytes);
  }

  /** RMS of each 20 ms window (full scale 1), and the largest magnitude in it. */
  windows(): Array<{ rms: number; peak: number }> {
    const pcm = Buffer.concat(this.#pieces);
    const out: Array<{ rms: number; peak: number }> = [];
    for (let at = 0; at + WINDOW * 2 <= pcm.length; at += WINDOW * 2) {
      let sum = 0;
      let peak = 0;
      for (let i = 0; i < WINDOW; i++) {
        const x = pcm.readInt16LE(at + 2 * i) / 32768;
        sum += x * x;
        peak = Math.max(peak, Math.abs(x));
      }
      out.push({ rms: Math.sqrt(sum / WINDOW), peak });
    }
    return out;
  }
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * The longest run of windows below 0.3 of `level` (from the 10th window: the filters settle
 * first). A lowered microphone is one long run; the fake capture device also drops a buffer now
 * and then (a window or two, half silent or less), which this leaves out.
 */
function quietRun(windows: Array<{ rms: number; peak: number }>, level: number): { start: number; windows: Array<{ rms: number; peak: number }> } {
  let best = { start: 0, length: 0 };
  let start = -1;
  for (let i = 10; i <= windows.length; i++) {
    const quiet = i < windows.length && windows[i]!.rms < 0.3 * level;
    if (quiet && start < 0) start = i;
    if (!quiet && start >= 0) {
      if (i - start > best.length) best = { start, length: i - start };
      start = -1;
    }
  }
  return { start: best.start, windows: windows.slice(best.start, best.start + best.length) };
}

/** What the page keeps (`globalThis.harness`), as the test reads it. */
type Harness = {
  streams: Array<{ getTracks(): Array<{ readyState: string }> }>;
  microphoneRequests: number;
  translator: {
    state: string;
    stats: { sentMs: number; playback: { playedFrames: number; playing: boolean } };
    stop(): Promise<void>;
  };
  started: Promise<unknown>;
  release(): void;
};
type PageGlobals = { harness: Harness };

describe('RealtimeTranslator in Chromium', () => {
  let dir: string;
  let service: FakeRealtimeServer;
  let serve: SpawnedListener;
  let browser: Browser;
  let page: Page;
  let token: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rtt-translator-'));
    const tone = join(dir, 'tone-1khz.wav');
    writeFileSync(tone, toneWav());
    service = await startFakeRealtimeServer();
    serve = await startSpawnedListener(['serve', '--realtime-url', service.realtimeUrl], '{"url"', { RT_TRANSLATE_API_KEY: SERVICE_KEY });
    const printed = JSON.parse(serve.line) as { url: string; token: string };
    token = printed.token;
    browser = await launchChromium({ capture: { file: tone, loop: true } });
    page = await browser.newPage();
    await page.goto(printed.url);
    // The page side: the module as the page loads it, and every microphone the page opens
    // (getUserMedia can be held back until `release()`, to stop a session while it opens).
    await page.evaluate(`(async () => {
      const module = await import('/js/lib/browser/index.js');
      const harness = { module, streams: [], microphoneRequests: 0, hold: false, waiting: [] };
      harness.release = () => { harness.hold = false; for (const go of harness.waiting.splice(0)) go(); };
      const getUserMedia = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
      navigator.mediaDevices.getUserMedia = async (constraints) => {
        harness.microphoneRequests += 1;
        if (harness.hold) await new Promise((go) => harness.waiting.push(go));
        const stream = await getUserMedia(constraints);
        harness.streams.push(stream);
        return stream;
      };
      globalThis.harness = harness;
    })()`);
  });

  afterAll(async () => {
    await browser?.close();
    const result = await serve?.stop('SIGTERM');
    if (result) expect(result.code).toBe(0);
    await killAllChildren();
    await service?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A translator in the page with `options` (the browser's own audio processing off), started
   * (`harness.started` settles with `{ ok }` or the error's name, code and message); `before`
   * runs first in the page, for the context or the microphone's hold.
   */
  async function startTranslator(options: Record<string, unknown>, before = ''): Promise<void> {
    await page.evaluate(`(async () => {
      const harness = globalThis.harness;
      const extra = {};
      ${before}
      harness.translator = new harness.module.RealtimeTranslator({
        url: '/v1/realtime', token: ${JSON.stringify(token)}, from: 'en-us', to: 'es-es',
        echoCancellation: false, noiseSuppression: false, autoGainControl: false,
        ...${JSON.stringify(options)}, ...extra,
      });
      harness.started = harness.translator.start().then(
        () => ({ ok: true }),
        (error) => ({ ok: false, name: error.name, code: error.code, message: error.message }),
      );
    })()`);
  }

  /** How `start()` settled, or 'pending' after `ms`. */
  function startOutcome(ms: number): Promise<unknown> {
    return page.evaluate(
      (limit) => Promise.race([(globalThis as unknown as PageGlobals).harness.started, new Promise((resolve) => setTimeout(() => resolve('pending'), limit))]),
      ms,
    );
  }

  describe('echo: the microphone while a translation plays', () => {
    /** Runs a session with `whilePlaying`: 1.5 s of the tone, then 1.2 s of translation played, then 1.5 s more. */
    async function session(
      whilePlaying: string,
    ): Promise<{ windows: Array<{ rms: number; peak: number }>; playbackWindow: number; level: number; playedFrames: number }> {
      await startTranslator({ whilePlaying, duckGain: 0.1, echoTailMs: 300 });
      const peer = await service.nextPeer();
      const received = new ReceivedAudio(peer);
      await peer.waitForEvent('session.update');
      peer.sendSessionCreated();
      expect(await startOutcome(10_000)).toEqual({ ok: true });
      await received.waitForBytes(1.5 * 48_000);
      const before = received.bytes;
      peer.sendAudio(translation(1.2));
      peer.send({ type: 'response.audio.done' });
      await page.waitForFunction(
        () => {
          const { playback } = (globalThis as unknown as PageGlobals).harness.translator.stats;
          return playback.playedFrames >= 28_800 && !playback.playing;
        },
        undefined,
        { timeout: 20_000, polling: 20 },
      );
      await received.waitForBytes(received.bytes + 1.5 * 48_000);
      const playedFrames = await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.translator.stats.playback.playedFrames);
      await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.translator.stop());
      expect((await peer.closed).code).toBe(1000);
      const windows = received.windows();
      const playbackWindow = Math.floor(before / (WINDOW * 2));
      // The tone's level as sent before the translation: after the filters settle (200 ms).
      const level = median(windows.slice(10, playbackWindow).map((w) => w.rms));
      return { windows, playbackWindow, level, playedFrames };
    }

    it("'duck': lowered to duckGain (-20 dB) while the translation plays and for echoTailMs after, as captured before and after", async () => {
      const { windows, playbackWindow, level, playedFrames } = await session('duck');
      expect(playedFrames).toBe(28_800);
      expect(level).toBeCloseTo(TONE_AMPLITUDE / Math.SQRT2, 1);
      const ducked = quietRun(windows, level);
      // One stretch of about the translation's length and the tail, from when it came.
      expect(ducked.start).toBeGreaterThanOrEqual(playbackWindow);
      expect(ducked.windows.length * 20).toBeGreaterThanOrEqual(1200 + 300 - 150);
      expect(ducked.windows.length * 20).toBeLessThanOrEqual(1200 + 300 + 300);
      expect(median(ducked.windows.map((w) => w.rms)) / level).toBeCloseTo(0.1, 1);
      // And back as captured once the tail is over.
      expect(median(windows.slice(ducked.start + ducked.windows.length + 5).map((w) => w.rms)) / level).toBeCloseTo(1, 1);
    });

    it("'mute': silence while the translation plays and for echoTailMs after, still sent", async () => {
      const { windows, playbackWindow, level, playedFrames } = await session('mute');
      expect(playedFrames).toBe(28_800);
      const muted = quietRun(windows, level);
      expect(muted.start).toBeGreaterThanOrEqual(playbackWindow);
      expect(muted.windows.length * 20).toBeGreaterThanOrEqual(1200 + 300 - 150);
      expect(muted.windows.length * 20).toBeLessThanOrEqual(1200 + 300 + 300);
      // Inside the stretch (its edges ramp), every sample is zero.
      expect(muted.windows.slice(2, -2).every((w) => w.peak === 0)).toBe(true);
      expect(median(windows.slice(muted.start + muted.windows.length + 5).map((w) => w.rms)) / level).toBeCloseTo(1, 1);
    });

    it("'continue' (the default): sent as captured while the translation plays", async () => {
      const { windows, playbackWindow, level, playedFrames } = await session('continue');
      expect(playedFrames).toBe(28_800);
      // Nothing lowered: no quiet stretch beyond the capture device's odd dropped buffer.
      expect(quietRun(windows, level).windows.length).toBeLessThanOrEqual(2);
      expect(median(windows.slice(playbackWindow).map((w) => w.rms)) / level).toBeCloseTo(1, 1);
    });
  });

  describe('start() is bounded', () => {
    it('stop() while start() waits for the microphone and the session: start() rejects at once; the microphone, opened after, is closed as it opens; the session is closed', async () => {
      const opened = await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.streams.length);
      // The page's own AudioContext, which stop() leaves open: nothing closes the microphone by the way.
      await startTranslator(
        {},
        'harness.hold = true; harness.context = new AudioContext(); await harness.context.resume(); extra.audioContext = harness.context;',
      );
      const peer = await service.nextPeer();
      await peer.waitForEvent('session.update');
      await page.waitForFunction((n) => (globalThis as unknown as PageGlobals).harness.microphoneRequests === n + 1, opened, { timeout: 10_000, polling: 20 });
      await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.translator.stop());
      expect(await startOutcome(5_000)).toEqual({
        ok: false,
        name: 'ConnectionError',
        code: 'RTT_CONNECTION',
        message: 'stop() was called before the session started.',
      });
      expect((await peer.closed).code).toBe(1000);
      await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.release());
      await page.waitForFunction(
        (n) => {
          const { streams } = (globalThis as unknown as PageGlobals).harness;
          return streams.length === n + 1 && streams.every((stream) => stream.getTracks().every((track) => track.readyState === 'ended'));
        },
        opened,
        { timeout: 10_000, polling: 20 },
      );
      expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.translator.state)).toBe('stopped');
    });

    it('an AudioContext that never starts (as outside a user gesture): start() fails after readyTimeoutMs, saying to call it in a gesture; the session is closed', async () => {
      // Headless Chromium starts audio without a gesture; a context whose resume() never settles
      // stands for one that waits for a gesture that never comes.
      const before = await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.microphoneRequests);
      await startTranslator(
        { readyTimeoutMs: 1500 },
        'harness.context = new AudioContext(); await harness.context.suspend(); harness.context.resume = () => new Promise(() => {}); extra.audioContext = harness.context;',
      );
      const peer = await service.nextPeer();
      await peer.waitForEvent('session.update');
      peer.sendSessionCreated();
      expect(await startOutcome(6_000)).toEqual({
        ok: false,
        name: 'TimeoutError',
        code: 'RTT_TIMEOUT',
        message: 'The AudioContext did not start within 1500 ms: browsers start audio only in a user gesture, so call start() from a click or key handler.',
      });
      expect((await peer.closed).code).toBe(1000);
      expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).harness.microphoneRequests)).toBe(before);
    });
  });
});
