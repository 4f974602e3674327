/**
 * The browser module in Chromium, loaded from `rt-translate serve` as the page loads it.
 * `PcmPlayer` plays PCM16 24 kHz chunks through its worklet into a recording worklet the test
 * adds: the recording shows the chunks played without gaps at the context's rate, the reported
 * position counts every frame once played, and `interrupt()` drops the rest. Bad options of
 * `RealtimeTranslator` and the room classes are refused with a `ValidationError` naming the option.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { killAllChildren, startSpawnedListener, type SpawnedListener } from '../helpers/cli.js';
import { launchChromium } from './chromium.js';

/** Posts a copy of every render quantum it receives: the player's output, as the speakers get it. */
const RECORDER = `registerProcessor('test-recorder', class extends AudioWorkletProcessor {
  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (input) this.port.postMessage(input.slice());
    return true;
  }
});`;

/**
 * Page side (plain JavaScript, as the page runs it): the player from the module the page
 * loads, its output into the recorder; `globalThis.harness` holds them. Resolves with the
 * context's rate.
 */
const SETUP = `(async () => {
  const { PcmPlayer } = await import('/js/lib/browser/index.js');
  const context = new AudioContext();
  await context.resume();
  const recorder = ${JSON.stringify(RECORDER)};
  await context.audioWorklet.addModule(URL.createObjectURL(new Blob([recorder], { type: 'text/javascript' })));
  const node = new AudioWorkletNode(context, 'test-recorder', { numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1] });
  node.connect(context.destination);
  const state = { recorded: [], playingEvents: [] };
  node.port.onmessage = (event) => state.recorded.push(event.data);
  state.player = await PcmPlayer.create(context, { destination: node });
  state.player.on('playing', (playing) => state.playingEvents.push(playing));
  globalThis.harness = state;
  return context.sampleRate;
})()`;

/** What the page's harness holds, as the test reads it. */
type PageHarness = {
  player: {
    enqueue(pcm: Int16Array): void;
    interrupt(): void;
    position: { playedFrames: number; queuedFrames: number; droppedFrames: number; playing: boolean };
  };
  recorded: Float32Array[];
  playingEvents: boolean[];
};

/** The page's global that holds the harness (page-side functions cannot call test code). */
type Page_ = { harness: PageHarness };

describe('rt-translate/browser in Chromium', () => {
  let serve: SpawnedListener;
  let browser: Browser;
  let page: Page;
  let rate: number;

  beforeAll(async () => {
    serve = await startSpawnedListener(['serve'], '{"url"');
    const { url } = JSON.parse(serve.line) as { url: string };
    browser = await launchChromium();
    // The recorder is a blob: module, which the page's security policy would refuse.
    page = await (await browser.newContext({ bypassCSP: true })).newPage();
    await page.goto(url);
    rate = (await page.evaluate(SETUP)) as number;
  });

  afterAll(async () => {
    await browser?.close();
    await serve?.stop();
    await killAllChildren();
  });

  /** Queues `seconds` of a 440 Hz tone at half scale, as chunks of 40 ms (a chunk of the service's size). */
  async function enqueueTone(seconds: number): Promise<void> {
    await page.evaluate(
      (frames) => {
        const { player } = (globalThis as unknown as Page_).harness;
        for (let at = 0; at < frames; at += 960) {
          const chunk = new Int16Array(Math.min(960, frames - at));
          for (let i = 0; i < chunk.length; i++) chunk[i] = Math.round(16384 * Math.sin((2 * Math.PI * 440 * (at + i)) / 24000));
          player.enqueue(chunk);
        }
      },
      Math.round(seconds * 24000),
    );
  }

  /** The recorded output since `from` quanta, as one array, and its sounding span (first to last sample above 0.01). */
  async function recording(from = 0): Promise<{ samples: number[]; first: number; last: number }> {
    const samples = await page.evaluate(
      (skip) => (globalThis as unknown as Page_).harness.recorded.slice(skip).flatMap((quantum) => Array.from(quantum)),
      from,
    );
    const first = samples.findIndex((x) => Math.abs(x) > 0.01);
    let last = samples.length - 1;
    while (last >= 0 && Math.abs(samples[last]!) <= 0.01) last--;
    return { samples, first, last };
  }

  it('plays queued chunks gaplessly at the context rate, and counts them played', async () => {
    await enqueueTone(1);
    await page.waitForFunction(
      () => {
        const { position } = (globalThis as unknown as Page_).harness.player;
        return !position.playing && position.playedFrames === 24000;
      },
      undefined,
      { timeout: 30_000, polling: 50 },
    );
    const { samples, first, last } = await recording();
    expect(first).toBeGreaterThanOrEqual(0);
    // One second of sound at the context's rate (give or take the filter's edges).
    expect(Math.abs(last - first + 1 - rate)).toBeLessThan(rate / 100);
    // No gap: inside the sound, the tone never rests near zero for more than two samples, and
    // its level holds (a 440 Hz sine at -6 dBFS).
    let run = 0;
    let longest = 0;
    let peak = 0;
    for (let i = first + rate / 100; i < last - rate / 100; i++) {
      const x = Math.abs(samples[i]!);
      run = x < 0.01 ? run + 1 : 0;
      longest = Math.max(longest, run);
      peak = Math.max(peak, x);
    }
    expect(longest).toBeLessThanOrEqual(2);
    expect(peak).toBeCloseTo(0.5, 2);
    expect(await page.evaluate(() => (globalThis as unknown as Page_).harness.playingEvents)).toEqual([true, false]);
  });

  it('interrupt() drops what is queued: played and dropped frames add up to what was queued', async () => {
    const before = await page.evaluate(() => ({
      played: (globalThis as unknown as Page_).harness.player.position.playedFrames,
      quanta: (globalThis as unknown as Page_).harness.recorded.length,
    }));
    await enqueueTone(3);
    await page.waitForFunction((played) => (globalThis as unknown as Page_).harness.player.position.playedFrames >= played + 12000, before.played, {
      timeout: 30_000,
      polling: 20,
    });
    await page.evaluate(() => (globalThis as unknown as Page_).harness.player.interrupt());
    await page.waitForFunction(() => !(globalThis as unknown as Page_).harness.player.position.playing, undefined, { timeout: 10_000, polling: 20 });
    const position = await page.evaluate(() => (globalThis as unknown as Page_).harness.player.position);
    const played = position.playedFrames - before.played;
    expect(position.droppedFrames).toBeGreaterThan(0);
    expect(played).toBeGreaterThanOrEqual(12000);
    expect(played + position.droppedFrames).toBe(72000);
    expect(position.queuedFrames).toBe(0);
    // What sounded is what the position counts as played (within two render quanta).
    const { first, last } = await recording(before.quanta);
    expect(Math.abs(((last - first + 1) * 24000) / rate - played)).toBeLessThan((256 * 24000) / rate);
  });

  it.each([
    [{ from: 'xx-yy' }, 'from', 'one of'],
    [{ to: 42 }, 'to', 'one of'],
    [{ voiceId: -1 }, 'voiceId', 'a positive integer'],
    [{ whilePlaying: 'loud' }, 'whilePlaying', '"continue", "duck" or "mute"'],
    [{ duckGain: 2 }, 'duckGain', 'a number from 0 to 1'],
    [{ chunkMs: 30 }, 'chunkMs', 'a multiple of 20 from 20 to 1000'],
    [{ url: 'ftp://relay.example' }, 'url', 'a ws:// or wss:// URL or a path'],
    [{ token: 'two words' }, 'token', 'a token minted by the relay'],
    [{ outputModalities: ['video'] }, 'outputModalities', '"text" and/or "audio"'],
    [{ apiKey: 'a-key' }, 'apiKey', 'no API key in a web page'],
  ])('RealtimeTranslator options %j: a ValidationError naming %s', async (bad, field, accepted) => {
    const options = { url: '/v1/realtime', token: 'token', from: 'en-us', to: 'es-es', ...bad };
    const error = await page.evaluate(
      `import('/js/lib/browser/index.js').then(({ RealtimeTranslator }) => {
        try {
          new RealtimeTranslator(${JSON.stringify(options)});
          return undefined;
        } catch (error) {
          return { name: error.name, code: error.code, field: error.field, message: error.message };
        }
      })`,
    );
    expect(error).toMatchObject({ name: 'ValidationError', code: 'RTT_VALIDATION', field });
    expect((error as { message: string }).message).toContain(accepted);
  });

  it.each([
    ['RealtimeRoomListener', { languages: [] }, 'languages', 'an array of 1 to 8 realtime language tags'],
    ['RealtimeRoomListener', { languages: ['es-es', 'xx-yy'] }, 'languages[1]', 'one of'],
    ['RealtimeRoomListener', { languages: ['es-es', 'ES-ES'] }, 'languages', 'each language once'],
    ['RealtimeRoomListener', { play: 'fr-fr' }, 'play', 'one of languages, or false'],
    ['RealtimeRoomListener', { room: 'a room' }, 'room', 'a room id'],
    ['RealtimeRoomListener', { apiKey: 'a-key' }, 'apiKey', 'no API key in a web page'],
    ['RealtimeRoomSpeaker', { from: 'xx-yy' }, 'from', 'one of'],
    ['RealtimeRoomSpeaker', { languages: ['es-es', 7] }, 'languages[1]', 'one of'],
    ['RealtimeRoomSpeaker', { url: 'ftp://relay.example' }, 'url', 'a ws:// or wss:// URL or a path'],
    ['RealtimeRoomSpeaker', { token: 'two words' }, 'token', 'a room token minted by the relay'],
  ])('%s options %j: a ValidationError naming %s', async (name, bad, field, accepted) => {
    const options = { url: '/v1/rooms', token: 'token', from: 'en-us', languages: ['es-es'], ...bad };
    const error = await page.evaluate(
      `import('/js/lib/browser/index.js').then((module) => {
        try {
          new module[${JSON.stringify(name)}](${JSON.stringify(options)});
          return undefined;
        } catch (error) {
          return { name: error.name, code: error.code, field: error.field, message: error.message };
        }
      })`,
    );
    expect(error).toMatchObject({ name: 'ValidationError', code: 'RTT_VALIDATION', field });
    expect((error as { message: string }).message).toContain(accepted);
  });
});
