/**
 * The browser module's audio worklet: two processors, registered when this module is added with
 * `audioWorklet.addModule`. Both run at the AudioContext's own rate (the device's; a context is
 * never created at 24 kHz, which Firefox refuses to connect to a microphone of another rate)
 * and convert with `StreamResampler`, the library's resampling filter.
 *
 * - Capture: mixes the microphone's channels to mono, applies the gain the page sets (ducking
 *   or muting while a translation plays, ramped over one render quantum so it does not click),
 *   resamples to 24 kHz and posts PCM16 chunks of a fixed size, their buffers transferred.
 * - Playback: one queue of PCM16 chunks, resampled to the device's rate and played without gaps
 *   between chunks. When the queue runs dry the filter is fed silence, so the last samples play
 *   out; once they have, the processor idles and outputs silence. `interrupt` drops the queue.
 *   The position counts the queued frames whose sound has been output.
 */
import { StreamResampler } from './resampler.js';
import {
  CAPTURE_PROCESSOR,
  PLAYBACK_PROCESSOR,
  type CaptureCommand,
  type CaptureMessage,
  type CaptureProcessorOptions,
  type PlaybackCommand,
  type PlaybackMessage,
  type PlaybackProcessorOptions,
} from './worklet-protocol.js';

// The AudioWorkletGlobalScope, which TypeScript's DOM library does not describe.
declare const sampleRate: number;
declare class AudioWorkletProcessor {
  readonly port: MessagePort;
  constructor(options?: { processorOptions?: unknown });
}
declare function registerProcessor(name: string, processor: new (options: { processorOptions?: unknown }) => AudioWorkletProcessor): void;

/** Frames in one render quantum (Web Audio 1.0). */
const QUANTUM = 128;

class CaptureProcessor extends AudioWorkletProcessor {
  readonly #resampler: StreamResampler;
  readonly #chunkFrames: number;
  readonly #mono = new Float32Array(QUANTUM);
  #chunk: Int16Array;
  #filled = 0;
  #gain = 1;
  #target = 1;

  constructor(options: { processorOptions?: unknown }) {
    super(options);
    const { outputRate, chunkFrames } = options.processorOptions as CaptureProcessorOptions;
    this.#resampler = new StreamResampler(sampleRate, outputRate);
    this.#chunkFrames = chunkFrames;
    this.#chunk = new Int16Array(chunkFrames);
    this.port.onmessage = (event: MessageEvent<CaptureCommand>) => {
      if (event.data.type === 'gain') this.#target = event.data.gain;
    };
  }

  process(inputs: Float32Array[][]): boolean {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no microphone connected (yet)
    const frames = channels[0]!.length;
    const mono = frames === this.#mono.length ? this.#mono : new Float32Array(frames);
    const from = this.#gain;
    const step = (this.#target - from) / frames;
    for (let i = 0; i < frames; i++) {
      let sum = 0;
      for (const channel of channels) sum += channel[i]!;
      mono[i] = (sum / channels.length) * (from + step * (i + 1));
    }
    this.#gain = this.#target;
    this.#resampler.writeFloat(mono);
    for (;;) {
      this.#filled += this.#resampler.read(this.#chunk, this.#filled);
      if (this.#filled < this.#chunkFrames) break;
      const pcm = this.#chunk;
      this.port.postMessage({ type: 'audio', pcm } satisfies CaptureMessage, [pcm.buffer]);
      this.#chunk = new Int16Array(this.#chunkFrames);
      this.#filled = 0;
    }
    return true;
  }
}

class PlaybackProcessor extends AudioWorkletProcessor {
  readonly #resampler: StreamResampler;
  readonly #reportEvery: number;
  /** Input frames per output frame. */
  readonly #ratio: number;
  /** Frames the filter needs after the last real one before its sound is all out. */
  readonly #tail: number;
  readonly #queue: Int16Array[] = [];
  /** Read position in the queue's first chunk. */
  #head = 0;
  #queued = 0;
  #playing = false;
  /** Since the resampler's last reset: real frames written, the end of the last one, and the silent runs written between them. */
  #real = 0;
  #realEnd = 0;
  #silences: Array<[start: number, frames: number]> = [];
  /** Real frames played before the last reset. */
  #playedBefore = 0;
  #dropped = 0;
  #quanta = 0;

  constructor(options: { processorOptions?: unknown }) {
    super(options);
    const { inputRate, reportEvery } = options.processorOptions as PlaybackProcessorOptions;
    this.#resampler = new StreamResampler(inputRate, sampleRate);
    this.#reportEvery = reportEvery;
    this.#ratio = inputRate / sampleRate;
    this.#tail = Math.ceil(inputRate / 100); // 10 ms: well past the filter's half length
    this.port.onmessage = (event: MessageEvent<PlaybackCommand>) => {
      const command = event.data;
      if (command.type === 'audio') {
        if (command.pcm.length === 0) return;
        this.#queue.push(command.pcm);
        this.#queued += command.pcm.length;
      } else {
        this.#interrupt();
      }
    };
  }

  /** Input time (frames since the last reset) of the next output. */
  #now(): number {
    return this.#resampler.outputFrames * this.#ratio;
  }

  /** Real frames played since the last reset: input time passed, less the silence written before it. */
  #playedSinceReset(): number {
    const now = this.#now();
    let silent = 0;
    for (const [start, frames] of this.#silences) silent += Math.min(frames, Math.max(0, now - start));
    return Math.max(0, Math.min(this.#real, Math.floor(now - silent)));
  }

  #report(): void {
    const played = this.#playedBefore + this.#playedSinceReset();
    const queued = this.#queued + this.#real - this.#playedSinceReset();
    this.port.postMessage({ type: 'position', played, queued, playing: this.#playing, dropped: this.#dropped } satisfies PlaybackMessage);
  }

  #reset(): void {
    this.#playedBefore += this.#playedSinceReset();
    this.#resampler.reset();
    this.#real = 0;
    this.#realEnd = 0;
    this.#silences = [];
  }

  #interrupt(): void {
    this.#dropped += this.#queued + this.#real - this.#playedSinceReset();
    this.#queue.length = 0;
    this.#head = 0;
    this.#queued = 0;
    this.#reset();
    this.#playing = false;
    this.#report();
  }

  process(_inputs: Float32Array[][], outputs: Float32Array[][]): boolean {
    const channels = outputs[0]!;
    const out = channels[0]!;
    const r = this.#resampler;
    let filled = 0;
    const wasPlaying = this.#playing;
    if (!this.#playing && this.#queue.length > 0) this.#playing = true;
    while (this.#playing && filled < out.length) {
      filled += r.read(out, filled, out.length - filled);
      if (filled === out.length) break;
      const chunk = this.#queue[0];
      if (chunk) {
        const end = Math.min(chunk.length, this.#head + QUANTUM);
        r.writeInt16(chunk, this.#head, end);
        this.#real += end - this.#head;
        this.#realEnd = r.inputFrames;
        this.#queued -= end - this.#head;
        this.#head = end;
        if (end === chunk.length) {
          this.#queue.shift();
          this.#head = 0;
        }
      } else if (this.#now() >= this.#realEnd + this.#tail) {
        this.#reset(); // all played out: idle until more audio comes
        this.#playing = false;
      } else {
        // Dry: silence lets the filter's last samples out (and fills an underrun).
        const last = this.#silences[this.#silences.length - 1];
        if (last && last[0] + last[1] === r.inputFrames) last[1] += QUANTUM;
        else this.#silences.push([r.inputFrames, QUANTUM]);
        r.writeSilence(QUANTUM);
      }
    }
    out.fill(0, filled);
    for (let c = 1; c < channels.length; c++) channels[c]!.set(out);
    if (this.#playing !== wasPlaying || (this.#playing && ++this.#quanta % this.#reportEvery === 0)) this.#report();
    return true;
  }
}

registerProcessor(CAPTURE_PROCESSOR, CaptureProcessor);
registerProcessor(PLAYBACK_PROCESSOR, PlaybackProcessor);
