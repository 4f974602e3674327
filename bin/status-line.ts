/**
 * What the realtime command says about a session while it runs: the progress as text (pure
 * functions of numbers, `progressText` and `summaryText`); `StatusLine`, a line on stderr that
 * is redrawn in place when stderr is a terminal, never wider than it (a wider line would wrap
 * and leave a copy behind at every redraw), around the permanent lines printed meanwhile; and
 * `SessionReport`, which wires a translator's events to both.
 */
import { Transform, type Writable } from 'node:stream';
import type { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';

/** Bytes per second of the service's PCM (16-bit mono 24 kHz). */
const SERVICE_BYTES_PER_SECOND = 48_000;

/** Where a session is. */
export type SessionPhase =
  /** Before the service has answered. */
  | 'connecting'
  /** The service said it is booting a model (a cold start). */
  | 'starting'
  /** Audio is being sent. */
  | 'translating'
  /** The input has ended; the last translations are awaited. */
  | 'finishing'
  /** Ctrl-C: the input was closed; the last translations are awaited. */
  | 'stopping';

export interface SessionProgress {
  phase: SessionPhase;
  /** Milliseconds since the phase began. */
  phaseMs: number;
  /** Bytes of service-format audio the command sent (the translator's own padding excluded). */
  sentBytes: number;
  /** Bytes of service-format audio the command received and wrote. */
  receivedBytes: number;
  /** Responses the service has started. */
  responses: number;
  /** No audio is asked for (`--text-only`). */
  textOnly: boolean;
}

function seconds(bytes: number): string {
  return `${(bytes / SERVICE_BYTES_PER_SECOND).toFixed(1)} s`;
}

function count(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** What came back: `received 1.2 s, 2 responses`, or `2 responses` for text only. */
function answers(p: SessionProgress): string {
  const responses = count(p.responses, 'response', 'responses');
  return p.textOnly ? responses : `received ${seconds(p.receivedBytes)}, ${responses}`;
}

/** The status line's text for `p`. */
export function progressText(p: SessionProgress): string {
  const waited = `${Math.floor(p.phaseMs / 1000)} s`;
  switch (p.phase) {
    case 'connecting':
      return `connecting: ${waited}`;
    case 'starting':
      return `the service is starting: ${waited}`;
    case 'translating':
      return `sent ${seconds(p.sentBytes)}, ${answers(p)}`;
    case 'finishing':
      return `input done: sent ${seconds(p.sentBytes)}; waiting for the last translations: ${answers(p)}, ${waited}`;
    case 'stopping':
      return `stopping (Ctrl-C again to abort): sent ${seconds(p.sentBytes)}; waiting for the last translations: ${answers(p)}, ${waited}`;
  }
}

/** The line printed when the session is over. */
export function summaryText(p: SessionProgress): string {
  const responses = count(p.responses, 'response', 'responses');
  const sent = `sent ${seconds(p.sentBytes)} of audio`;
  return p.textOnly ? `${sent}, ${responses} (text only).` : `${sent}, received ${seconds(p.receivedBytes)} in ${responses}.`;
}

/** Terminal width assumed when the stream does not say (no `columns`, or 0 as some terminals report). */
const DEFAULT_COLUMNS = 80;

/**
 * `text` cut to fit a terminal `columns` wide without wrapping (the last column stays free);
 * an unknown width (undefined or 0) counts as `DEFAULT_COLUMNS`.
 */
export function fitToWidth(text: string, columns: number | undefined): string {
  const room = Math.max((columns || DEFAULT_COLUMNS) - 1, 1);
  return text.length <= room ? text : `${text.slice(0, room - 1)}…`;
}

/**
 * A status line on `stream`: `show()` replaces it (on a terminal; elsewhere it is not drawn),
 * `print()` writes a permanent line above it, `clear()` removes it.
 */
export class StatusLine {
  readonly #stream: Writable & { isTTY?: boolean; columns?: number };
  #shown: string | undefined;

  constructor(stream: Writable & { isTTY?: boolean; columns?: number }) {
    this.#stream = stream;
  }

  /** True when the stream is a terminal, where the line is drawn. */
  get drawn(): boolean {
    return this.#stream.isTTY === true;
  }

  show(text: string): void {
    if (!this.drawn) return;
    this.#shown = fitToWidth(text, this.#stream.columns);
    this.#stream.write(`\r\x1b[K${this.#shown}`);
  }

  print(line: string): void {
    const shown = this.#shown;
    this.clear();
    this.#stream.write(`${line}\n`);
    if (shown !== undefined) {
      this.#shown = shown;
      this.#stream.write(`\r\x1b[K${shown}`);
    }
  }

  clear(): void {
    if (this.#shown === undefined) return;
    this.#shown = undefined;
    this.#stream.write('\r\x1b[K');
  }
}

/** How often the status line is redrawn between events, ms. */
const REDRAW_MS = 250;

/**
 * A session told on `stderr`: transcripts and translations, warnings and reconnects as lines; a
 * status line on a terminal; a summary at the end. `counter` goes between the input and the
 * translator: it counts what the command sends, and its end means the input is done.
 */
export class SessionReport {
  readonly counter: Transform;
  readonly #status: StatusLine;
  readonly #rt: RealtimeTranslateStream;
  readonly #progress: SessionProgress;
  readonly #ticker: NodeJS.Timeout | undefined;
  #phaseStart = performance.now();
  #started = false;

  constructor(rt: RealtimeTranslateStream, stderr: Writable & { isTTY?: boolean; columns?: number }, labels: { from: string; to: string; textOnly: boolean }) {
    this.#rt = rt;
    this.#status = new StatusLine(stderr);
    this.#progress = { phase: 'connecting', phaseMs: 0, sentBytes: 0, receivedBytes: 0, responses: 0, textOnly: labels.textOnly };
    const print = (line: string) => this.#status.print(line);
    rt.on('session.starting', () => {
      print('rt-translate: the service is starting (a cold start can take 30 to 90 s)...');
      this.#enter('starting');
    });
    rt.on('session.created', () => {
      this.#started = true;
      if (this.#progress.phase === 'connecting' || this.#progress.phase === 'starting') this.#enter('translating');
    });
    rt.on('transcript.done', (text) => print(`transcript (${labels.from}): ${text}`));
    rt.on('text.done', (text) => print(`translation (${labels.to}): ${text}`));
    rt.on('warning', (warning) => print(`rt-translate: warning: ${warning.message}`));
    rt.on('reconnecting', ({ attempt, delayMs, cause }) =>
      print(`rt-translate: connection lost (${cause.message.replace(/\.$/, '')}); reconnecting in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt})`),
    );
    rt.on('reconnected', ({ replayedMs, outageMs, notReplayedMs }) =>
      print(
        `rt-translate: reconnected after ${(outageMs / 1000).toFixed(1)} s; sent ${(replayedMs / 1000).toFixed(1)} s of unanswered audio again` +
          (notReplayedMs > 0 ? ` (${(notReplayedMs / 1000).toFixed(1)} s more was no longer kept and may be missing)` : ''),
      ),
    );
    const progress = this.#progress;
    const finishing = () => {
      if (progress.phase !== 'stopping') this.#enter('finishing');
    };
    this.counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        progress.sentBytes += chunk.length;
        callback(null, chunk);
      },
      flush(callback) {
        finishing();
        callback();
      },
    });
    this.#ticker = this.#status.drawn ? setInterval(() => this.#redraw(), REDRAW_MS) : undefined;
    this.#ticker?.unref();
    this.#redraw();
  }

  /** Service-format bytes of input sent so far. */
  get sentBytes(): number {
    return this.#progress.sentBytes;
  }

  /** Counts translated audio written out. */
  received(bytes: number): void {
    this.#progress.receivedBytes += bytes;
  }

  /** The first Ctrl-C: acknowledged at once. */
  stopping(): void {
    this.#status.print('rt-translate: stopping: the input is closed; waiting for the translation of what was sent (Ctrl-C again to abort).');
    this.#enter('stopping');
  }

  /** Ends the status line; returns the summary line once a session had started. */
  close(): string | undefined {
    if (this.#ticker) clearInterval(this.#ticker);
    this.#status.clear();
    this.#progress.responses = this.#rt.stats.responses;
    return this.#started ? `rt-translate: ${summaryText(this.#progress)}` : undefined;
  }

  #redraw(): void {
    this.#progress.phaseMs = performance.now() - this.#phaseStart;
    this.#progress.responses = this.#rt.stats.responses;
    this.#status.show(progressText(this.#progress));
  }

  #enter(phase: SessionPhase): void {
    this.#progress.phase = phase;
    this.#phaseStart = performance.now();
    this.#redraw();
  }
}
