/**
 * Discord voice adapters: between "@discordjs/voice style" audio and the realtime service's
 * format (PCM16 LE, mono, 24 kHz). Nothing here imports discord.js or @discordjs/voice:
 *
 * - Receiving: a voice receiver's `AudioReceiveStream` yields one Opus packet (a Buffer, 20 ms of
 *   48 kHz stereo) per object. `DiscordReceiveAdapter` decodes them, fills the silence gaps a
 *   receiver leaves (it sends nothing while the speaker is silent), and converts to the service
 *   format (`discord-receive.ts`, re-exported here).
 * - Playing: `createAudioResource` takes a Readable of 48 kHz stereo PCM16 (`StreamType.Raw`) or
 *   of Opus packets (`StreamType.Opus`). `DiscordPlaybackAdapter` converts translated audio into
 *   exact 20 ms frames of either.
 * - `translateSpeaker` composes receiver -> adapter -> `RealtimeTranslateStream` -> playback with
 *   `pipeline()`.
 *
 * The DSP (channel mix, resampling) is the conversion chain of `audio/convert.ts`; the codec is
 * `./opus.ts`; pacing is `audio/pacer.ts`. This module only decides what goes where and when.
 */
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ValidationError } from '../errors.js';
import { SERVICE_FORMAT } from '../audio/audio-format.js';
import { planConversion } from '../audio/convert.js';
import { Pacer } from '../audio/pacer.js';
import type { AudioProcessor } from '../audio/processor.js';
import { RealtimeTranslateStream, type RealtimeTranslateOptions } from '../realtime/realtime-translate-stream.js';
import { FrameAssembler, OPUS_FRAME_MS, OpusPacketEncoder, createOpusCodec, type OpusBackend, type OpusBackendChoice, type OpusCodec } from '../audio/opus.js';
import { intOption } from '../options.js';
import { DISCORD_FRAME_BYTES, DISCORD_PCM_FORMAT } from './discord-format.js';
import { DiscordReceiveAdapter } from './discord-receive.js';
import type { DiscordReceiveOptions, OpusPacketInput } from './discord-receive-options.js';

export { DISCORD_FRAME_BYTES, DISCORD_PCM_FORMAT } from './discord-format.js';
export { DiscordReceiveAdapter } from './discord-receive.js';
export type {
  DiscordReceiveEvents,
  DiscordReceiveOptions,
  DiscordReceiveStats,
  GapInfo,
  GapMode,
  OpusPacketInput,
  ReceiveWarningDetail,
  RtpOpusPacket,
} from './discord-receive-options.js';
function fromServiceProcessor(): AudioProcessor {
  return planConversion({ ...SERVICE_FORMAT }, { ...DISCORD_PCM_FORMAT }).processor;
}

// --- playing -------------------------------------------------------------------------------------

/** `'pcm'`: 3840-byte frames of 48 kHz stereo PCM16 (`StreamType.Raw`); `'opus'`: one packet per frame (`StreamType.Opus`). */
export type PlaybackOutput = 'pcm' | 'opus';

export interface DiscordPlaybackOptions {
  /** Default `'pcm'`. */
  output?: PlaybackOutput;
  /** For `'opus'` output; default `'auto'`. */
  opusBackend?: OpusBackendChoice;
  /** For `'opus'` output: encoder bitrate in bits per second. Default: the codec's own. */
  bitrate?: number;
  /** Frames (or packets) buffered on the readable side. Default 16 (320 ms). */
  readableHighWaterMark?: number;
  /** Bytes buffered on the writable side. Default 16 KiB. */
  writableHighWaterMark?: number;
}

/**
 * Translated audio (PCM16 LE mono 24 kHz, any chunking) in; 20 ms frames for a Discord player
 * out, one per chunk (object mode): 3840-byte frames of 48 kHz stereo PCM16, or one Opus packet
 * per such frame. Conversion: resample 24 -> 48 kHz, then the mono sample in both channels.
 *
 * End of input: the converter's tail is emitted, and a last partial frame is padded with
 * silence to a whole 20 ms frame (at most 19.98 ms added; `paddingBytes` says how much).
 *
 * No pacing: a @discordjs/voice `AudioPlayer` reads one frame every 20 ms by itself. Between
 * translations this stream has nothing to give; create the player with
 * `behaviors: { maxMissedFrames: Infinity }` so it plays silence meanwhile instead of stopping
 * after 5 missed frames, or put `createDiscordPacer({ fillGaps: true })` behind a `'pcm'`
 * adapter for a sink that wants a steady 20 ms stream.
 */
export class DiscordPlaybackAdapter extends Transform {
  readonly output: PlaybackOutput;
  /** The Opus backend (`'opus'` output only). */
  readonly opusBackend: OpusBackend | undefined;
  /** Frames emitted so far. */
  framesOut = 0;
  /** Silence bytes (48 kHz stereo) added to complete the last frame. */
  paddingBytes = 0;

  readonly #processor: AudioProcessor = fromServiceProcessor();
  readonly #frames = new FrameAssembler(DISCORD_FRAME_BYTES);
  readonly #codec: OpusCodec | undefined;

  constructor(options: DiscordPlaybackOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('options', 'an object { output?, opusBackend?, bitrate? }', String(options));
    }
    const output = options.output ?? 'pcm';
    if (output !== 'pcm' && output !== 'opus') throw new ValidationError('output', "'pcm' or 'opus'", String(output));
    const readableHighWaterMark = intOption(options.readableHighWaterMark, 'readableHighWaterMark', { min: 1, fallback: 16, accepted: 'a positive integer' });
    const writableHighWaterMark = intOption(options.writableHighWaterMark, 'writableHighWaterMark', {
      min: 1,
      fallback: 16 * 1024,
      accepted: 'a positive integer',
    });
    const codec = output === 'opus' ? createOpusCodec({ backend: options.opusBackend ?? 'auto', bitrate: options.bitrate }) : undefined;
    super({ readableObjectMode: true, writableObjectMode: false, decodeStrings: true, readableHighWaterMark, writableHighWaterMark });
    this.output = output;
    this.#codec = codec;
    this.opusBackend = codec?.backend;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.#frames.add(this.#processor.process(chunk), this.#emitFrame);
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.#frames.add(this.#processor.flush(), this.#emitFrame);
      this.paddingBytes = this.#frames.finish(this.#emitFrame);
    } catch (err) {
      callback(err as Error);
      return;
    }
    this.#codec?.close();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#codec?.close();
    callback(err);
  }

  readonly #emitFrame = (frame: Buffer): void => {
    this.framesOut++;
    this.push(this.#codec ? this.#codec.encode(frame) : frame);
  };
}

export interface DiscordPacerOptions {
  /** Send silent frames while no audio is queued (keeps a player fed). Default true. */
  fillGaps?: boolean;
  /** Queued audio beyond which writes wait, in ms. Default 200. */
  highWaterMs?: number;
  /** Monotonic clock in ms; default `performance.now()`. */
  now?: () => number;
}

/**
 * A `Pacer` for Discord playback: 48 kHz stereo PCM16 in, 3840-byte frames out every 20 ms of
 * the clock (see `audio/pacer.ts` for the schedule and the gap policy).
 */
export function createDiscordPacer(options: DiscordPacerOptions = {}): Pacer {
  return new Pacer({
    sampleRate: DISCORD_PCM_FORMAT.rate,
    channels: DISCORD_PCM_FORMAT.channels,
    frameMs: OPUS_FRAME_MS,
    fillGaps: options.fillGaps ?? true,
    highWaterMs: options.highWaterMs,
    now: options.now,
  });
}

// --- the whole path ------------------------------------------------------------------------------

export interface TranslateSpeakerOptions extends RealtimeTranslateOptions {
  /** The speaker's Opus packets: a receiver's `AudioReceiveStream`, or any (async) iterable of packets. */
  opusPackets: Readable | AsyncIterable<OpusPacketInput> | Iterable<OpusPacketInput>;
  /** Playback as Opus packets (default, for `StreamType.Opus`) or 48 kHz stereo PCM frames (`StreamType.Raw`). */
  output?: PlaybackOutput;
  /** Release playback frames at real time, with silence between translations (`createDiscordPacer`). Default false. */
  pace?: boolean;
  /** Options of the receive adapter (`opusBackend` defaults to the top-level one, `chunkMs` to 100). */
  receive?: DiscordReceiveOptions;
  /** Options of the playback adapter (`output` is the top-level one). */
  playback?: Omit<DiscordPlaybackOptions, 'output'>;
  /** Opus backend for both directions. Default `'auto'`. */
  opusBackend?: OpusBackendChoice;
}

export interface SpeakerTranslation {
  /** 20 ms frames to play: Opus packets or 3840-byte PCM frames, one per chunk (object mode). */
  playback: Readable;
  translator: RealtimeTranslateStream;
  receiver: DiscordReceiveAdapter;
  /**
   * Settles when the path ends: resolves after the packets ended and the last translation went
   * into `playback`; rejects with the first error (every stage, `playback` included, is then
   * destroyed with it). Already handled: not awaiting it causes no unhandled rejection.
   */
  done: Promise<void>;
}

/**
 * One speaker's translation path, composed with `pipeline()`:
 * `opusPackets -> DiscordReceiveAdapter -> RealtimeTranslateStream -> DiscordPlaybackAdapter
 * [-> createDiscordPacer() [-> OpusPacketEncoder]]`. Read (or play) `playback`; destroy it, or
 * end `opusPackets`, to stop. Throws synchronously for bad options (as the stages' constructors
 * do).
 */
export function translateSpeaker(options: TranslateSpeakerOptions): SpeakerTranslation {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'an object { opusPackets, from, to, ... }', String(options));
  }
  const { opusPackets, output = 'opus', pace = false, receive = {}, playback = {}, opusBackend = 'auto', ...realtime } = options;
  const source = opusPackets instanceof Readable ? opusPackets : isIterable(opusPackets) ? Readable.from(opusPackets) : undefined;
  if (source === undefined) throw new ValidationError('opusPackets', 'a Readable or an (async) iterable of Opus packets', typeof opusPackets);
  if (output !== 'pcm' && output !== 'opus') throw new ValidationError('output', "'pcm' or 'opus'", String(output));

  // The translator connects as soon as it exists: it is made last, and whatever was made before
  // a constructor throws is released.
  const made: Array<Transform | Pacer> = [];
  let receiver: DiscordReceiveAdapter;
  let translator: RealtimeTranslateStream;
  try {
    receiver = new DiscordReceiveAdapter({ opusBackend, chunkMs: 100, ...receive });
    made.push(receiver);
    if (pace) {
      made.push(new DiscordPlaybackAdapter({ opusBackend, ...playback, output: 'pcm' }), createDiscordPacer());
      if (output === 'opus') made.push(new OpusPacketEncoder({ opusBackend: playback.opusBackend ?? opusBackend, bitrate: playback.bitrate }));
    } else {
      made.push(new DiscordPlaybackAdapter({ opusBackend, ...playback, output }));
    }
    translator = new RealtimeTranslateStream(realtime);
  } catch (err) {
    for (const stream of made) stream.destroy();
    throw err;
  }
  const stages = made.slice(1);
  const done = pipeline([source, receiver, translator, ...stages]);
  done.catch(() => {});
  return { playback: stages[stages.length - 1] as unknown as Readable, translator, receiver, done };
}

function isIterable(value: unknown): value is AsyncIterable<unknown> | Iterable<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    (typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' || typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function')
  );
}
