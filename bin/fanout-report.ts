/**
 * The realtime command's stderr with several target languages (`FanoutReport`): the speaker's
 * transcripts once, each language's translations, warnings and reconnects named by language, a
 * target that stops named at once, a progress line with every language's count (`LiveStatus`),
 * and a summary. Its texts are pure functions of numbers (`fanoutProgressText`,
 * `fanoutSummaryText`), as the one-language report's are (`status-line.ts`).
 */
import type { Transform } from 'node:stream';
import type { FanoutEvent, FanoutOutcome, RealtimeFanout } from '../lib/index.js';
import {
  LiveStatus,
  STARTING_NOTICE,
  STOPPING_NOTICE,
  inputCounter,
  reconnectedText,
  reconnectingText,
  type ProgressMode,
  type ProgressStream,
  type SessionPhase,
} from './status-line.js';

/** Bytes per second of the service's PCM (16-bit mono 24 kHz). */
const SERVICE_BYTES_PER_SECOND = 48_000;

export interface TargetProgress {
  lang: string;
  /** Translated audio written, in bytes. */
  receivedBytes: number;
  responses: number;
  /** Once the target is over. */
  outcome: FanoutOutcome | undefined;
}

export interface FanoutProgress {
  phase: SessionPhase;
  /** Milliseconds since the phase began. */
  phaseMs: number;
  /** Service-format audio the command sent, in bytes. */
  sentBytes: number;
  /** In the order of `--to`. */
  targets: TargetProgress[];
  textOnly: boolean;
}

function seconds(bytes: number): string {
  return `${(bytes / SERVICE_BYTES_PER_SECOND).toFixed(1)} s`;
}

function count(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** One language in the progress line: `es-es 1.2 s`, `es-es 2 responses` (text only), `de-de failed`. */
function targetText(t: TargetProgress, textOnly: boolean): string {
  if (t.outcome === 'failed' || t.outcome === 'removed') return `${t.lang} ${t.outcome}`;
  return `${t.lang} ${textOnly ? count(t.responses, 'response', 'responses') : seconds(t.receivedBytes)}`;
}

/** The status line's text for `p`. */
export function fanoutProgressText(p: FanoutProgress): string {
  const waited = `${Math.floor(p.phaseMs / 1000)} s`;
  const targets = p.targets.map((t) => targetText(t, p.textOnly)).join(', ');
  switch (p.phase) {
    case 'connecting':
      return `connecting ${count(p.targets.length, 'session', 'sessions')}: ${waited}`;
    case 'starting':
      return `the service is starting: ${waited}`;
    case 'translating':
      return `sent ${seconds(p.sentBytes)}; ${targets}`;
    case 'finishing':
      return `input done: sent ${seconds(p.sentBytes)}; waiting for the last translations: ${targets}, ${waited}`;
    case 'stopping':
      return `stopping (Ctrl-C again to abort): sent ${seconds(p.sentBytes)}; waiting for the last translations: ${targets}, ${waited}`;
  }
}

/** The line printed when the sessions are over. */
export function fanoutSummaryText(p: FanoutProgress): string {
  const targets = p.targets.map((t) => {
    const responses = count(t.responses, 'response', 'responses');
    const got = p.textOnly ? responses : `received ${seconds(t.receivedBytes)} in ${responses}`;
    return t.outcome === 'complete' || t.outcome === undefined ? `${t.lang} ${got}` : `${t.lang} ${got} (${t.outcome})`;
  });
  return `sent ${seconds(p.sentBytes)} of audio; ${targets.join('; ')}.`;
}

/**
 * A fan-out told on `stderr`. `counter` goes between the input and the fan-out: it counts what
 * the command sends, and its end means the input is done.
 */
export class FanoutReport {
  readonly counter: Transform;
  readonly #status: LiveStatus;
  readonly #fan: RealtimeFanout;
  readonly #progress: FanoutProgress;
  #phaseStart = performance.now();
  #started = false;
  #starting = false;

  constructor(fan: RealtimeFanout, langs: readonly string[], stderr: ProgressStream, labels: { from: string; textOnly: boolean }, mode?: ProgressMode) {
    this.#fan = fan;
    this.#status = new LiveStatus(stderr, mode);
    const targets: TargetProgress[] = langs.map((lang) => ({ lang, receivedBytes: 0, responses: 0, outcome: undefined }));
    this.#progress = { phase: 'connecting', phaseMs: 0, sentBytes: 0, targets, textOnly: labels.textOnly };
    const print = (line: string) => this.#status.print(line);
    const target = (lang: string | undefined) => targets.find((t) => t.lang === lang);
    // The speaker's words once: from the first language whose session still runs.
    const transcribing = () => targets.find((t) => t.outcome !== 'failed' && t.outcome !== 'removed')?.lang;
    fan.on('event', (event: FanoutEvent) => {
      const lang = event.lang;
      switch (event.type) {
        case 'session.starting':
          if (this.#starting || this.#started) return;
          this.#starting = true;
          print(STARTING_NOTICE);
          this.#enter('starting');
          return;
        case 'session.created':
          this.#started = true;
          if (this.#progress.phase === 'connecting' || this.#progress.phase === 'starting') this.#enter('translating');
          return;
        case 'transcript.done':
          if (lang === transcribing()) print(`transcript (${labels.from}): ${event.text}`);
          return;
        case 'text.done':
          print(`translation (${lang}): ${event.text ?? ''}`);
          return;
        case 'response': {
          const t = target(lang);
          if (t) t.responses++;
          this.#status.refresh();
          return;
        }
        case 'warning':
          print(`rt-translate: warning${lang === undefined ? '' : ` (${lang})`}: ${event.warning.message}`);
          return;
        case 'reconnecting':
          print(`rt-translate: ${lang}: ${reconnectingText(event)}`);
          return;
        case 'reconnected':
          print(`rt-translate: ${lang}: ${reconnectedText(event)}`);
          return;
        case 'target.done': {
          const t = target(lang);
          if (t) t.outcome = event.outcome;
          if (event.outcome === 'failed' && event.error) {
            print(`rt-translate: ${lang} stopped: ${event.error.message.replace(/\.$/, '')} [${event.error.code}]; the other languages go on.`);
          }
          this.#status.refresh();
          return;
        }
        default:
          return;
      }
    });
    this.counter = inputCounter(this.#progress, () => {
      if (this.#progress.phase !== 'stopping') this.#enter('finishing');
    });
    this.#status.show(() => this.#text());
  }

  /** Service-format bytes of input sent so far. */
  get sentBytes(): number {
    return this.#progress.sentBytes;
  }

  /** Counts translated audio of `lang` written out. */
  received(lang: string, bytes: number): void {
    const t = this.#progress.targets.find((target) => target.lang === lang);
    if (t) t.receivedBytes += bytes;
  }

  /** The first Ctrl-C: acknowledged at once. */
  stopping(): void {
    this.#status.print(STOPPING_NOTICE);
    this.#enter('stopping');
  }

  /** Ends the status line; returns the summary line once a session had started. */
  close(): string | undefined {
    this.#status.stop();
    for (const t of this.#progress.targets) t.outcome = this.#fan.target(t.lang)?.outcome ?? t.outcome;
    return this.#started ? `rt-translate: ${fanoutSummaryText(this.#progress)}` : undefined;
  }

  #text(): string {
    this.#progress.phaseMs = performance.now() - this.#phaseStart;
    return fanoutProgressText(this.#progress);
  }

  /** A new phase: its line is shown at once, in every mode. */
  #enter(phase: SessionPhase): void {
    this.#progress.phase = phase;
    this.#phaseStart = performance.now();
    this.#status.show(() => this.#text());
  }
}
