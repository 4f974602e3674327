/**
 * Progress on stderr, for every command that runs long: `LiveStatus`, one line kept up to date
 * while the command waits or transfers, redrawn in place on a terminal and never wider than it
 * (a wider line would wrap and leave a copy behind at every redraw), printed as plain lines at a
 * bounded rate elsewhere when asked for (`--progress`), silent with `--no-progress`; permanent
 * lines printed around it. The realtime command's session (`SessionReport`: its progress as
 * text, pure functions of numbers, `progressText` and `summaryText`) and the HTTP commands'
 * waits, uploads and downloads (`progress-text.ts`) both draw through it (the latter's texts are in `commands/transfers.ts`).
 */
import { Transform, type Writable } from 'node:stream';
import type { RealtimeTranslateStream, ReconnectedInfo, ReconnectingInfo } from '../lib/index.js';
import { UsageError } from './cli.js';

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
 * How progress is shown: `redraw`, one line replaced in place (a terminal); `lines`, plain
 * lines at a bounded rate (`--progress` where stderr is not a terminal: a log, a pipe); `off`.
 */
export type ProgressMode = 'redraw' | 'lines' | 'off';

/** The progress flags (`parseArgs` form), taken by every command that can run long. */
export const PROGRESS_OPTIONS = {
  progress: { type: 'boolean' },
  'no-progress': { type: 'boolean' },
} as const;

/** How often a plain progress line is printed (`lines` mode), ms. */
export const PROGRESS_LINE_MS = 5_000;

export const PROGRESS_USAGE = `  --progress            progress on stderr even when it is not a terminal: a plain line when
                        a step starts and every ${PROGRESS_LINE_MS / 1000} s (on a terminal, one line redrawn in place
                        is the default)
  --no-progress         no progress line, not even on a terminal`;

/** The stream progress is written to: stderr, which may be a terminal `columns` wide. */
export type ProgressStream = Writable & { isTTY?: boolean; columns?: number };

/**
 * The mode the progress flags ask for on `stream`: on a terminal a redrawn line unless
 * `--no-progress`; elsewhere nothing unless `--progress`. Both flags at once are a usage error.
 */
export function progressMode(values: { progress?: boolean; 'no-progress'?: boolean }, stream: ProgressStream): ProgressMode {
  if (values.progress === true && values['no-progress'] === true) throw new UsageError('give --progress or --no-progress, not both.');
  if (values['no-progress'] === true) return 'off';
  if (stream.isTTY === true) return 'redraw';
  return values.progress === true ? 'lines' : 'off';
}

/**
 * A status line on `stream`: `show()` replaces it (redrawn in place in `redraw` mode, a line of
 * its own in `lines` mode, nothing when `off`), `print()` writes a permanent line above it,
 * `clear()` removes it. The mode defaults to a redrawn line on a terminal and nothing elsewhere.
 */
export class StatusLine {
  readonly #stream: ProgressStream;
  readonly mode: ProgressMode;
  #shown: string | undefined;

  constructor(stream: ProgressStream, mode: ProgressMode = stream.isTTY === true ? 'redraw' : 'off') {
    this.#stream = stream;
    this.mode = mode;
  }

  /** True when progress is shown at all. */
  get drawn(): boolean {
    return this.mode !== 'off';
  }

  show(text: string): void {
    if (this.mode === 'lines') this.#stream.write(`${text}\n`);
    if (this.mode !== 'redraw') return;
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

/** How often the line is redrawn on a terminal between changes, ms. */
const REDRAW_MS = 250;

/**
 * One progress line kept up to date: `show(render)` starts a step (its text drawn at once, in
 * every mode), and `render()` is asked again every 250 ms on a terminal, every
 * `PROGRESS_LINE_MS` as plain lines; `refresh()` says something changed (redrawn at once on a
 * terminal; plain lines wait for their next turn, so their rate stays bounded). `print()` adds a
 * permanent line; `stop()` ends the step, clears the line and stops the ticker.
 */
export class LiveStatus {
  readonly #line: StatusLine;
  #render: (() => string) | undefined;
  #ticker: NodeJS.Timeout | undefined;

  constructor(stream: ProgressStream, mode?: ProgressMode) {
    this.#line = new StatusLine(stream, mode);
  }

  get mode(): ProgressMode {
    return this.#line.mode;
  }

  /** Starts a step whose line reads `render()`. */
  show(render: () => string): void {
    this.#render = render;
    if (!this.#line.drawn) return;
    this.#draw();
    // A new step restarts the clock: a plain line never follows another by less than the interval.
    if (this.#ticker) clearInterval(this.#ticker);
    this.#ticker = setInterval(() => this.#draw(), this.mode === 'redraw' ? REDRAW_MS : PROGRESS_LINE_MS);
    this.#ticker.unref();
  }

  /** The step's numbers changed. */
  refresh(): void {
    if (this.mode === 'redraw') this.#draw();
  }

  /** A permanent line (the live line is redrawn below it on a terminal). */
  print(line: string): void {
    this.#line.print(line);
  }

  /** Ends the step; `summary`, when given, is printed as a permanent line where progress is shown. */
  stop(summary?: string): void {
    if (this.#ticker) clearInterval(this.#ticker);
    this.#ticker = undefined;
    this.#render = undefined;
    this.#line.clear();
    if (summary !== undefined && this.#line.drawn) this.#line.print(summary);
  }

  #draw(): void {
    if (this.#render) this.#line.show(this.#render());
  }
}

/** The line a realtime command prints when the service says it is booting a model. */
export const STARTING_NOTICE = 'rt-translate: the service is starting (a cold start can take 30 to 90 s)...';

/** The line a realtime command prints at the first Ctrl-C. */
export const STOPPING_NOTICE = 'rt-translate: stopping: the input is closed; waiting for the translation of what was sent (Ctrl-C again to abort).';

/** A dropped connection, as a realtime command says it (after `rt-translate: ` and the language, if any). */
export function reconnectingText({ attempt, delayMs, cause }: ReconnectingInfo): string {
  return `connection lost (${cause.message.replace(/\.$/, '')}); reconnecting in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt})`;
}

/** A new session after a drop, as a realtime command says it. */
export function reconnectedText({ replayedMs, outageMs, notReplayedMs }: ReconnectedInfo): string {
  return (
    `reconnected after ${(outageMs / 1000).toFixed(1)} s; sent ${(replayedMs / 1000).toFixed(1)} s of unanswered audio again` +
    (notReplayedMs > 0 ? ` (${(notReplayedMs / 1000).toFixed(1)} s more was no longer kept and may be missing)` : '')
  );
}

/** Between the input and the translator: counts what goes through into `progress`; `ended()` once the input ends. */
export function inputCounter(progress: { sentBytes: number }, ended: () => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      progress.sentBytes += chunk.length;
      callback(null, chunk);
    },
    flush(callback) {
      ended();
      callback();
    },
  });
}

/**
 * A session told on `stderr`: transcripts and translations, warnings and reconnects as lines; a
 * progress line (`mode`: by default redrawn on a terminal, nothing elsewhere); a summary at the
 * end. `counter` goes between the input and the translator: it counts what the command sends,
 * and its end means the input is done.
 */
export class SessionReport {
  readonly counter: Transform;
  readonly #status: LiveStatus;
  readonly #rt: RealtimeTranslateStream;
  readonly #progress: SessionProgress;
  #phaseStart = performance.now();
  #started = false;

  constructor(rt: RealtimeTranslateStream, stderr: ProgressStream, labels: { from: string; to: string; textOnly: boolean }, mode?: ProgressMode) {
    this.#rt = rt;
    this.#status = new LiveStatus(stderr, mode);
    this.#progress = { phase: 'connecting', phaseMs: 0, sentBytes: 0, receivedBytes: 0, responses: 0, textOnly: labels.textOnly };
    const print = (line: string) => this.#status.print(line);
    rt.on('session.starting', () => {
      print(STARTING_NOTICE);
      this.#enter('starting');
    });
    rt.on('session.created', () => {
      this.#started = true;
      if (this.#progress.phase === 'connecting' || this.#progress.phase === 'starting') this.#enter('translating');
    });
    rt.on('transcript.done', (text) => print(`transcript (${labels.from}): ${text}`));
    rt.on('text.done', (text) => print(`translation (${labels.to}): ${text}`));
    rt.on('warning', (warning) => print(`rt-translate: warning: ${warning.message}`));
    rt.on('reconnecting', (info) => print(`rt-translate: ${reconnectingText(info)}`));
    rt.on('reconnected', (info) => print(`rt-translate: ${reconnectedText(info)}`));
    this.counter = inputCounter(this.#progress, () => {
      if (this.#progress.phase !== 'stopping') this.#enter('finishing');
    });
    this.#status.show(() => this.#text());
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
    this.#status.print(STOPPING_NOTICE);
    this.#enter('stopping');
  }

  /** Ends the status line; returns the summary line once a session had started. */
  close(): string | undefined {
    this.#status.stop();
    this.#progress.responses = this.#rt.stats.responses;
    return this.#started ? `rt-translate: ${summaryText(this.#progress)}` : undefined;
  }

  #text(): string {
    this.#progress.phaseMs = performance.now() - this.#phaseStart;
    this.#progress.responses = this.#rt.stats.responses;
    return progressText(this.#progress);
  }

  /** A new phase: its line is shown at once, in every mode. */
  #enter(phase: SessionPhase): void {
    this.#progress.phase = phase;
    this.#phaseStart = performance.now();
    this.#status.show(() => this.#text());
  }
}
