/**
 * The outbound half of the Twilio bridge: a Writable taking the translator's PCM16 LE mono
 * 24 kHz output and producing Twilio messages through a sink: `media` of exactly 20 ms
 * (160 bytes of mu-law) and, after each response, a `mark`.
 *
 * The translator's output is one byte stream; the bridge reports where each response ends
 * (`responseEnded(totalBytes)`, the byte count at `audio.done`) and this stream cuts there, each
 * response through a fresh converter whose filter tail is flushed at the cut. `clear(receivedBytes)`
 * drops what is queued and every response already (partly) received; `discardAll()` drops
 * everything from then on while the translator's output is still read to its end. A write's
 * callback waits on the sink's reader (`burst`) or the `Pacer`'s high-water mark (`realtime`);
 * `readerReady()` releases it. Pacing and marks as a user sees them: docs/bots.md.
 */
import { Writable } from 'node:stream';
import { FrameCutter } from '../audio/frames.js';
import { Pacer } from '../audio/pacer.js';
import { SERVICE_FORMAT, resolveDescription, silenceByte } from '../audio/audio-format.js';
import { planConversion } from '../audio/convert.js';
import type { AudioProcessor } from '../audio/processor.js';
import {
  TWILIO_FRAME_BYTES,
  TWILIO_FRAME_MS,
  TWILIO_SAMPLE_RATE,
  twilioMarkMessage,
  twilioMediaMessage,
  type TwilioOutboundMessage,
} from './twilio-messages.js';

/** The last stream id serialized by `twilioMessageJson`, and its JSON (a call sends one id for its whole life). */
let lastSid = '';
let lastSidJson = '""';

/**
 * The JSON text of an outbound message, as `JSON.stringify(message)` gives it. A `media` message
 * (50 a second per call) is written from a template: its payload is base64, which needs no
 * escaping, and its stream id is escaped once per call instead of once per message.
 */
export function twilioMessageJson(message: TwilioOutboundMessage): string {
  if (message.event !== 'media') return JSON.stringify(message);
  const sid = message.streamSid;
  if (sid !== lastSid) {
    lastSidJson = JSON.stringify(sid);
    lastSid = sid;
  }
  return `{"event":"media","streamSid":${lastSidJson},"media":{"payload":"${message.media.payload}"}}`;
}

/** How outbound frames are released; see the module comment. */
export type TwilioPacing = 'burst' | 'realtime';

/** A response whose audio has gone out, followed by its mark. */
export interface TwilioResponseInfo {
  /** 1 for the service's first response, then 2, 3, ... (dropped responses are counted too). */
  index: number;
  /** The mark's name. */
  mark: string;
  /** Number of 20 ms `media` messages of the response. */
  frames: number;
  /** The response's duration as sent, in ms (`frames * 20`). */
  durationMs: number;
}

/** Where the outbound messages go (the bridge). */
export interface TwilioOutboundSink {
  /** Delivers one message; returns false when the reader is behind. */
  push(message: TwilioOutboundMessage): boolean;
  /** The stream's id; messages are only produced once it is known. */
  streamSid(): string | undefined;
  /** A response's last frame and its mark have been delivered. */
  responseSent(info: TwilioResponseInfo): void;
}

export interface TwilioOutboundOptions {
  sink: TwilioOutboundSink;
  pacing: TwilioPacing;
  markPrefix: string;
}

const TWILIO_DESCRIPTION = resolveDescription({ format: 'mulaw', rate: TWILIO_SAMPLE_RATE, channels: 1 }, '');
const MULAW_SILENCE = silenceByte('mulaw');

function newConverter(): AudioProcessor {
  return planConversion({ ...SERVICE_FORMAT }, TWILIO_DESCRIPTION).processor;
}

interface PendingMark {
  /** The mark goes out once this many frames have left the pacer. */
  atFrame: number;
  info: TwilioResponseInfo;
}

export class TwilioOutbound extends Writable {
  readonly pacing: TwilioPacing;
  readonly #sink: TwilioOutboundSink;
  readonly #markPrefix: string;

  /** Translator bytes processed so far. */
  #consumed = 0;
  /** Recorded response ends not yet reached, ascending byte offsets. */
  #boundaries: number[] = [];
  /** The last recorded response end. */
  #lastBoundary = 0;
  /** Responses recorded (with audio) so far. */
  #recorded = 0;
  /** Offset where the last response that was cut here ended. */
  #endedOffset = 0;
  /** Index of the response being consumed. */
  #index = 1;
  /** Responses with an index up to this are dropped. */
  #discardThrough = 0;

  #converter: AudioProcessor = newConverter();
  /** The response's mu-law cut into 160-byte frames (the library's re-framer). */
  readonly #frames = new FrameCutter(TWILIO_FRAME_BYTES);
  #responseFrames = 0;

  #readerBehind = false;
  #pendingCallback: (() => void) | undefined;
  #finalCallback: ((error?: Error | null) => void) | undefined;

  // realtime pacing
  #pacer: Pacer | undefined;
  #generation = 0;
  #pacedPending: Buffer[] = [];
  #framesQueued = 0;
  #framesOut = 0;
  #pacedMarks: PendingMark[] = [];

  /** Media messages delivered to the sink. */
  framesSent = 0;

  constructor(options: TwilioOutboundOptions) {
    super({ objectMode: false, decodeStrings: true, highWaterMark: 64 * 1024 });
    this.#sink = options.sink;
    this.pacing = options.pacing;
    this.#markPrefix = options.markPrefix;
    if (this.pacing === 'realtime') this.#pacer = this.#newPacer();
  }

  /** The translator's output reached `totalBytes` when a response ended (its `audio.done`). */
  responseEnded(totalBytes: number): void {
    if (totalBytes <= this.#lastBoundary) return; // a response without audio
    this.#lastBoundary = totalBytes;
    this.#recorded += 1;
    if (this.#consumed === totalBytes) {
      this.#endResponse();
      this.#flushPaced();
    } else {
      this.#boundaries.push(totalBytes);
    }
  }

  /**
   * True when translated audio has not finished going out: received from the translator and not
   * yet converted, or queued in the pacer. (What Twilio itself still buffers is known to the
   * bridge through the marks it has not had back.)
   */
  hasPendingAudio(receivedBytes: number): boolean {
    const newest = receivedBytes > this.#lastBoundary ? this.#recorded + 1 : this.#recorded;
    if (receivedBytes > this.#endedOffset && newest > this.#discardThrough) return true;
    return this.#framesOut < this.#framesQueued || this.#pacedMarks.length > 0;
  }

  /**
   * Barge-in: drops what is queued here and every response received so far (`receivedBytes` is
   * the translator's byte count now), including the rest of one still streaming. Returns the
   * number of 20 ms frames dropped from the pacer's queue (0 in `burst` mode).
   */
  clear(receivedBytes: number): number {
    const through = this.#recorded + (receivedBytes > this.#lastBoundary ? 1 : 0);
    const dropped = Math.max(0, this.#framesQueued - this.#framesOut);
    this.#discardThrough = Math.max(this.#discardThrough, through);
    this.#resetResponse();
    if (this.pacing === 'realtime' && this.#pacer !== undefined) this.#replacePacer();
    return dropped;
  }

  /** `discardAll()` was called: nothing goes out any more. */
  get discarding(): boolean {
    return this.#discardThrough === Number.POSITIVE_INFINITY;
  }

  /** Drops all outbound audio from now on; the input is still read to its end. */
  discardAll(): void {
    if (this.#discardThrough === Number.POSITIVE_INFINITY) return;
    this.#discardThrough = Number.POSITIVE_INFINITY;
    this.#resetResponse();
    this.#pacer?.removeAllListeners('data');
    this.#pacer?.destroy();
    this.#pacer = undefined;
    this.#generation += 1;
    this.#pacedMarks = [];
    this.#pacedPending = [];
    this.#releasePending();
    const final = this.#finalCallback;
    this.#finalCallback = undefined;
    final?.();
  }

  /** The sink's reader wants more. */
  readerReady(): void {
    this.#readerBehind = false;
    if (this.pacing === 'realtime') this.#pacer?.resume();
    else this.#releasePending();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let pos = 0;
    while (pos < chunk.length) {
      const boundary = this.#boundaries[0];
      const take = boundary === undefined ? chunk.length - pos : Math.min(chunk.length - pos, boundary - this.#consumed);
      if (take > 0) {
        if (this.#index > this.#discardThrough) this.#convert(chunk.subarray(pos, pos + take));
        pos += take;
        this.#consumed += take;
      }
      if (boundary !== undefined && this.#consumed === boundary) {
        this.#boundaries.shift();
        this.#endResponse();
      }
    }
    if (this.pacing === 'realtime' && this.#pacer) {
      this.#pendingCallback = () => callback();
      this.#flushPaced(true);
    } else if (this.#readerBehind && this.#discardThrough !== Number.POSITIVE_INFINITY) {
      this.#pendingCallback = () => callback();
    } else {
      callback();
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    // Audio after the last audio.done (a response the translator gave up on) is a response too.
    if (this.#consumed > this.#lastBoundary) this.responseEnded(this.#consumed);
    const pacer = this.#pacer;
    if (pacer === undefined) {
      callback();
      return;
    }
    this.#finalCallback = callback;
    this.#flushPaced();
    pacer.end();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#pacer?.removeAllListeners('data');
    this.#pacer?.destroy();
    this.#pacer = undefined;
    this.#pendingCallback = undefined;
    this.#finalCallback = undefined;
    callback(error);
  }

  /* ------------------------------------------------------------------ conversion and framing */

  #convert(pcm: Buffer): void {
    const mulaw = this.#converter.process(pcm);
    if (mulaw.length > 0) this.#frame(mulaw);
  }

  /** Cuts mu-law into 160-byte frames, keeping the remainder for the next call. */
  #frame(mulaw: Buffer): void {
    this.#frames.cut(mulaw, this.#wholeFrames);
  }

  readonly #wholeFrames = (buf: Buffer, offset: number, frames: number): void => {
    this.#out(buf.subarray(offset, offset + frames * TWILIO_FRAME_BYTES));
  };

  /** Whole frames of the current response, in order. */
  #out(frames: Buffer): void {
    const count = frames.length / TWILIO_FRAME_BYTES;
    this.#responseFrames += count;
    if (this.pacing === 'realtime') {
      this.#pacedPending.push(frames);
      this.#framesQueued += count;
      return;
    }
    const sid = this.#sink.streamSid();
    if (sid === undefined) return;
    for (let at = 0; at < frames.length; at += TWILIO_FRAME_BYTES) {
      this.framesSent += 1;
      if (!this.#sink.push(twilioMediaMessage(sid, frames.subarray(at, at + TWILIO_FRAME_BYTES)))) this.#readerBehind = true;
    }
  }

  /** The response being consumed has ended: flush its converter, pad its last frame, mark it. */
  #endResponse(): void {
    const index = this.#index;
    this.#index += 1;
    this.#endedOffset = this.#consumed;
    if (index <= this.#discardThrough) {
      this.#resetResponse();
      return;
    }
    const tail = this.#converter.flush();
    if (tail.length > 0) this.#frame(tail);
    if (this.#frames.pendingBytes > 0) this.#out(this.#frames.takePending(TWILIO_FRAME_BYTES, MULAW_SILENCE));
    const frames = this.#responseFrames;
    this.#resetResponse();
    if (frames === 0) return;
    const info: TwilioResponseInfo = { index, mark: `${this.#markPrefix}${index}`, frames, durationMs: frames * TWILIO_FRAME_MS };
    if (this.pacing === 'realtime') {
      this.#pacedMarks.push({ atFrame: this.#framesQueued, info });
      this.#sendDueMarks();
    } else {
      this.#sendMark(info);
    }
  }

  #resetResponse(): void {
    this.#converter = newConverter();
    this.#frames.clear();
    this.#responseFrames = 0;
  }

  #sendMark(info: TwilioResponseInfo): void {
    const sid = this.#sink.streamSid();
    if (sid === undefined) return;
    if (!this.#sink.push(twilioMarkMessage(sid, info.mark))) this.#readerBehind = true;
    this.#sink.responseSent(info);
  }

  #releasePending(): void {
    const callback = this.#pendingCallback;
    this.#pendingCallback = undefined;
    callback?.();
  }

  /* ------------------------------------------------------------------ realtime pacing */

  #newPacer(): Pacer {
    const pacer = new Pacer({ sampleRate: TWILIO_SAMPLE_RATE, format: 'mulaw', frameMs: TWILIO_FRAME_MS });
    const generation = this.#generation;
    pacer.on('data', (frames: Buffer) => {
      if (generation !== this.#generation) return;
      this.#pacedFrames(frames);
    });
    pacer.on('end', () => {
      if (generation !== this.#generation) return;
      this.#sendDueMarks();
      const final = this.#finalCallback;
      this.#finalCallback = undefined;
      final?.();
    });
    pacer.on('error', (error) => {
      if (generation === this.#generation) this.destroy(error);
    });
    return pacer;
  }

  #replacePacer(): void {
    const old = this.#pacer;
    this.#generation += 1;
    old?.removeAllListeners('data');
    old?.destroy();
    this.#pacedMarks = [];
    this.#pacedPending = [];
    this.#framesQueued = 0;
    this.#framesOut = 0;
    this.#pacer = this.#newPacer();
    // A write held by the old pacer's queue goes on with the new one.
    this.#releasePending();
  }

  /** Hands the frames converted so far to the pacer; with `hold`, the pending write waits for it. */
  #flushPaced(hold = false): void {
    const pacer = this.#pacer;
    if (pacer === undefined) {
      if (hold) this.#releasePending();
      return;
    }
    const pending = this.#pacedPending;
    this.#pacedPending = [];
    if (pending.length === 0) {
      if (hold) this.#releasePending();
      return;
    }
    const data = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    if (!hold) {
      pacer.write(data);
      return;
    }
    const generation = this.#generation;
    pacer.write(data, () => {
      if (generation === this.#generation) this.#releasePending();
    });
  }

  #pacedFrames(frames: Buffer): void {
    const sid = this.#sink.streamSid();
    for (let at = 0; at + TWILIO_FRAME_BYTES <= frames.length; at += TWILIO_FRAME_BYTES) {
      this.#framesOut += 1;
      if (sid !== undefined) {
        this.framesSent += 1;
        if (!this.#sink.push(twilioMediaMessage(sid, frames.subarray(at, at + TWILIO_FRAME_BYTES)))) this.#readerBehind = true;
      }
      this.#sendDueMarks();
    }
    if (this.#readerBehind) this.#pacer?.pause();
  }

  #sendDueMarks(): void {
    while (this.#pacedMarks.length > 0 && this.#pacedMarks[0]!.atFrame <= this.#framesOut) {
      this.#sendMark(this.#pacedMarks.shift()!.info);
    }
  }
}
