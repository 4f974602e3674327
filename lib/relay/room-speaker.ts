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
import { readClientFrame } from './client-frames.js';
import { RoomSocket } from './room-socket.js';

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
  readonly #socket: RoomSocket;

  constructor(ws: WebSocket, options: RoomSpeakerOptions, hooks: SpeakerHooks) {
    this.#ws = ws;
    this.#o = options;
    this.#hooks = hooks;
    this.#socket = new RoomSocket(ws, options.pingIntervalMs, { message: this.#onMessage, unresponsive: () => hooks.unresponsive(), gone: () => hooks.gone() });
    this.closed = this.#socket.closed;
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
    if (!this.#socket.closing) this.#ws.resume();
  }

  notice(event: Record<string, unknown>): void {
    const ws = this.#ws;
    if (this.#socket.closing || ws.readyState !== ws.OPEN) return;
    ws.send(JSON.stringify(event));
    if (ws.bufferedAmount > this.#o.maxBufferBytes) this.#stoppedReading();
  }

  close(code: number, reason: string): void {
    this.#socket.close(code, reason);
  }

  readonly #onMessage = (data: RawData, isBinary: boolean): void => {
    if (this.#socket.closing) return;
    const frame = readClientFrame(rawToBuffer(data), isBinary);
    if (frame.kind === 'audio') {
      if (!this.#hooks.audio(frame.pcm) && !this.#ws.isPaused) {
        this.#ws.pause();
        this.#socket.pings.paused();
      }
      return;
    }
    this.#hooks.refused();
    const [message, code] =
      frame.kind === 'refused'
        ? [frame.message, frame.code]
        : [
            `A room's speaker sends audio only (binary PCM16 frames or input_audio_buffer.append); ${frame.kind === 'session.update' ? 'session.update' : frame.type} was not forwarded.`,
            400,
          ];
    this.notice(JSON.parse(encodeServerEvent.error(message, code)) as Record<string, unknown>);
  };

  /** Its refusals and notices pile up unread: it counts as unresponsive and is cut. */
  #stoppedReading(): void {
    if (this.#socket.closing) return;
    this.#hooks.unresponsive();
    this.#socket.cut();
  }
}
