/**
 * Deterministic stand-ins for the service's audio results: speech-like tones whose length follows
 * the text, and foreground/background track pairs for audio separation. The same text and seed
 * always give the same samples (and so the same FLAC bytes and STREAMINFO MD5).
 *
 * The "speech" is a sequence of syllables (120 to 240 ms), each a few harmonics of a gliding
 * fundamental (100 to 220 Hz) under a smooth envelope, with a short noise burst at its onset and
 * pauses between words. It is meant to look and compress like speech, not to be intelligible.
 */
import { encodeFlac } from '../audio/flac-encoder.js';
import { ValidationError } from '../errors.js';
import { intOption, numberOption } from '../options.js';

export interface SynthOptions {
  /** Samples per second, 8000 to 192000. */
  sampleRate: number;
  /** Mixed into the seed taken from the text, to get another rendition of the same text. Default 0. */
  seed?: number;
  /** Length in milliseconds; default `speechDurationMs(text)`. */
  durationMs?: number;
}

export interface TrackOptions extends SynthOptions {
  /** Channels of both tracks (the speech is the same on both). Default 1. */
  channels?: 1 | 2;
}

/** Two FLAC files of equal length, as an audio separation result has. */
export interface SeparatedTracks {
  /** Speech-like foreground (vocals, main elements). */
  foreground: Buffer;
  /** Noise-like background (ambience, accompaniment). */
  background: Buffer;
  durationMs: number;
}

/** Milliseconds of synthesized speech for `text`: 60 ms per character, at least 500 ms. */
export function speechDurationMs(text: string): number {
  return Math.max(500, 60 * [...text].length);
}

/** FNV-1a over the UTF-16 units of `text`, mixed with `seed`. */
function hashText(text: string, seed: number): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: a small deterministic PRNG returning [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function checkOptions(options: SynthOptions): { sampleRate: number; seed: number } {
  const sampleRate = intOption(options.sampleRate, 'sampleRate', { min: 8000, max: 192_000, accepted: 'an integer from 8000 to 192000 Hz' });
  if (options.durationMs !== undefined) {
    numberOption(options.durationMs, 'durationMs', { above: 0, max: 3_600_000, accepted: 'a number of milliseconds above 0 and at most one hour' });
  }
  return { sampleRate, seed: options.seed ?? 0 };
}

function toPcm16(signal: Float64Array, channels: number): Buffer {
  const out = Buffer.alloc(signal.length * 2 * channels);
  for (let i = 0; i < signal.length; i++) {
    const v = Math.max(-32768, Math.min(32767, Math.round(signal[i]! * 32767)));
    for (let c = 0; c < channels; c++) out.writeInt16LE(v, (i * channels + c) * 2);
  }
  return out;
}

function speechSignal(text: string, sampleRate: number, seed: number, durationMs: number): Float64Array {
  const random = prng(hashText(text, seed));
  const length = Math.round((durationMs * sampleRate) / 1000);
  const signal = new Float64Array(length);
  const harmonics = 6;
  let phase = 0;
  let pos = Math.round(0.03 * sampleRate);
  while (pos < length) {
    const syllable = Math.round((0.12 + 0.12 * random()) * sampleRate);
    const f0Start = 100 + 120 * random();
    const f0End = f0Start * (0.85 + 0.3 * random());
    const loudness = 0.25 + 0.2 * random();
    const weights = Array.from({ length: harmonics }, (_, h) => (0.3 + 0.7 * random()) / (h + 1));
    const burst = Math.round(0.012 * sampleRate);
    const end = Math.min(length, pos + syllable);
    for (let i = pos; i < end; i++) {
      const t = (i - pos) / syllable;
      const f0 = f0Start + (f0End - f0Start) * t;
      phase += (2 * Math.PI * f0) / sampleRate;
      let v = 0;
      for (let h = 0; h < harmonics; h++) v += weights[h]! * Math.sin(phase * (h + 1));
      const envelope = Math.sin(Math.PI * t) ** 0.7;
      let sample = loudness * envelope * v * 0.5;
      if (i - pos < burst) sample += 0.04 * (random() * 2 - 1);
      signal[i] = sample;
    }
    const wordBreak = random() < 0.25;
    pos = end + Math.round((wordBreak ? 0.08 + 0.06 * random() : 0.01 + 0.03 * random()) * sampleRate);
  }
  // 10 ms fade-out so the audio ends in silence whatever the syllable grid.
  const fade = Math.min(length, Math.round(0.01 * sampleRate));
  for (let i = 0; i < fade; i++) signal[length - 1 - i]! *= i / fade;
  return signal;
}

/**
 * Speech-like PCM16 LE mono for `text`, `speechDurationMs(text)` long unless `durationMs` says
 * otherwise. Deterministic in (text, seed, sampleRate, durationMs).
 */
export function synthesizeSpeechPcm(text: string, options: SynthOptions): Buffer {
  const { sampleRate, seed } = checkOptions(options);
  return toPcm16(speechSignal(text, sampleRate, seed, options.durationMs ?? speechDurationMs(text)), 1);
}

/** `synthesizeSpeechPcm` encoded as FLAC (mono, 16 bits, STREAMINFO MD5 filled in). */
export function synthesizeFlac(text: string, options: SynthOptions): Buffer {
  return encodeFlac(synthesizeSpeechPcm(text, options), { sampleRate: options.sampleRate, channels: 1 });
}

/**
 * A foreground (speech-like) and a background (filtered noise with a low hum) FLAC track of
 * equal length, for an audio separation result. `label` seeds both (for example the uploaded
 * file's name) and sets the length unless `durationMs` is given.
 */
export function separateTracks(label: string, options: TrackOptions): SeparatedTracks {
  const { sampleRate, seed } = checkOptions(options);
  const channels = options.channels ?? 1;
  if (channels !== 1 && channels !== 2) throw new ValidationError('channels', '1 or 2', String(channels));
  const durationMs = options.durationMs ?? speechDurationMs(label);
  const speech = speechSignal(label, sampleRate, seed, durationMs);
  const foreground = toPcm16(speech, channels);

  const random = prng(hashText(label, seed ^ 0x5bd1e995));
  const length = speech.length;
  const background = Buffer.alloc(length * 2 * channels);
  const humHz = 50 + 20 * random();
  const state = [0, 0];
  const smoothing = Math.exp((-2 * Math.PI * 400) / sampleRate);
  for (let i = 0; i < length; i++) {
    const hum = 0.03 * Math.sin((2 * Math.PI * humHz * i) / sampleRate);
    for (let c = 0; c < channels; c++) {
      state[c] = smoothing * state[c]! + (1 - smoothing) * (random() * 2 - 1);
      const v = hum + 0.4 * state[c]!;
      background.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(v * 32767))), (i * channels + c) * 2);
    }
  }
  return {
    foreground: encodeFlac(foreground, { sampleRate, channels }),
    background: encodeFlac(background, { sampleRate, channels }),
    durationMs,
  };
}

/**
 * A sound for a text-to-sound prompt, PCM16 LE mono: `music` is a slow progression of soft
 * chords, `sound` filtered noise in swelling bursts. Deterministic in (prompt, type, rate, length).
 */
export function synthesizeSoundPcm(prompt: string, type: 'sound' | 'music', options: SynthOptions & { durationMs: number }): Buffer {
  const { sampleRate, seed } = checkOptions(options);
  const random = prng(hashText(`${type}:${prompt}`, seed));
  const length = Math.round((options.durationMs * sampleRate) / 1000);
  const signal = new Float64Array(length);
  if (type === 'music') {
    const chordSamples = Math.round(1.5 * sampleRate);
    const roots = [220, 246.94, 196, 174.61].map((f) => f * (0.9 + 0.2 * random()));
    for (let i = 0; i < length; i++) {
      const chord = Math.floor(i / chordSamples);
      const root = roots[chord % roots.length]!;
      const t = i / sampleRate;
      const within = (i % chordSamples) / chordSamples;
      const envelope = Math.sin(Math.PI * within) ** 0.5;
      signal[i] =
        (0.2 * envelope * (Math.sin(2 * Math.PI * root * t) + 0.6 * Math.sin(2 * Math.PI * root * 1.26 * t) + 0.5 * Math.sin(2 * Math.PI * root * 1.5 * t))) /
        2.1;
    }
  } else {
    const smoothing = Math.exp((-2 * Math.PI * (300 + 1500 * random())) / sampleRate);
    const swell = 0.5 + random();
    let state = 0;
    for (let i = 0; i < length; i++) {
      state = smoothing * state + (1 - smoothing) * (random() * 2 - 1);
      const t = i / sampleRate;
      signal[i] = 0.6 * state * (0.55 + 0.45 * Math.sin(2 * Math.PI * swell * t));
    }
  }
  const fade = Math.min(length, Math.round(0.02 * sampleRate));
  for (let i = 0; i < fade; i++) {
    signal[i]! *= i / fade;
    signal[length - 1 - i]! *= i / fade;
  }
  return toPcm16(signal, 1);
}
