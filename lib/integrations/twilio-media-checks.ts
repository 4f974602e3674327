/**
 * What a `TwilioMediaBridge` checks an inbound `media` message against before its audio is
 * used, once the stream has started: that it belongs to the call (its stream, the translated
 * track), that its payload has the size Twilio sends, and that its timestamp fits the call's
 * clock.
 *
 * A message of another track, or without audio, is ignored silently; one of another stream or
 * with an oversized payload is refused with a warning. A timestamp far ahead of the time since
 * `start` (`maxTimestampLeadMs`), or timestamps going backwards more often than
 * `maxTimestampRewinds`, are no call's: the error that ends the call is returned, with the few
 * words of its close reason. The bridge decides what to count, warn about and close; nothing
 * here holds a timer or touches a stream.
 */
import { ProtocolError } from '../errors.js';
import { TWILIO_FRAME_BYTES, describeTwilioValue, type TwilioInboundMessage, type TwilioStreamInfo } from './twilio-messages.js';

export type TwilioMediaMessage = Extract<TwilioInboundMessage, { event: 'media' }>;

/** Twilio's `media` payloads are 20 ms; a larger one is not a call's and is refused. */
const MAX_FRAME_BYTES = TWILIO_FRAME_BYTES;

/** Why a `media` message's audio is not used: ignored silently, or refused with a warning of that kind. */
export type MediaRefusal = 'ignored' | { kind: 'out-of-order' | 'media-size'; warning: ProtocolError };

/** Whether `message` belongs to `stream` and `track` and has a call's payload size; undefined when its audio is to be used. */
export function refuseMedia(message: TwilioMediaMessage, stream: TwilioStreamInfo, track: string): MediaRefusal | undefined {
  if (message.track !== track || message.audio.length === 0) return 'ignored';
  if (message.streamSid !== undefined && message.streamSid !== stream.streamSid) {
    const warning = new ProtocolError(`A "media" message of another stream (${describeTwilioValue(message.streamSid)}) was ignored.`);
    return { kind: 'out-of-order', warning };
  }
  if (message.audio.length > MAX_FRAME_BYTES) {
    const warning = new ProtocolError(
      `A "media" payload of ${message.audio.length} bytes was refused: Twilio sends ${MAX_FRAME_BYTES} bytes (20 ms of 8 kHz mu-law) at most. ` +
        'Further ones are refused without a warning (stats.refusedFrames).',
    );
    return { kind: 'media-size', warning };
  }
  return undefined;
}

/** The timestamps of one call's media, checked against its clock (see the module comment). */
export class MediaTimestampCheck {
  readonly #maxLeadMs: number;
  readonly #maxRewinds: number;
  #last: number | undefined;
  #rewinds = 0;

  constructor(limits: { maxTimestampLeadMs: number; maxTimestampRewinds: number }) {
    this.#maxLeadMs = limits.maxTimestampLeadMs;
    this.#maxRewinds = limits.maxTimestampRewinds;
  }

  /**
   * A timestamp that no call sends, `elapsedMs` after `start`: the error that ends the call and
   * its close reason. Undefined for a timestamp a call may send (or none).
   */
  check(timestamp: number | undefined, elapsedMs: number): { error: ProtocolError; closeReason: string } | undefined {
    if (timestamp === undefined) return undefined;
    const lead = Math.round(timestamp - elapsedMs);
    if (lead > this.#maxLeadMs) {
      const error = new ProtocolError(
        `A "media" timestamp of ${timestamp} ms came ${Math.round(elapsedMs)} ms after "start": ${lead} ms ahead of the call's clock, ` +
          `more than maxTimestampLeadMs (${this.#maxLeadMs} ms); the call was closed.`,
      );
      return { error, closeReason: "media timestamps ahead of the call's clock" };
    }
    if (this.#last !== undefined && timestamp < this.#last) {
      this.#rewinds += 1;
      if (this.#rewinds > this.#maxRewinds) {
        const error = new ProtocolError(
          `"media" timestamps went backwards ${this.#rewinds} times (maxTimestampRewinds is ${this.#maxRewinds}); the call was closed.`,
        );
        return { error, closeReason: 'media timestamps going backwards' };
      }
    }
    this.#last = timestamp;
    return undefined;
  }
}
