/**
 * A room in Chromium, through `rt-translate serve`'s speaker and listener pages: two listener
 * pages tick their languages (one Spanish, one Spanish and French, hearing French) and wait; the
 * speaker page starts, its microphone the speech fixture (Chromium's fake capture device). The
 * emulator upstream must see exactly two sessions (one per language, whatever the listeners),
 * each listener page must show the translation of the fixture's three sentences in each of its
 * languages and receive their audio, and the speaker page must show who listens to what.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startEmulator, type RunningEmulator } from '../../lib/emulator/server.js';
import { launchChromium } from './chromium.js';
import { killAllChildren, startSpawnedListener, type SpawnedListener } from '../helpers/cli.js';

const SERVICE_KEY = 'rtt-room-page-test-key-2b8e51d0c7';

interface RoomState {
  state: string;
  errors: string[];
  languages: Array<{ lang: string; listeners: number; status: string }>;
  texts: Record<string, string[]>;
  received: Record<string, number | undefined>;
  playing: string | undefined;
}

async function roomState(page: Page): Promise<RoomState> {
  return page.evaluate(() => {
    const room = (
      globalThis as unknown as {
        rtTranslatePage: { room: Omit<RoomState, 'received' | 'playing'> & { receivedAudioMs(): RoomState['received']; playing(): string | undefined } };
      }
    ).rtTranslatePage.room;
    return { state: room.state, errors: room.errors, languages: room.languages, texts: room.texts, received: room.receivedAudioMs(), playing: room.playing() };
  });
}

describe('rt-translate serve: a room in Chromium', () => {
  let service: RunningEmulator;
  let serve: SpawnedListener;
  let browser: Browser;
  let spanish: Page;
  let both: Page;
  let speaker: Page;
  let sessionsWhileTalking: number;
  let speakerState: RoomState;

  beforeAll(async () => {
    service = await startEmulator({ apiKeys: [SERVICE_KEY] });
    serve = await startSpawnedListener(['serve', '--realtime-url', service.realtimeUrl], '{"url"', { RT_TRANSLATE_API_KEY: SERVICE_KEY });
    const printed = JSON.parse(serve.line) as { speakerUrl: string; listenerUrl: string };
    browser = await launchChromium();
    spanish = await browser.newPage();
    await spanish.goto(`${printed.listenerUrl}&languages=es-es`);
    both = await browser.newPage();
    await both.goto(`${printed.listenerUrl}&languages=es-es,fr-fr`);
    await both.selectOption('#listen-play', 'fr-fr');
    for (const page of [spanish, both]) {
      await page.click('#listen-start');
      await page.waitForFunction(
        () => (globalThis as unknown as { rtTranslatePage: { room: { state: string } } }).rtTranslatePage.room.state === 'running',
        undefined,
        { timeout: 20_000 },
      );
    }
    speaker = await browser.newPage();
    await speaker.goto(printed.speakerUrl);
    await speaker.click('#speak-start');
    // Done: every language of every listener has the three sentences.
    for (const [page, languages] of [
      [spanish, ['es-es']],
      [both, ['es-es', 'fr-fr']],
    ] as const) {
      await page.waitForFunction(
        (langs) => {
          const room = (globalThis as unknown as { rtTranslatePage: { room: { texts: Record<string, string[]> } } }).rtTranslatePage.room;
          return langs.every((lang) => (room.texts[lang]?.length ?? 0) >= 3);
        },
        languages,
        { timeout: 90_000, polling: 100 },
      );
    }
    sessionsWhileTalking = service.realtimeSessions().length;
    speakerState = await roomState(speaker);
  });

  afterAll(async () => {
    await browser?.close();
    const result = await serve?.stop('SIGTERM');
    if (result) expect(result.code).toBe(0);
    await killAllChildren();
    await service?.close();
  });

  it('one session per language, however many listen', () => {
    expect(sessionsWhileTalking).toBe(2);
    expect(speakerState.errors).toEqual([]);
    expect(speakerState.languages.map((l) => [l.lang, l.listeners]).sort()).toEqual([
      ['es-es', 2],
      ['fr-fr', 1],
    ]);
  });

  it("each listener page shows each of its languages' translation of the three sentences, and receives its audio", async () => {
    for (const [page, languages] of [
      [spanish, ['es-es']],
      [both, ['es-es', 'fr-fr']],
    ] as const) {
      const state = await roomState(page);
      expect(state.errors).toEqual([]);
      for (const lang of languages) {
        expect(state.texts[lang]!.slice(0, 3).map((text) => /^\[(\S+) translation of utterance (\d+),/.exec(text)?.slice(1))).toEqual([
          [lang, '1'],
          [lang, '2'],
          [lang, '3'],
        ]);
        expect(state.received[lang]).toBeGreaterThan(1000);
      }
    }
    // The second page plays French.
    const [a, b] = [await roomState(spanish), await roomState(both)];
    expect(a.playing).toBe('es-es');
    expect(b.playing).toBe('fr-fr');
  });
});
