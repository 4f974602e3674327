/**
 * Debian's Chromium (/usr/bin/chromium) through playwright-core, headless, its microphone a fake
 * capture device playing the speech fixture once (then silence), or another WAV file (looped, as
 * a steady tone wants), and microphone access granted.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const FIXTURE = fileURLToPath(new URL('../fixtures/speech-en-24k.wav', import.meta.url));

export interface ChromiumOptions {
  /** The WAV file the fake microphone plays; default the speech fixture, once. */
  capture?: { file: string; loop: boolean };
}

/** Launches the browser (bounded by playwright's launch timeout). */
export function launchChromium(options: ChromiumOptions = {}): Promise<Browser> {
  const capture = options.capture ?? { file: FIXTURE, loop: false };
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (the CI script does).`);
  return chromium.launch({
    executablePath: CHROMIUM,
    timeout: 60_000,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--no-first-run',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${capture.file}${capture.loop ? '' : '%noloop'}`,
    ],
  });
}
