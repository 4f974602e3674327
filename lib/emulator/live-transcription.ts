/**
 * The emulator's live transcription endpoint, `{realtime_url}/streaming-transcription/listen`
 * (wire format: `lib/realtime/transcription-codec.ts`). The `x-api-key` header is checked at the
 * handshake (401 when missing or unknown); the query's parameters once open (an `Error`, then
 * close 1008, for a bad one, a language it does not list as a source language, or audio the
 * emulator cannot convert: `linear16`, `linear32`, `mulaw`, `alaw` at 8, 16, 22.05, 24, 44.1 or
 * 48 kHz, 1 or 2 channels).
 *
 * After `Ready`, binary frames are audio: converted to PCM16 mono 24 kHz and split into
 * utterances by voice activity (20 ms frames, -40 dBFS, 600 ms of silence ends one). Each
 * utterance is answered with an interim `Results` (its first words) and a final one (every word,
 * timed in seconds since the session began). A known recording's utterances get their real
 * sentences; others are "Speech segment N.". `KeepAlive` keeps an idle session open;
 * `CloseStream` closes the utterance in progress, sends its results and closes (1000). A
 * session that gets neither audio nor `KeepAlive` for `liveIdleTimeoutMs` gets an `Error` and is
 * closed (1008).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { SERVICE_FORMAT, SUPPORTED_RATES, type SampleFormat } from '../audio/audio-format.js';
import { planConversion } from '../audio/convert.js';
import type { AudioProcessor } from '../audio/processor.js';
import { ValidationError } from '../errors.js';
import {
  decodeLiveClientMessage,
  encodeLiveError,
  encodeReady,
  encodeResults,
  parseLiveQuery,
  type LiveTranscriptionParams,
} from '../realtime/transcription-codec.js';
import { refuseUpgrade } from '../realtime/handshake-refusal.js';
import type { EmulatorContext } from './context.js';
import { SOURCE_LANGUAGES } from './languages.js';
import { TRANSCRIPTION_SEGMENTER, knownUtteranceText, wordTimings } from './transcripts.js';
import { UtteranceSegmenter, type SegmentedUtterance } from './vad.js';

export interface LiveTranscriptionEmulatorOptions {
  /** A session with no audio and no `KeepAlive` for this long is closed, ms. Default 10000. */
  liveIdleTimeoutMs?: number;
}

/** Close code of a session the emulator ends for a fault of the client. */
const POLICY_CLOSE = 1008;
const BYTES_PER_SECOND = 48_000;

/** linear32 (signed 32-bit little-endian) to s16le, keeping the high 16 bits; samples may be cut between chunks. */
class Linear32ToS16 implements AudioProcessor {
  #carry = Buffer.alloc(0);
  process(chunk: Buffer): Buffer {
    const input = this.#carry.length > 0 ? Buffer.concat([this.#carry, chunk]) : chunk;
    const samples = input.length >> 2;
    const out = Buffer.allocUnsafe(samples * 2);
    for (let i = 0; i < samples; i++) out.writeInt16LE(input.readInt32LE(i * 4) >> 16, i * 2);
    this.#carry = Buffer.from(input.subarray(samples * 4));
    return out;
  }
  flush(): Buffer {
    return Buffer.alloc(0);
  }
}

/** A converter of the session's audio to PCM16 mono 24 kHz, or why the emulator cannot make one. */
function converterFor(params: LiveTranscriptionParams): AudioProcessor | string {
  if (!(SUPPORTED_RATES as readonly number[]).includes(params.sampleRate)) {
    return `the emulator converts ${SUPPORTED_RATES.join(', ')} Hz (got ${params.sampleRate})`;
  }
  if (params.channels !== 1 && params.channels !== 2) return `the emulator converts 1 or 2 channels (got ${params.channels})`;
  const format: SampleFormat = params.encoding === 'mulaw' || params.encoding === 'alaw' ? params.encoding : 's16le';
  const plan = planConversion({ format, rate: params.sampleRate, channels: params.channels }, SERVICE_FORMAT);
  if (params.encoding !== 'linear32') return plan.processor;
  const first = new Linear32ToS16();
  return { process: (chunk) => plan.processor.process(first.process(chunk)), flush: () => plan.processor.flush() };
}

const SOURCE_TAGS: ReadonlySet<string> = new Set(SOURCE_LANGUAGES.map((l) => l.short_name));

/** Why the emulator does not transcribe `language` (a tag it does not list as a source language), or undefined. */
function unsupportedLanguage(language: string): string | undefined {
  return SOURCE_TAGS.has(language)
    ? undefined
    : `Unsupported language ${JSON.stringify(language)}: see GET /source-languages for the languages it transcribes.`;
}

class LiveSession {
  readonly #requestId = randomUUID();
  readonly #segmenter = new UtteranceSegmenter(TRANSCRIPTION_SEGMENTER);
  #idle: NodeJS.Timeout | undefined;
  #ended = false;
  readonly #ws: WebSocket;
  readonly #params: LiveTranscriptionParams;
  readonly #convert: AudioProcessor;
  readonly #idleMs: number;

  constructor(ws: WebSocket, params: LiveTranscriptionParams, convert: AudioProcessor, idleMs: number) {
    this.#ws = ws;
    this.#params = params;
    this.#convert = convert;
    this.#idleMs = idleMs;
    ws.on('message', (data, isBinary) => this.#onMessage(data, isBinary));
    ws.on('close', () => this.#stop());
    ws.on('error', () => this.#stop());
    ws.send(encodeReady(this.#requestId));
    this.#armIdle();
  }

  #armIdle(): void {
    if (this.#idle) clearTimeout(this.#idle);
    if (this.#idleMs <= 0) return;
    this.#idle = setTimeout(() => {
      this.#fail('IDLE_TIMEOUT', `No audio and no KeepAlive for ${this.#idleMs} ms: send KeepAlive while the speaker is silent.`);
    }, this.#idleMs);
  }

  #stop(): void {
    this.#ended = true;
    if (this.#idle) clearTimeout(this.#idle);
    this.#idle = undefined;
  }

  #fail(code: string, message: string): void {
    if (this.#ended) return;
    this.#stop();
    this.#ws.send(encodeLiveError(code, message), () => this.#ws.close(POLICY_CLOSE, code));
  }

  #onMessage(data: RawData, isBinary: boolean): void {
    if (this.#ended) return;
    this.#armIdle();
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (isBinary) {
      for (const utterance of this.#segmenter.push(this.#convert.process(bytes))) this.#answer(utterance);
      return;
    }
    let message;
    try {
      message = decodeLiveClientMessage(bytes.toString('utf8'));
    } catch (error) {
      this.#ws.send(encodeLiveError('INVALID_MESSAGE', (error as Error).message));
      return;
    }
    if (message.type === 'CloseStream') this.#closeStream();
    else if (message.type === 'unknown')
      this.#ws.send(encodeLiveError('UNKNOWN_MESSAGE', `Unknown message type ${JSON.stringify(message.wireType)}: send KeepAlive or CloseStream.`));
  }

  /** Ends the utterance in progress (trailing silence), answers it, and closes. */
  #closeStream(): void {
    const tail = this.#convert.flush();
    const silence = Buffer.alloc(BYTES_PER_SECOND); // longer than the 600 ms that end an utterance
    for (const utterance of [...this.#segmenter.push(tail), ...this.#segmenter.push(silence)]) this.#answer(utterance);
    this.#stop();
    this.#ws.close(1000, 'CloseStream');
  }

  /** An interim result with the first words, then the final result. */
  #answer(utterance: SegmentedUtterance): void {
    const text = knownUtteranceText(utterance.audio) ?? `Speech segment ${utterance.index}.`;
    const startMs = (utterance.voicedStart / BYTES_PER_SECOND) * 1000;
    const endMs = (utterance.voicedEnd / BYTES_PER_SECOND) * 1000;
    const words = wordTimings(text, startMs, endMs).map((w) => ({ ...w, start: w.start / 1000, end: w.end / 1000 }));
    const interim = words.slice(0, Math.max(1, Math.floor(words.length / 2)));
    const base = { start: startMs / 1000, requestId: this.#requestId, model: this.#params.model };
    const confidence = (list: typeof words): number => Number((list.reduce((a, w) => a + w.confidence, 0) / list.length).toFixed(3));
    this.#ws.send(
      encodeResults({
        ...base,
        isFinal: false,
        duration: interim.at(-1)!.end - base.start,
        transcript: interim.map((w) => w.word).join(' '),
        confidence: confidence(interim),
        words: interim,
      }),
    );
    this.#ws.send(encodeResults({ ...base, isFinal: true, duration: (endMs - startMs) / 1000, transcript: text, confidence: confidence(words), words }));
  }

  terminate(): void {
    this.#stop();
    this.#ws.terminate();
  }
}

export interface LiveTranscriptionPart {
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): Promise<void>;
}

/** The live transcription part of the emulator; `handleUpgrade` takes upgrades already routed to its path. */
export function createLiveTranscriptionEmulator(options: LiveTranscriptionEmulatorOptions, context: EmulatorContext): LiveTranscriptionPart {
  const idleMs = options.liveIdleTimeoutMs ?? 10_000;
  if (typeof idleMs !== 'number' || !Number.isFinite(idleMs) || idleMs < 0) {
    throw new ValidationError('liveIdleTimeoutMs', 'a number of milliseconds, 0 or more', String(idleMs));
  }
  const wss = new WebSocketServer({ noServer: true, clientTracking: false, maxPayload: 16 * 1024 * 1024 });
  const sessions = new Set<LiveSession>();
  let closing = false;
  return {
    handleUpgrade(req, socket, head) {
      if (closing) return refuseUpgrade(socket, 503, 'The emulator is shutting down.');
      const header = req.headers['x-api-key'];
      const key = Array.isArray(header) ? header[0] : header;
      if (key === undefined || !context.apiKeys.has(key)) {
        return refuseUpgrade(socket, 401, key === undefined ? 'Missing API key: send it in the x-api-key header.' : 'Invalid API key in the x-api-key header.');
      }
      const query = parseLiveQuery(new URL(req.url ?? '/', 'http://emulator').searchParams);
      wss.handleUpgrade(req, socket, head, (ws) => {
        if (closing) return void ws.terminate();
        const problem = 'error' in query ? query.error.message : unsupportedLanguage(query.params.language);
        const convert = 'params' in query ? converterFor(query.params) : undefined;
        if (problem !== undefined || typeof convert === 'string') {
          ws.send(encodeLiveError('INVALID_PARAMETERS', problem ?? `Unsupported audio: ${convert as string}.`), () =>
            ws.close(POLICY_CLOSE, 'INVALID_PARAMETERS'),
          );
          return;
        }
        const session = new LiveSession(ws, (query as { params: LiveTranscriptionParams }).params, convert!, idleMs);
        sessions.add(session);
        ws.once('close', () => sessions.delete(session));
      });
    },
    async close() {
      closing = true;
      for (const session of sessions) session.terminate();
      sessions.clear();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
