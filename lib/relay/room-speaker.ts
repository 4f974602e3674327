/**
 * A room's speaker: a browser's WebSocket that sends the audio every language of the room is
 * translated from, as binary PCM16 frames or `input_audio_buffer.append` events (read by
 * `readClientFrame`, the service's limits applied). The audio goes to the room; while the room
 * cannot take more (a language's sending side is full), the socket is paused. Any other event
 * is refused with an `error` event (400) and goes nowhere. It gets the room's notices
 * (`room.opened`, `room.languages`). A speaker that stops answering pings, or leaves its
 * refusals unread beyond the bound, is cut.
 */
import type { RawData, WebSocket } from 'ws';
import { encodeServerEvent } from '../realtime/codec.js';
import { PeerPings } from '../integrations/peer-pings.js';
import { readClientFrame } from './client-frames.js';
import { closeReason } from './scrub.js';

const CLOSE_GRACE_MS = 2000;

export interface RoomSpeakerOptions {
  pingIntervalMs: number;
  /** Bytes its socket may hold unsent (notices, refusals) before it counts as not reading. */
  maxBufferBytes: number;
}

export interface SpeakerHooks {
  /** Audio for the room; false: paused until `resume()`. */
  audio(pcm: Buffer): boolean;
  /** An event was refused. */
  refused(): void;
  /** It stopped reading (counted by the relay). */
  unresponsive(): void;
  /** Its socket closed. */
  gone(): void;
}

function rawToBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

export class RoomSpeaker {
  readonly closed: Promise<void>;
  readonly #ws: WebSocket;
  readonly #o: RoomSpeakerOptions;
  readonly #hooks: SpeakerHooks;
  readonly #pings: PeerPings;
  #grace: NodeJS.Timeout | undefined;
  #closing = false;

  constructor(ws: WebSocket, options: RoomSpeakerOptions, hooks: SpeakerHooks) {
    this.#ws = ws;
    this.#o = options;
    this.#hooks = hooks;
    this.#pings = new PeerPings(ws, options.pingIntervalMs, this.#stoppedReading);
    ws.on('error', () => {
      // `ws` closes the socket after an error; the close listener below follows.
    });
    ws.on('message', this.#onMessage);
    this.closed = new Promise((resolve) =>
      ws.once('close', () => {
        this.#pings.stop();
        clearTimeout(this.#grace);
        ws.off('message', this.#onMessage);
        hooks.gone();
        resolve();
      }),
    );
  }

  /** Whether the socket is paused because the room cannot take more audio yet. */
  get paused(): boolean {
    return this.#ws.isPaused;
  }

  get bufferedBytes(): number {
    return this.#ws.bufferedAmount;
  }

  /** The room takes audio again. */
  resume(): void {
    if (!this.#closing) this.#ws.resume();
  }

  notice(event: Record<string, unknown>): void {
    const ws = this.#ws;
    if (this.#closing || ws.readyState !== ws.OPEN) return;
    ws.send(JSON.stringify(event));
    if (ws.bufferedAmount > this.#o.maxBufferBytes) this.#stoppedReading();
  }

  close(code: number, reason: string): void {
    if (this.#closing) return;
    this.#closing = true;
    const ws = this.#ws;
    this.#pings.stop();
    ws.resume();
    this.#grace = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
    if (ws.readyState === ws.OPEN) ws.close(code, closeReason(reason));
    else ws.terminate();
  }

  readonly #onMessage = (data: RawData, isBinary: boolean): void => {
    if (this.#closing) return;
    const frame = readClientFrame(rawToBuffer(data), isBinary);
    if (frame.kind === 'audio') {
      if (!this.#hooks.audio(frame.pcm) && !this.#ws.isPaused) {
        this.#ws.pause();
        this.#pings.paused();
      }
      return;
    }
    this.#hooks.refused();
    const [message, code] =
      frame.kind === 'refused'
        ? [frame.message, frame.code]
        : [`A room's speaker sends audio only (binary PCM16 frames or input_audio_buffer.append); ${frame.kind === 'session.update' ? 'session.update' : frame.type} was not forwarded.`, 400];
    this.notice(JSON.parse(encodeServerEvent.error(message, code)) as Record<string, unknown>);
  };

  readonly #stoppedReading = (): void => {
    if (this.#closing) return;
    this.#hooks.unresponsive();
    this.#closing = true;
    this.#pings.stop();
    this.#ws.terminate();
  };
}
