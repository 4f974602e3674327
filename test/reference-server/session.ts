/**
 * One realtime connection of the reference server: the handshake events, the input audio and
 * the responses, per the service interface (`session.update` first, `session.created` and
 * `session.updated`, appends, errors) and the observed facts (transcript, text deltas, audio in
 * pieces of about 400 ms, then `response.text.done` and `response.audio.done` together).
 *
 * Answers come from the detector (detector.ts) through a policy (policy.ts), may be held by the
 * `last` option, and are sent one at a time, in order, by `sendQueued()`.
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { WebSocket, type RawData } from 'ws';
import { BYTES_PER_MS, SAMPLES_PER_MS, UtteranceDetector, type DetectorEvent } from './detector.js';
import type { ResolvedOptions } from './options.js';
import { Grouping, type Answer } from './policy.js';

const LANGUAGES = new Set(['ar-ae', 'ar-eg', 'ar-sa', 'de-de', 'en-gb', 'en-us', 'es-es', 'fr-ca', 'fr-fr', 'hi-in', 'ja-jp', 'ko-kr', 'pt-br', 'zh-cn']);
const MAX_EVENT_BYTES = 1024 * 1024;
const MAX_APPEND_BYTES = 256 * 1024;
const MIN_AUDIO_MS = 100;
const AMPLITUDE = 8000;

export interface ReferenceResponse {
  /** Session number (order of `session.created`, from 1). */
  session: number;
  /** Response number within its session, from 1. */
  index: number;
  transcript: string;
  /** The translated text sent ('' in an audio-only session). */
  text: string;
  /** The audio sent (empty in a text-only session). */
  audio: Buffer;
  /** Input offsets (bytes, session-local, end exclusive) of the speech it answers. */
  from: number;
  to: number;
  /** Date.now() when its first event was handed to the socket. */
  startedAt: number;
  /** Date.now() when its last event (text.done / audio.done) was handed to the socket. */
  doneAt: number;
}

/** What a session needs from its server. */
export interface SessionHost {
  readonly options: ResolvedOptions;
  /** Called when the session reaches `session.created`; returns its number. */
  register(): number;
  /** A response was fully sent. */
  record(response: ReferenceResponse): void;
  /** Something that `heldAnswers` counts may have changed. */
  changed(): void;
}

interface SessionConfig {
  source_language: string;
  target_language: string;
  output_modalities: Array<'text' | 'audio'>;
  voice: { type: 'default' } | { type: 'cloned'; voice_id: number };
}

interface Refusal {
  code: number;
  message: string;
}

type ClientEvent = Record<string, unknown> & { type: string };

export class Session {
  private state: 'waiting' | 'starting' | 'active' | 'over' = 'waiting';
  private number = 0;
  private config: SessionConfig | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly updateTimer: NodeJS.Timeout;
  private idleTimer: NodeJS.Timeout | undefined;
  private lateTimer: NodeJS.Timeout | undefined;
  private readonly detector: UtteranceDetector;
  private readonly grouping: Grouping;
  private inputBytes = 0;
  private readonly queue: Answer[] = [];
  private sending = false;
  private dropDue = false;
  private held: Answer[] = [];
  /** The idle made the held answers the last ones, and `last` is 'never'. */
  private heldAsLast = false;
  private responsesStarted = 0;
  /** Settles once the last frame handed to the socket has been written out. */
  private flushed: Promise<void> = Promise.resolve();

  constructor(
    private readonly ws: WebSocket,
    /** The connection under `ws`, for a cut that keeps what was sent. */
    private readonly socket: Duplex,
    private readonly host: SessionHost,
    /** The handshake carried the right `x-api-key` (a wrong one never gets here). */
    private readonly headerAuthorized: boolean,
    /** Query parameters echoed in `session.created`. */
    private readonly echo: { model?: string; mode?: string },
  ) {
    const o = host.options;
    this.detector = new UtteranceDetector(o);
    this.grouping = new Grouping(o.answer, o.mergeCount, o.splitMs * BYTES_PER_MS);
    this.updateTimer = this.later(o.sessionUpdateTimeoutMs, () => this.fail(408, `no session.update within ${o.sessionUpdateTimeoutMs} ms`));
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    // Pings are answered while the session lives: after a cut, a pong would be written to an
    // ended socket, an error that resets the connection and loses what the client had not read.
    ws.on('ping', (data) => {
      if (this.state !== 'over') ws.pong(data);
    });
    ws.on('close', () => this.end());
    ws.on('error', () => {}); // 'close' follows
  }

  /** Answers held and never sent: withheld as the last under `last: 'never'`, or left when the session ended. */
  get heldAnswers(): number {
    return this.state === 'over' || this.heldAsLast ? this.held.length : 0;
  }

  /** Stops everything this session does; the socket is the caller's. Idempotent. */
  end(): void {
    if (this.state === 'over') return;
    this.state = 'over';
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    clearTimeout(this.idleTimer);
    this.host.changed();
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.state === 'over' || isBinary) return; // binary client frames are not events
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (bytes.length > MAX_EVENT_BYTES) return this.error(413, `event of ${bytes.length} bytes is over the 1 MiB limit`);
    let event: unknown;
    try {
      event = JSON.parse(bytes.toString('utf8'));
    } catch {
      return this.error(400, 'event is not JSON');
    }
    if (!isObject(event) || typeof event.type !== 'string') return this.error(400, 'event has no type');
    this.handle(event as ClientEvent);
  }

  private handle(event: ClientEvent): void {
    if (this.state === 'waiting') {
      return event.type === 'session.update' ? this.start(event) : this.fail(400, `first event must be session.update, got ${event.type}`);
    }
    switch (event.type) {
      case 'input_audio_buffer.append':
        return this.append(event);
      case 'session.update': {
        const config = parseSession(event.session, this.host.options.clonedVoices);
        if ('code' in config) return this.error(config.code, config.message);
        this.config = config;
        if (this.state === 'active') this.send({ type: 'session.updated', session: config });
        return;
      }
      case 'input_audio_buffer.clear':
      case 'input_audio_buffer.commit':
      case 'response.cancel':
        return this.error(400, `${event.type} is not supported`);
      default:
        return this.error(400, `unknown event type ${event.type}`);
    }
  }

  private start(event: ClientEvent): void {
    this.cancel(this.updateTimer);
    const auth = event.auth;
    if (!this.headerAuthorized && !(isObject(auth) && auth.api_key === this.host.options.apiKey)) {
      return this.fail(401, 'missing or invalid API key');
    }
    const config = parseSession(event.session, this.host.options.clonedVoices);
    if ('code' in config) return this.fail(config.code, config.message);
    this.config = config;
    const coldStartMs = this.host.options.coldStartMs;
    if (coldStartMs <= 0) return this.activate();
    this.state = 'starting';
    this.send({ type: 'session.starting' });
    this.later(coldStartMs, () => this.activate());
  }

  private activate(): void {
    this.state = 'active';
    this.number = this.host.register();
    this.send({ type: 'session.created', session: { ...this.config, id: randomUUID(), ...this.echo } });
    this.send({ type: 'session.updated', session: this.config });
  }

  private append(event: ClientEvent): void {
    if (this.state !== 'active') return; // before session.created: discarded
    if (typeof event.audio !== 'string') return this.error(400, 'input_audio_buffer.append needs audio (base64)');
    const pcm = Buffer.from(event.audio, 'base64');
    if (pcm.length > MAX_APPEND_BYTES) return this.error(413, `append of ${pcm.length} bytes is over the 256 KiB limit`);
    if (this.idleTimer) this.idleTimer.refresh();
    else this.idleTimer = setTimeout(() => this.onIdle(), this.host.options.idleMs);
    this.inputBytes += pcm.length;
    for (const detected of this.detector.push(pcm)) this.onDetected(detected);
    this.checkDrop();
  }

  private onDetected(event: DetectorEvent): void {
    if (event.type === 'voiced') {
      if (this.held.length > 0) this.release(); // speech again: the held answers were not the last
      this.complete(this.grouping.voiced(event));
    } else {
      this.complete(this.grouping.ended(event));
    }
  }

  /** Appends paused for idleMs. */
  private onIdle(): void {
    if (this.state !== 'active') return;
    for (const detected of this.detector.flush()) this.onDetected(detected);
    this.complete(this.grouping.idle());
    if (this.held.length === 0) return;
    const last = this.host.options.last;
    if (last === 'never') {
      this.heldAsLast = true;
      this.host.changed();
    } else if (typeof last === 'object' && !this.lateTimer) {
      this.lateTimer = this.later(last.lateMs, () => this.release());
    }
  }

  private complete(answers: Answer[]): void {
    for (const answer of answers) {
      if (this.host.options.last === 'prompt') this.enqueue(answer);
      else this.held.push(answer);
    }
  }

  private release(): void {
    this.cancel(this.lateTimer);
    this.lateTimer = undefined;
    const answers = this.held;
    this.held = [];
    this.heldAsLast = false;
    for (const answer of answers) this.enqueue(answer);
    this.host.changed();
  }

  private enqueue(answer: Answer): void {
    this.queue.push(answer);
    if (!this.sending) void this.sendQueued();
  }

  /** Sends the queued answers one at a time; a due drop happens between two of them. */
  private async sendQueued(): Promise<void> {
    this.sending = true;
    for (let answer = this.queue.shift(); answer; answer = this.queue.shift()) {
      await this.sleep(this.host.options.answerDelayMs);
      if (!(await this.respond(answer))) return;
      if (this.dropDue) return this.cut();
    }
    this.sending = false;
  }

  /** Sends one response; false when the session ended meanwhile (nothing recorded). */
  private async respond(answer: Answer): Promise<boolean> {
    if (this.state !== 'active' || !this.config) return false;
    const o = this.host.options;
    const withText = this.config.output_modalities.includes('text');
    const withAudio = this.config.output_modalities.includes('audio');
    const index = ++this.responsesStarted;
    const voicedBytes = answer.reduce((sum, s) => sum + s.to - s.from, 0);
    const transcript = describe(answer, voicedBytes);
    const text = `[${this.config.target_language}] response ${index} of session ${this.number}`;
    const samples = Math.max(Math.round((o.audioRatio * voicedBytes) / 2), MIN_AUDIO_MS * SAMPLES_PER_MS);
    const audio = withAudio ? tone(samples, 300 + 40 * (index % 12)) : Buffer.alloc(0);
    const startedAt = Date.now();
    this.send({ type: 'conversation.item.input_audio_transcription.completed', transcript });
    if (withText) for (const delta of words(text)) this.send({ type: 'response.text.delta', delta });
    const pieces = cutPieces(audio, Math.round(o.pieceMs * SAMPLES_PER_MS) * 2, o.audio === 'binary');
    for (const [i, piece] of pieces.entries()) {
      if (i > 0 && o.pieceGapMs > 0) {
        await this.sleep(o.pieceGapMs);
        if (this.state !== 'active') return false;
      }
      if (o.audio === 'binary') this.write(piece);
      else this.send({ type: 'response.audio.delta', delta: piece.toString('base64') });
    }
    if (withText) this.send({ type: 'response.text.done', text });
    if (withAudio) this.send({ type: 'response.audio.done' });
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    const first = answer[0];
    const last = answer[answer.length - 1];
    this.host.record({
      session: this.number,
      index,
      transcript,
      text: withText ? text : '',
      audio,
      from: first?.from ?? 0,
      to: last?.to ?? 0,
      startedAt,
      doneAt: Date.now(),
    });
    return true;
  }

  private checkDrop(): void {
    const { dropAfterInputMs, drops } = this.host.options;
    if (dropAfterInputMs === undefined || this.dropDue || this.number > drops) return;
    if (this.inputBytes < dropAfterInputMs * BYTES_PER_MS) return;
    this.dropDue = true;
    if (!this.sending) void this.cut();
  }

  /**
   * Ends the connection without a close frame (the client sees 1006), once what was sent is out:
   * reading stops and the socket is ended (FIN), so everything sent still reaches the client,
   * as when a server goes away cleanly in the middle of a session.
   */
  private async cut(): Promise<void> {
    this.end();
    this.socket.pause();
    await this.flushed;
    this.socket.end();
  }

  private error(code: number, message: string): void {
    this.send({ type: 'error', error: { message, code } });
  }

  private fail(code: number, message: string): void {
    this.error(code, message);
    this.end();
    this.ws.close(1008, Buffer.byteLength(message) <= 123 ? message : 'policy violation');
  }

  private send(event: Record<string, unknown>): void {
    this.write(JSON.stringify(event));
  }

  private write(data: string | Buffer): void {
    this.flushed = new Promise((resolve) => this.ws.send(data, () => resolve()));
  }

  private later(ms: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  private cancel(timer: NodeJS.Timeout | undefined): void {
    if (!timer) return;
    clearTimeout(timer);
    this.timers.delete(timer);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.later(ms, resolve));
  }
}

/** The `session` of a `session.update`, checked and normalized, or why it is refused. */
function parseSession(session: unknown, clonedVoices: readonly number[]): SessionConfig | Refusal {
  if (!isObject(session)) return { code: 400, message: 'session.update needs a session object' };
  const from = session.source_language;
  const to = session.target_language;
  if (typeof from !== 'string' || !LANGUAGES.has(from.toLowerCase())) return { code: 400, message: `unsupported source_language ${String(from)}` };
  if (typeof to !== 'string' || !LANGUAGES.has(to.toLowerCase())) return { code: 400, message: `unsupported target_language ${String(to)}` };
  const modalities = session.output_modalities ?? ['text', 'audio'];
  if (!Array.isArray(modalities) || modalities.length === 0 || !modalities.every((m) => m === 'text' || m === 'audio')) {
    return { code: 400, message: 'output_modalities must be a non-empty list of text and audio' };
  }
  const voice = session.voice ?? { type: 'default' };
  let resolved: SessionConfig['voice'];
  if (isObject(voice) && voice.type === 'default') {
    resolved = { type: 'default' };
  } else if (isObject(voice) && voice.type === 'cloned' && Number.isInteger(voice.voice_id)) {
    const id = voice.voice_id as number;
    if (!clonedVoices.includes(id)) return { code: 403, message: `voice ${id} is not a cloned voice of this account` };
    resolved = { type: 'cloned', voice_id: id };
  } else {
    return { code: 400, message: "voice must be {type: 'default'} or {type: 'cloned', voice_id}" };
  }
  return {
    source_language: from.toLowerCase(),
    target_language: to.toLowerCase(),
    output_modalities: [...new Set(modalities as Array<'text' | 'audio'>)],
    voice: resolved,
  };
}

/** "utterance 3 (1.20 s)", "utterance 3, part 1 (0.70 s)", "utterances 1-2 (1.84 s)". */
function describe(answer: Answer, voicedBytes: number): string {
  const first = answer[0]?.utterance;
  const last = answer[answer.length - 1]?.utterance;
  const which = first === last ? `utterance ${first}` : `utterances ${first}-${last}`;
  const part = answer.length === 1 && answer[0]?.part ? `, part ${answer[0].part}` : '';
  return `${which}${part} (${(voicedBytes / BYTES_PER_MS / 1000).toFixed(2)} s)`;
}

/** The text as additive deltas, a word each. */
function words(text: string): string[] {
  return text.split(' ').map((word, i) => (i === 0 ? word : ` ${word}`));
}

/** A sine of `hz` at amplitude 8000, PCM16 LE. */
function tone(samples: number, hz: number): Buffer {
  const out = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(AMPLITUDE * Math.sin((2 * Math.PI * hz * i) / (SAMPLES_PER_MS * 1000))), i * 2);
  return out;
}

/**
 * Pieces of `size` bytes. With `oddFirst` and more than one piece, the first piece takes one
 * byte more, so the first two are odd-sized (a sample split across frames) and the total stays even.
 */
function cutPieces(audio: Buffer, size: number, oddFirst: boolean): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < audio.length;) {
    let end = Math.min(audio.length, at + size);
    if (oddFirst && at === 0 && end < audio.length) end += 1;
    pieces.push(audio.subarray(at, end));
    at = end;
  }
  return pieces;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
