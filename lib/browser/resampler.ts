/**
 * Streaming sample rate conversion of mono audio for the browser module's worklets: microphone
 * audio at the device's rate to the service's 24 kHz, and the service's 24 kHz to the
 * device's rate for playback. The filter is the Node resampler's (`designPolyphase`: a
 * Kaiser-windowed sinc low-pass, flat within 0.001 dB to 0.8 x the lower Nyquist frequency,
 * at least 100 dB down from that Nyquist frequency on, the filter delay compensated), and so is
 * the arithmetic: samples are PCM16 values, taps integers times 2^-22, every output an exact
 * sum. PCM16 output is therefore byte for byte what `createResampleProcessor` gives for the
 * same input, and it does not depend on how the input was cut into blocks.
 *
 * Pull model, no allocation once running: `write*` appends input (floats are rounded to PCM16
 * first, as the sample format converter does), `read` computes up to `limit` outputs that the
 * input so far completes. History the next outputs need is kept; the rest is dropped.
 */
import { designPolyphase, toInt16, type ResamplerDesign } from '../audio/resampler-design.js';
import { ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';

/** The device rates the browser module converts from and to (Hz). */
export const BROWSER_RATES = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000, 176400, 192000] as const;

/** `rate` if it is one of `BROWSER_RATES`, else a `ValidationError` naming `field`. */
export function checkBrowserRate(rate: unknown, field: string): number {
  if ((BROWSER_RATES as readonly unknown[]).includes(rate)) return rate as number;
  throw new ValidationError(field, `a sample rate in Hz, one of ${BROWSER_RATES.join(', ')}`, describeReceived(rate));
}

/** Equal rates: one tap of 1, no delay (outputs are the inputs). */
const IDENTITY: ResamplerDesign = Object.freeze({
  inputRate: 0,
  outputRate: 0,
  up: 1,
  down: 1,
  tapsPerPhase: 1,
  prototypeLength: 1,
  delay: 0,
  beta: 0,
  cutoffHz: 0,
  table: new Float64Array([1]),
});

export class StreamResampler {
  readonly inputRate: number;
  readonly outputRate: number;
  readonly #design: ResamplerDesign;
  readonly #taps: number;
  /** Whole input frames to advance per output, and the phase step. */
  readonly #stepFrames: number;
  readonly #stepPhase: number;
  /** Input history as PCM16 values; index 0 is the oldest kept. */
  #buf: Float64Array;
  #len = 0;
  /** Index in `#buf` of the newest frame the next output needs, and that output's row. */
  #pos = 0;
  #phase = 0;
  #written = 0;
  #produced = 0;

  /** Rates in Hz, each one of `BROWSER_RATES` (a `ValidationError` otherwise); they may be equal. */
  constructor(inputRate: number, outputRate: number) {
    this.inputRate = checkBrowserRate(inputRate, 'inputRate');
    this.outputRate = checkBrowserRate(outputRate, 'outputRate');
    this.#design = inputRate === outputRate ? IDENTITY : designPolyphase(inputRate, outputRate);
    this.#taps = this.#design.tapsPerPhase;
    this.#stepFrames = Math.floor(this.#design.down / this.#design.up);
    this.#stepPhase = this.#design.down % this.#design.up;
    this.#buf = new Float64Array(this.#taps + 4096);
    this.reset();
  }

  /** Forgets all input, as if just made (the counters too). */
  reset(): void {
    // K - 1 frames of silence stand for the time before the stream starts.
    this.#len = this.#taps - 1;
    this.#buf.fill(0, 0, this.#len);
    this.#pos = this.#len + Math.floor(this.#design.delay / this.#design.up);
    this.#phase = this.#design.delay % this.#design.up;
    this.#written = 0;
    this.#produced = 0;
  }

  /** Input frames written since the last reset. */
  get inputFrames(): number {
    return this.#written;
  }

  /** Output frames read since the last reset: output `n` is the input at time `n / outputRate`. */
  get outputFrames(): number {
    return this.#produced;
  }

  /** Outputs the input written so far would give once followed by silence (what a flush reads). */
  get owedFrames(): number {
    return Math.ceil((this.#written * this.#design.up) / this.#design.down) - this.#produced;
  }

  /** Appends float samples (nominal range [-1, 1]), each rounded to PCM16 (`round(x * 32768)`, clipped). */
  writeFloat(samples: Float32Array, start = 0, end = samples.length): void {
    const at = this.#room(end - start);
    const buf = this.#buf;
    for (let i = start; i < end; i++) buf[at + i - start] = toInt16(samples[i]! * 32768);
  }

  /** Appends PCM16 samples. */
  writeInt16(samples: Int16Array, start = 0, end = samples.length): void {
    const at = this.#room(end - start);
    this.#buf.set(samples.subarray(start, end), at);
  }

  /** Appends `frames` of silence (to flush the filter's tail after the last input). */
  writeSilence(frames: number): void {
    const at = this.#room(frames);
    this.#buf.fill(0, at, at + frames);
  }

  /**
   * Writes up to `limit` outputs the input completes into `out` from `offset`: PCM16 values
   * (rounded, clipped) into an Int16Array, or floats (`value / 32768`) into a Float32Array.
   * Returns how many it wrote.
   */
  read(out: Int16Array | Float32Array, offset = 0, limit = out.length - offset): number {
    const buf = this.#buf;
    const table = this.#design.table;
    const taps = this.#taps;
    const up = this.#design.up;
    const pcm = out instanceof Int16Array;
    const len = this.#len;
    let pos = this.#pos;
    let phase = this.#phase;
    let n = 0;
    // Every product and partial sum is an integer times 2^-22 well inside 2^53: exact sums.
    while (n < limit && pos < len) {
      const row = phase * taps;
      let sum = 0;
      for (let k = 0, s = pos - taps + 1; k < taps; k++, s++) sum += buf[s]! * table[row + k]!;
      out[offset + n] = pcm ? toInt16(sum) : sum / 32768;
      n++;
      pos += this.#stepFrames;
      phase += this.#stepPhase;
      if (phase >= up) {
        phase -= up;
        pos++;
      }
    }
    this.#pos = pos;
    this.#phase = phase;
    this.#produced += n;
    return n;
  }

  /** Makes room for `frames` more input (dropping history no output needs); returns where they go. */
  #room(frames: number): number {
    const keepFrom = Math.min(this.#pos - this.#taps + 1, this.#len);
    if (this.#len + frames > this.#buf.length && keepFrom > 0) {
      this.#buf.copyWithin(0, keepFrom, this.#len);
      this.#len -= keepFrom;
      this.#pos -= keepFrom;
    }
    if (this.#len + frames > this.#buf.length) {
      const grown = new Float64Array(Math.max(this.#len + frames, this.#buf.length * 2));
      grown.set(this.#buf.subarray(0, this.#len));
      this.#buf = grown;
    }
    const at = this.#len;
    this.#len += frames;
    this.#written += frames;
    return at;
  }
}
