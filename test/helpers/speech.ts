/**
 * The speech fixture and what the emulator must answer to it: each utterance's voiced region
 * with up to 300 ms of the surrounding input, byte for byte.
 */
import { readFileSync } from 'node:fs';

const here = new URL('../fixtures/', import.meta.url);

export interface FixtureUtterance {
  startSample: number;
  endSample: number;
  text: string;
}

export interface SpeechFixture {
  /** PCM16 LE mono 24 kHz, header stripped. */
  pcm: Buffer;
  /** The whole WAV file. */
  wav: Buffer;
  utterances: FixtureUtterance[];
}

export function loadSpeechFixture(): SpeechFixture {
  const wav = readFileSync(new URL('speech-en-24k.wav', here));
  const meta = JSON.parse(readFileSync(new URL('speech-en-24k.json', here), 'utf8')) as { utterances: FixtureUtterance[] };
  return { wav, pcm: wav.subarray(44), utterances: meta.utterances };
}

/** The audio the emulator returns for `pcm` whose utterances are `utterances` (its default padding: none). */
export function expectedTranslation(pcm: Buffer, utterances: FixtureUtterance[], paddingMs = 0): Buffer {
  const pad = (paddingMs * 24_000) / 1000;
  const total = pcm.length / 2;
  const pieces: Buffer[] = [];
  let previousEnd = 0;
  for (const u of utterances) {
    const start = Math.max(previousEnd, u.startSample - pad);
    const end = Math.min(total, u.endSample + pad);
    pieces.push(pcm.subarray(start * 2, end * 2));
    previousEnd = end;
  }
  return Buffer.concat(pieces);
}

/** Splits `data` into pieces of the given sizes, cycling through them. */
export function chunked(data: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  let offset = 0;
  let i = 0;
  while (offset < data.length) {
    const size = sizes[i++ % sizes.length]!;
    out.push(data.subarray(offset, offset + size));
    offset += size;
  }
  return out;
}

/** One second of loud speech-like signal (a square wave), then one of silence: PCM16 mono 24 kHz. */
export function speechThenSilence(): Buffer {
  const pcm = Buffer.alloc(48_000 * 2);
  for (let i = 0; i < 24_000; i++) pcm.writeInt16LE(i % 40 < 20 ? 12_000 : -12_000, i * 2);
  return pcm;
}
