/**
 * `rt-translate --from TAG --to TAG,TAG,... -o 'talk-{lang}.wav'`: the realtime command with
 * several target languages, one `RealtimeFanout` over the input: one output file per language
 * (`{lang}` in `-o` replaced by each tag, refused before any traffic when missing, and standard
 * output refused), `--events` lines with their `lang`, `--stats` per language. A language that
 * fails is named on stderr and the others go on; the exit status is 0 when every language
 * completed, 3 when some ended incomplete or failed (1 when all failed), as for one language
 * otherwise. The one-language command (`commands/translate.ts`) comes here only with a list.
 */
import { pipeline } from 'node:stream/promises';
import { RealtimeFanout, fanoutEventToRecord, type FanoutTargetOptions, type RealtimeFanoutStats, type RealtimeLanguage } from '../lib/index.js';
import { normalizeRealtimeLanguage } from '../lib/protocol.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, intFlag, interruptedStatus, stopThenAbort, type CliIo } from './cli.js';
import { describeFailure } from './failures.js';
import { openAudioOutput, openCommandInput, parseOutputSpec, writeInto, type AudioSink } from './audio-io.js';
import { createSession, logEvents, openBeforeSession, resolveAccess, translationOptions, type AccessFlags } from './realtime-access.js';
import { progressMode } from './status-line.js';
import { FanoutReport } from './fanout-report.js';
import { inputFailureLine, statsLines } from './realtime-summary.js';

/** The realtime command's flags, as parsed. */
export interface TranslateFlags extends AccessFlags {
  input?: string;
  format?: string;
  ar?: string;
  ac?: string;
  realtime?: boolean;
  output?: string;
  'out-format'?: string;
  'out-ar'?: string;
  'out-ac'?: string;
  to?: string;
  voice?: string;
  'text-only'?: boolean;
  events?: string;
  'create-dirs'?: boolean;
  'quiet-ms'?: string;
  'stall-ms'?: string;
  'no-reconnect'?: boolean;
  stats?: boolean;
  progress?: boolean;
  'no-progress'?: boolean;
}

/** What `-o` holds in place of each language. */
export const LANG_PLACEHOLDER = '{lang}';

/** Some languages ended without every answer, or failed (what arrived was written). */
const EXIT_INCOMPLETE = 3;

/** `--to a,b,c`: each a realtime tag, none twice. */
function parseTargets(flag: string): RealtimeLanguage[] {
  const langs: RealtimeLanguage[] = [];
  for (const tag of flag.split(',')) {
    const lang = normalizeRealtimeLanguage(tag.trim(), '--to');
    if (langs.includes(lang)) throw new UsageError(`--to names ${lang} twice.`);
    langs.push(lang);
  }
  return langs;
}

/** `--voice ID` (every language) or `--voice TAG=ID,TAG=ID` (those languages). */
function parseVoices(flag: string | undefined, langs: readonly RealtimeLanguage[]): Map<RealtimeLanguage, number> {
  const voices = new Map<RealtimeLanguage, number>();
  if (flag === undefined) return voices;
  if (!flag.includes('=')) {
    const id = intFlag(flag, '--voice', 1)!;
    for (const lang of langs) voices.set(lang, id);
    return voices;
  }
  for (const pair of flag.split(',')) {
    const [tag = '', id] = pair.split('=');
    const lang = normalizeRealtimeLanguage(tag.trim(), '--voice');
    if (!langs.includes(lang)) throw new UsageError(`--voice names ${lang}, which is not in --to (${langs.join(',')}).`);
    voices.set(lang, intFlag(id ?? '', `--voice ${lang}=`, 1)!);
  }
  return voices;
}

/** `stats` as a JSON-safe record: each target's error as code and message. */
function statsRecord(stats: RealtimeFanoutStats): Record<string, unknown> {
  return {
    type: 'stats',
    ...stats,
    targets: stats.targets.map(({ error, ...t }) => ({ ...t, error: error && { code: error.code, message: error.message, retryable: error.retryable } })),
  };
}

export async function runFanoutTranslate(values: TranslateFlags, io: CliIo, from: RealtimeLanguage): Promise<number> {
  const langs = parseTargets(values.to ?? '');
  const voices = parseVoices(values.voice, langs);
  const quietPeriodMs = intFlag(values['quiet-ms'], '--quiet-ms', 1);
  const responseStallTimeoutMs = intFlag(values['stall-ms'], '--stall-ms', 1);
  const textOnly = values['text-only'] === true;
  const progress = progressMode(values, io.stderr);
  const outputSpec = parseOutputSpec({ output: values.output, outFormat: values['out-format'], outAr: values['out-ar'], outAc: values['out-ac'], textOnly });
  const output = values.output;
  if (!textOnly) {
    if (output === undefined || output === '-') {
      throw new UsageError(
        `several target languages are written to one file each, not to standard output: pass -o with ${LANG_PLACEHOLDER} in the name (-o talk-${LANG_PLACEHOLDER}.wav), or --text-only.`,
      );
    }
    if (!output.includes(LANG_PLACEHOLDER)) {
      throw new UsageError(
        `with several target languages, -o must contain ${LANG_PLACEHOLDER}, replaced by each language (-o talk-${LANG_PLACEHOLDER}.wav); got -o ${output}.`,
      );
    }
  }

  const access = await resolveAccess(values, io);
  const source = await openCommandInput(values, io);
  const createDirs = values['create-dirs'] === true;
  const sinks: AudioSink[] = [];
  // A failure before the sessions run releases the input (which may hold an ffmpeg process) and every output.
  const release = async () => {
    source.destroy();
    for (const sink of sinks) await sink.settle('failed').catch(() => undefined);
  };
  const { events, target } = await openBeforeSession(values.events, access, io, createDirs, release, async () => {
    if (!textOnly) for (const lang of langs) sinks.push(await openAudioOutput(io, output!.split(LANG_PLACEHOLDER).join(lang), outputSpec, createDirs));
  });
  const { emulator } = target;

  const controller = new AbortController();
  const fan = await createSession(
    () =>
      new RealtimeFanout({
        from,
        to: langs.map((lang): FanoutTargetOptions => (voices.has(lang) ? { lang, voiceId: voices.get(lang)! } : { lang })),
        ...translationOptions(values, target, controller.signal, { textOnly, quietPeriodMs, responseStallTimeoutMs }),
      }),
    release,
    emulator,
  );

  const report = new FanoutReport(fan, langs, io.stderr, { from, textOnly }, progress);
  const logging = events ? logEvents(fan.events(), fanoutEventToRecord, events, values.stats === true ? () => statsRecord(fan.stats) : undefined) : undefined;
  // Once no language is left, the rest of the input is not read.
  fan.on('target.done', () => {
    if (fan.targets.every((t) => t.outcome !== undefined)) source.stop();
  });
  const signals = stopThenAbort(
    io,
    () => {
      report.stopping();
      source.stop();
    },
    () => controller.abort(new Error('interrupted')),
  );

  const targets = fan.targets;
  const writing = textOnly
    ? []
    : targets.map((t, i) =>
        writeInto(sinks[i]!, t.output, (chunk) => report.received(t.lang, chunk.length)).then(
          () => undefined,
          (error: unknown) => error,
        ),
      );
  let failure: unknown;
  try {
    await pipeline(source, report.counter, fan);
  } catch (error) {
    failure = error;
  }
  const written = await Promise.all(writing);
  signals.remove();
  const { interruptedBy, stopping } = signals;
  const kept: string[] = [];
  for (const [i, sink] of sinks.entries()) {
    const t = targets[i]!;
    const outcome =
      interruptedBy !== undefined ? 'interrupted' : failure === undefined && written[i] === undefined && t.outcome !== 'failed' ? 'complete' : 'failed';
    const line = await sink.settle(outcome).catch((error: unknown) => void (written[i] ??= error));
    if (line) kept.push(line);
  }
  const summary = report.close();
  if (values.stats === true) {
    for (const stats of fan.stats.targets) for (const text of statsLines(stats)) io.stderr.write(`rt-translate: ${stats.lang}: ${text}\n`);
  }
  failure ??= await logging;
  await emulator?.close();
  const inputFailure = stopping ? undefined : source.failure;
  if (interruptedBy !== undefined) {
    io.stderr.write(kept.length > 0 ? kept.join('') : 'rt-translate: interrupted\n');
    return interruptedStatus(interruptedBy);
  }
  if ((failure as NodeJS.ErrnoException | undefined)?.code === 'EPIPE') return EXIT_OK;
  if (summary !== undefined) io.stderr.write(`${summary}\n`);
  if (inputFailure !== undefined) io.stderr.write(inputFailureLine(inputFailure, report.sentBytes, failure === undefined));
  // Each language that did not complete, by name.
  let failed = 0;
  let incomplete = 0;
  for (const [i, t] of targets.entries()) {
    const writeFailure = written[i];
    if (writeFailure !== undefined) {
      failed++;
      io.stderr.write(`rt-translate: ${t.lang}: ${describeFailure(writeFailure).replace(/^rt-translate: /, '')}\n`);
    } else if (t.outcome === 'failed') {
      failed++;
      io.stderr.write(`rt-translate: ${t.lang} failed: ${describeFailure(t.error).replace(/^rt-translate: /, '')}\n`);
    } else if (t.outcome === 'incomplete') {
      incomplete++;
      const ending = t.stats.ending!;
      io.stderr.write(`rt-translate: ${t.lang} ended incomplete (${ending.reason}): ${(ending.unansweredSpeechMs / 1000).toFixed(1)} s of speech unanswered\n`);
    }
  }
  if (kept.length > 0) io.stderr.write(kept.join(''));
  if (failure !== undefined) {
    const hint = emulator === undefined ? undefined : (await import('./embedded-emulator.js')).embeddedRefusalHint(failure, emulator.stateDir);
    io.stderr.write(`${hint === undefined ? '' : `${hint}\n`}${describeFailure(failure)}\n`);
    return EXIT_FAILURE;
  }
  if (failed === targets.length) {
    const first = targets.find((t) => t.error)?.error;
    const hint =
      emulator === undefined || first === undefined ? undefined : (await import('./embedded-emulator.js')).embeddedRefusalHint(first, emulator.stateDir);
    if (hint !== undefined) io.stderr.write(`${hint}\n`);
    return EXIT_FAILURE;
  }
  if (inputFailure !== undefined) return EXIT_USAGE;
  return failed + incomplete > 0 ? EXIT_INCOMPLETE : EXIT_OK;
}
