/**
 * What the realtime command says about a session while it runs: the progress as text (pure
 * functions of numbers, `progressText` and `summaryText`), and `StatusLine`, a line on stderr
 * that is redrawn in place when stderr is a terminal, never wider than it (a wider line would
 * wrap and leave a copy behind at every redraw), around the permanent lines printed meanwhile.
 */
import type { Writable } from 'node:stream';

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

/** `text` cut to fit a terminal `columns` wide without wrapping (the last column stays free). */
export function fitToWidth(text: string, columns: number): string {
  const room = Math.max(columns - 1, 1);
  return text.length <= room ? text : `${text.slice(0, room - 1)}…`;
}

/** Terminal width assumed when the stream does not say. */
const DEFAULT_COLUMNS = 80;

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
    this.#shown = fitToWidth(text, this.#stream.columns ?? DEFAULT_COLUMNS);
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
