/**
 * `rt-translate serve` and its page in a real Chromium (playwright-core, Debian's
 * /usr/bin/chromium), the microphone being the speech fixture played by Chromium's fake capture
 * device. The relay's upstream is an emulator that accepts only the distinctive key given to
 * `serve` in the environment, and echoes it back (in `session.created`, as a careless service
 * might); it answers each utterance with its own audio. The test reads the three sentences'
 * transcripts and translations off the page, checks the translated audio was played to its end
 * by the playback worklet's position, and searches everything the browser saw (requests,
 * responses, WebSocket frames, console, the page itself) for the key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { startEmulator, type RunningEmulator } from '../../lib/emulator/server.js';
import { launchChromium } from './chromium.js';
import { killAllChildren, startSpawnedListener, type SpawnedListener } from '../helpers/cli.js';

/** The emulator's measurement of the fixture's sentences: what its answers say and last. */
const UTTERANCES = (
  JSON.parse(readFileSync(fileURLToPath(new URL('../fixtures/speech-en-24k.json', import.meta.url)), 'utf8')) as {
    utterances: Array<{ emulator: { startSample: number; endSample: number } }>;
  }
).utterances.map((u) => (u.emulator.endSample - u.emulator.startSample) / 24_000);
/** How far an utterance's length as heard may be from the fixture's: five 20 ms frames (see below). */
const CAPTURE_SLACK_S = 0.1;
/** A key nothing else contains, so finding it anywhere means it leaked. */
const SERVICE_KEY = 'rtt-browser-test-key-7f3c9a1e5d';

interface PageResponse {
  transcript: string;
  translation: string;
  timing: { firstAudioMs?: number; doneMs?: number; audioBytes: number } | undefined;
}

interface Seen {
  /** Every request (URL, headers, body), response body, WebSocket URL and frame, console message and page error. */
  traffic: string[];
  frames: { sent: string[]; received: string[] };
  /** The URLs of the page's WebSockets. */
  sockets: string[];
}

/** Records everything the page sends and receives, and what it logs. */
function record(page: Page): Seen {
  const seen: Seen = { traffic: [], frames: { sent: [], received: [] }, sockets: [] };
  page.on('request', (request) => {
    seen.traffic.push(request.url(), JSON.stringify(request.headers()), request.postData() ?? '');
  });
  page.on('response', (response) => {
    seen.traffic.push(JSON.stringify(response.headers()));
    response.text().then(
      (text) => seen.traffic.push(text),
      () => undefined, // a response without a body (204)
    );
  });
  page.on('websocket', (socket) => {
    seen.traffic.push(socket.url());
    seen.sockets.push(socket.url());
    socket.on('framesent', (frame) => seen.frames.sent.push(String(frame.payload)));
    socket.on('framereceived', (frame) => seen.frames.received.push(String(frame.payload)));
  });
  page.on('console', (message) => seen.traffic.push(message.text()));
  page.on('pageerror', (error) => seen.traffic.push(`pageerror: ${error.message}`));
  return seen;
}

describe('rt-translate serve in Chromium', () => {
  let service: RunningEmulator;
  let serve: SpawnedListener;
  let browser: Browser;
  let page: Page;
  let seen: Seen;
  let printed: { url: string; realtimeUrl: string; token: string };
  let responses: PageResponse[];
  let playback: { playedFrames: number; queuedFrames: number; playing: boolean };
  let receivedMs: number;

  beforeAll(async () => {
    // The relay holds SERVICE_KEY: the service takes no other key, and hands it back.
    service = await startEmulator({ apiKeys: [SERVICE_KEY], faults: { echoKey: true } });
    serve = await startSpawnedListener(['serve', '--realtime-url', service.realtimeUrl], '{"url"', { RT_TRANSLATE_API_KEY: SERVICE_KEY });
    printed = JSON.parse(serve.line) as typeof printed;
    browser = await launchChromium();
    page = await browser.newPage();
    seen = record(page);
    await page.goto(printed.url);
    await page.selectOption('#to', 'es-es');
    await page.click('#start');
    // Done: three responses answered and timed, and the translated audio played out.
    await page.waitForFunction(
      () => {
        const state = (
          globalThis as unknown as {
            rtTranslatePage: { responses: PageResponse[]; stats(): { playback: { playing: boolean; queuedFrames: number; playedFrames: number } } | undefined };
          }
        ).rtTranslatePage;
        const playback = state.stats()?.playback;
        return (
          state.responses.length >= 3 &&
          state.responses.every((r) => r.timing !== undefined) &&
          playback !== undefined &&
          !playback.playing &&
          playback.queuedFrames === 0
        );
      },
      undefined,
      { timeout: 60_000, polling: 100 },
    );
    const state = await page.evaluate(() => {
      const s = (
        globalThis as unknown as {
          rtTranslatePage: { responses: PageResponse[]; errors: string[]; stats(): { playback: typeof playback; receivedAudioMs: number } };
        }
      ).rtTranslatePage;
      const stats = s.stats();
      return { responses: s.responses, errors: s.errors, playback: stats.playback, receivedMs: stats.receivedAudioMs };
    });
    expect(state.errors).toEqual([]);
    responses = state.responses;
    playback = state.playback;
    receivedMs = state.receivedMs;
    await page.click('#stop');
    await page.waitForFunction(() => (globalThis as unknown as { rtTranslatePage: { state: string } }).rtTranslatePage.state === 'stopped', undefined, {
      timeout: 10_000,
    });
  });

  afterAll(async () => {
    await browser?.close();
    const result = await serve?.stop('SIGTERM');
    if (result) expect(result.code).toBe(0);
    await killAllChildren();
    await service?.close();
  });

  it('prints where the page and the relay are, with the token; the page connects to the relay with the token out of the URL', () => {
    expect(printed.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=/);
    expect(new URL(printed.url).searchParams.get('token')).toBe(printed.token);
    expect(printed.realtimeUrl).toBe(`${new URL(printed.url).origin.replace('http', 'ws')}/v1/realtime`);
    expect(seen.sockets).toEqual([printed.realtimeUrl]);
  });

  it("shows the transcript and the translation of each of the fixture's three sentences", () => {
    expect(responses).toHaveLength(3);
    responses.forEach((response, i) => {
      const transcript = /^\[en-us utterance (\d+), ([\d.]+) s\]$/.exec(response.transcript);
      const translation = /^\[es-es translation of utterance (\d+), ([\d.]+) s\]$/.exec(response.translation);
      expect(transcript?.[1]).toBe(String(i + 1));
      expect(translation?.[1]).toBe(String(i + 1));
      // The sentence's length as the service heard it, through the worklet's resampling: within
      // five 20 ms frames (Chromium's capture of the fake microphone, on a loaded machine, has
      // put up to three more frames of silence at an utterance's end).
      expect(Math.abs(Number(transcript![2]) - UTTERANCES[i]!)).toBeLessThanOrEqual(CAPTURE_SLACK_S);
      expect(translation![2]).toBe(transcript![2]);
    });
  });

  it('times each response from the end of its speech', () => {
    for (const { timing } of responses) {
      expect(timing!.firstAudioMs).toBeGreaterThan(0);
      expect(timing!.doneMs).toBeGreaterThanOrEqual(timing!.firstAudioMs!);
    }
  });

  it('plays the translated audio to its end: the played position advances by the answers’ length', () => {
    const answered = UTTERANCES.reduce((a, b) => a + b, 0);
    expect(Math.abs(receivedMs / 1000 - answered)).toBeLessThanOrEqual(UTTERANCES.length * CAPTURE_SLACK_S);
    expect(playback.playedFrames).toBe(Math.round(receivedMs * 24));
    expect(responses.reduce((sum, r) => sum + r.timing!.audioBytes, 0)).toBe(playback.playedFrames * 2);
  });

  it('never lets the service key reach the browser', async () => {
    const html = await page.content();
    // The recording is complete enough to find the key if it were there: it holds the page,
    // its modules, the token and the session's frames.
    expect(seen.traffic.join('\n')).toContain(printed.token);
    expect(seen.traffic.some((text) => text.includes('<button id="start">'))).toBe(true);
    expect(seen.traffic.some((text) => text.includes('class RealtimeTranslator'))).toBe(true);
    expect(seen.frames.sent.some((text) => text.includes('"session.update"'))).toBe(true);
    expect(seen.frames.sent.some((text) => text.includes('input_audio_buffer.append'))).toBe(true);
    expect(seen.frames.received.some((text) => text.includes('response.audio.delta'))).toBe(true);
    // The service did echo the key the relay holds, and the relay took it out.
    expect(seen.frames.received.filter((text) => text.includes('"session.created"'))).toEqual([expect.stringContaining('"api_key":"[redacted]"')]);
    // Chromium reports no request of the audio worklet (neither through playwright's events nor
    // the devtools protocol): its module is read as the browser gets it, from the server.
    const worklet = await (await fetch(new URL('/js/lib/browser/worklet.js', printed.url))).text();
    expect(worklet).toContain('registerProcessor');
    for (const text of [...seen.traffic, ...seen.frames.sent, ...seen.frames.received, html, worklet]) expect(text).not.toContain(SERVICE_KEY);
  });
});
