/**
 * The speech fixture and what the emulator must answer to it: each utterance's voiced region
 * as the emulator's detector finds it (30 ms frames, -45 dBFS), with up to 300 ms of the
 * surrounding input, byte for byte. The client's detector finds the speech elsewhere (20 ms
 * frames, -40 dBFS): the fixture carries both measurements, made by `scripts/make-fixtures.ts`.
 */
import { readFileSync } from 'node:fs';
import { UtteranceSegmenter, type SegmentedUtterance, type UtteranceSegmenterOptions } from '../../lib/emulator/vad.js';

const here = new URL('../fixtures/', import.meta.url);

/** A voiced region, in samples (end exclusive). */
export interface FixtureRegion {
  startSample: number;
  endSample: number;
}

/** One sentence: its voiced region as the client's detector finds it, and as the emulator's does. */
export interface FixtureUtterance extends FixtureRegion {
  /** The emulator's measurement: the audio it answers this sentence with. */
  emulator: FixtureRegion;
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

/**
 * The audio the emulator returns for `pcm` whose utterances are `utterances`: each one's region
 * by the emulator's measurement, padded by `paddingMs` (its default: none).
 */
export function expectedTranslation(pcm: Buffer, utterances: FixtureUtterance[], paddingMs = 0): Buffer {
  const pad = (paddingMs * 24_000) / 1000;
  const total = pcm.length / 2;
  const pieces: Buffer[] = [];
  let previousEnd = 0;
  for (const { emulator: u } of utterances) {
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

/**
 * The utterances the emulator (its detector with `options`, defaults otherwise) answers to `pcm`
 * sent in one go, after which the audio stops arriving: the one still in progress is ended by
 * the idle rule, so it is answered too.
 */
export function emulatorUtterances(pcm: Buffer, options?: UtteranceSegmenterOptions): SegmentedUtterance[] {
  const segmenter = new UtteranceSegmenter(options);
  return [...segmenter.push(pcm), ...segmenter.end()];
}

/**
 * Leading silence, in samples, that puts the emulator's 30 ms grid (720 samples) where a session
 * started by a replay has it: the client starts replays on its own 20 ms frames (multiples of 480
 * samples), which fall 0, 480 or 240 samples into a 720-sample frame.
 */
const REPLAY_GRID_LEADS = [0, 240, 480];

/**
 * The answers the emulator may give to each utterance of `pcm`, one list per utterance, the
 * unbroken stream's answer first. A session measures 30 ms frames from its own first byte; after
 * a reconnect the client replays from a start on its own 20 ms frames, so the new session's grid
 * may fall 0, 10 or 20 ms off the first session's, and the regions it finds move by up to a
 * frame. Valid when every replay starts in the silence before an utterance (the fixture's pauses
 * are 1.2 s of digital silence).
 */
export function answerVariants(pcm: Buffer): Buffer[][] {
  const variants: Buffer[][] = [];
  for (const lead of REPLAY_GRID_LEADS) {
    const answers = emulatorUtterances(Buffer.concat([Buffer.alloc(lead * 2), pcm])).map((u) => u.audio);
    if (variants.length > 0 && answers.length !== variants.length) throw new Error(`grid phase ${lead}: ${answers.length} utterances, not ${variants.length}`);
    answers.forEach((audio, i) => {
      const list = (variants[i] ??= []);
      if (!list.some((known) => known.equals(audio))) list.push(audio);
    });
  }
  return variants;
}

/**
 * Reads `output` as one piece from each list of `expected`, in order, with nothing left over,
 * and returns which piece of each list it found; or a description of the first place it could
 * not (for the assertion's message).
 */
export function answersIn(output: Buffer, expected: Buffer[][]): number[] | string {
  let deepest = { list: -1, at: 0 };
  const walk = (list: number, at: number): number[] | undefined => {
    if (list > deepest.list) deepest = { list, at };
    if (list === expected.length) return at === output.length ? [] : undefined;
    for (const [i, piece] of expected[list]!.entries()) {
      if (!output.subarray(at, at + piece.length).equals(piece)) continue;
      const rest = walk(list + 1, at + piece.length);
      if (rest) return [i, ...rest];
    }
    return undefined;
  };
  return (
    walk(0, 0) ??
    `${output.length} bytes of output: after ${deepest.list} expected piece(s) (${deepest.at} bytes), ` +
      (deepest.list === expected.length
        ? `${output.length - deepest.at} bytes too many`
        : `none of the ${expected[deepest.list]!.length} variant(s) of piece ${deepest.list} follows`)
  );
}
