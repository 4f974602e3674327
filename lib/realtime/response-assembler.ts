/**
 * The incoming half of a realtime translation session, without sockets or streams: the service's
 * messages are decoded (the key redacted from anything it echoes), output audio is realigned to
 * whole samples across deltas and binary frames, a response's text is assembled, its stages are
 * recorded in the `SpeechLedger` and timed, and each event becomes what the stream does with it
 * (publish it, deliver audio, restart the quiet period, forget answered input, start the
 * session, weigh a service error), through a `ResponseSink`.
 */
import { ProtocolError, type RtTranslateError } from '../errors.js';
import { decodeBinaryAudio, decodeServerEvent, type ServerEvent, type SessionInfo } from './codec.js';
import { redactObject, type RealtimeEvent, type RealtimeStats } from './realtime-events.js';
import { LatencySeries, type SpeechLedger } from './speech-ledger.js';

/** What the stream does with what the service sent. */
export interface ResponseSink {
  /** An event for listeners and `events()`. */
  publish(event: RealtimeEvent): void;
  /** Translated audio for the readable side (whole samples; may be empty). */
  audio(audio: Buffer): void;
  /** The service answered at `now`: response activity, for the ending's quiet period. */
  activity(now: number): void;
  /** A response completed: the input it answered will not be sent again. */
  answered(): void;
  /** `session.starting` arrived: the service is booting its model (a cold start). */
  starting(): void;
  /** `session.created` arrived (it is published already). */
  sessionCreated(info: SessionInfo): void;
  /** The service sent an error (it is published already). */
  serverError(message: string, code: number | string | undefined): void;
}

export interface ResponseAssemblerOptions {
  /** Redacted from every event the service echoes it in. */
  secret: string;
  /** The session asks for audio: a response completes at `audio.done` (else at `text.done`). */
  audioExpected: boolean;
  /** Offset of the next input byte to be sent (what the service may have heard so far). */
  sent(): number;
}

export type ResponseLatency = RealtimeStats['latency'];

export class ResponseAssembler {
  readonly #ledger: SpeechLedger;
  readonly #o: ResponseAssemblerOptions;
  readonly #sink: ResponseSink;
  readonly #latency = { transcriptMs: new LatencySeries(), firstTextMs: new LatencySeries(), firstAudioMs: new LatencySeries(), doneMs: new LatencySeries() };
  #bytesReceived = 0;
  #sawStarting = false;
  /** An odd byte of output audio, waiting for the next piece. */
  #outputCarry: number | undefined;
  #textSoFar = '';

  constructor(ledger: SpeechLedger, options: ResponseAssemblerOptions, sink: ResponseSink) {
    this.#ledger = ledger;
    this.#o = options;
    this.#sink = sink;
  }

  /** Translated audio bytes received. */
  get bytesReceived(): number {
    return this.#bytesReceived;
  }

  /** Responses completed (the ledger counts them). */
  get responses(): number {
    return this.#ledger.responsesCompleted;
  }

  /** The service said `session.starting` on this connection (its model is still booting). */
  get sawStarting(): boolean {
    return this.#sawStarting;
  }

  /** From the end of the answered speech to each stage of a response, over all responses. */
  latency(): ResponseLatency {
    const l = this.#latency;
    return { transcriptMs: l.transcriptMs.summary(), firstTextMs: l.firstTextMs.summary(), firstAudioMs: l.firstAudioMs.summary(), doneMs: l.doneMs.summary() };
  }

  /** A message as an event; one that cannot be read is a `warning` (and undefined). */
  decode(data: Buffer, isBinary: boolean): ServerEvent | undefined {
    if (isBinary) return decodeBinaryAudio(data);
    const key = this.#o.secret;
    const text = data.toString('utf8');
    try {
      return decodeServerEvent(text, text.includes(key) ? (raw) => redactObject(raw, key, true) : undefined);
    } catch (error) {
      this.#sink.publish({ type: 'warning', warning: error as RtTranslateError });
      return undefined;
    }
  }

  handle(event: ServerEvent, now = Date.now()): void {
    const sink = this.#sink;
    const sent = this.#o.sent();
    switch (event.type) {
      case 'session.starting':
        this.#sawStarting = true;
        sink.starting();
        break;
      case 'session.created':
        sink.publish(event);
        sink.sessionCreated(event.session);
        return;
      case 'transcript.done':
        this.#ledger.responseActivity('transcript', now, sent);
        break;
      case 'text.delta':
        this.#ledger.responseActivity('text', now, sent);
        this.#textSoFar += event.delta;
        break;
      case 'text.done':
        event.text ??= this.#textSoFar;
        this.#textSoFar = '';
        break;
      case 'audio.delta': {
        const audio = this.#realign(event.audio);
        this.#ledger.responseActivity('audio', now, sent, audio.length);
        this.#bytesReceived += audio.length;
        // A new event only when realigning changed the audio (an odd byte carried): most deltas
        // are published as decoded, with no object built between the socket and push().
        sink.publish(audio === event.audio ? event : { ...event, audio });
        sink.audio(audio);
        sink.activity(now);
        return;
      }
      case 'audio.done':
        if (this.#outputCarry !== undefined) {
          this.#outputCarry = undefined;
          sink.publish({
            type: 'warning',
            warning: new ProtocolError('The service sent an odd number of audio bytes for one response; the last byte was dropped.'),
          });
        }
        break;
      case 'server.error':
        sink.publish(event);
        sink.serverError(event.message, event.code);
        return;
      default:
        break;
    }
    sink.publish(event);
    if (event.type === 'audio.done' || (event.type === 'text.done' && !this.#o.audioExpected)) this.#completeResponse(now);
    if (event.type === 'transcript.done' || event.type === 'text.delta' || event.type === 'text.done' || event.type === 'audio.done') {
      sink.activity(now);
    }
  }

  /** A new connection: what the last one said about booting no longer holds. */
  newConnection(): void {
    this.#sawStarting = false;
  }

  /** The session dropped: its open response is abandoned (a new session answers it again in full). */
  sessionLost(): void {
    this.#ledger.sessionLost();
    this.#outputCarry = undefined;
    this.#textSoFar = '';
  }

  #completeResponse(now: number): void {
    const timing = this.#ledger.responseCompleted(now, this.#o.audioExpected);
    if (!timing) return;
    for (const key of ['transcriptMs', 'firstTextMs', 'firstAudioMs', 'doneMs'] as const) this.#latency[key].add(timing[key]);
    this.#sink.publish({ type: 'response', timing });
    this.#sink.answered();
  }

  /** Carries an odd byte to the next audio, so the output is whole samples across deltas and frames. */
  #realign(audio: Buffer): Buffer {
    let data = audio;
    if (this.#outputCarry !== undefined) {
      data = Buffer.allocUnsafe(audio.length + 1);
      data[0] = this.#outputCarry;
      audio.copy(data, 1);
      this.#outputCarry = undefined;
    }
    if (data.length % 2 === 1) {
      this.#outputCarry = data[data.length - 1];
      data = data.subarray(0, data.length - 1);
    }
    return data;
  }
}
