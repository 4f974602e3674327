/**
 * `rt-translate --from TAG --to TAG`: realtime speech translation from a file or stdin to a file
 * or stdout, in the ffmpeg habit. The input is opened by `openAudioSource` (described by
 * `-f`/`--ar`/`--ac`, or recognised by its header); the output is laid out by
 * `--out-format`/`--out-ar`/`--out-ac` or a `.wav` path (`../audio-io.ts`). This module parses
 * the flags and runs one `pipeline()`: input, translator, output. Several target languages
 * (`--to a,b`) are the fan-out's (`../translate-fanout.ts`).
 */
import { pipeline } from 'node:stream/promises';
import { RealtimeTranslateStream, eventToRecord, ENV_REALTIME_URL } from '../../lib/index.js';
import { normalizeRealtimeLanguage } from '../../lib/protocol.js';
import {
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  UsageError,
  intFlag,
  interruptedStatus,
  packageVersion,
  parseCommandLine,
  stopThenAbort,
  type CliIo,
} from '../cli.js';
import { describeFailure } from '../failures.js';
import { CREATE_DIRS_OPTION, createDirsUsage } from '../file-errors.js';
import { PROGRESS_OPTIONS, PROGRESS_USAGE, SessionReport, progressMode } from '../status-line.js';
import { apiKeyUsage } from '../api-key.js';
import { discardSink, openAudioOutput, openCommandInput, parseOutputSpec, writeInto } from '../audio-io.js';
import { ACCESS_OPTIONS, REALTIME_STDIN_NOTE, createSession, openBeforeSession, logEvents, resolveAccess, translationOptions } from '../realtime-access.js';
import { inputFailureLine, statsLines } from '../realtime-summary.js';

export const TRANSLATE_USAGE = `Usage: rt-translate [translate] --from TAG --to TAG [options]      realtime speech translation

  -i, --input PATH      audio in; '-' or absent: stdin (not a terminal)
  -f FORMAT             input format: s16le s16be f32le mulaw alaw (raw), wav ogg flac.
                        Without -f, WAV, Ogg/Opus and FLAC are recognised by their header;
                        other files (MP3, MP4, WebM, ...) are decoded with ffmpeg when it is
                        on PATH (or FFMPEG_PATH names it); anything else is raw s16le
  --ar HZ               raw input rate: 8000 16000 22050 24000 44100 48000 (default 24000;
                        8000 for mulaw and alaw)
  --ac N                raw input channels: 1 or 2 (default 1)
  --realtime            send the input at real-time speed (a file played as a microphone)
  -o, --output PATH     translated audio out; '-' or absent: stdout (not a terminal). A path
                        ending in .wav gets a WAV header (exact sizes once done); other
                        names: .pcm .raw .s16le .s16be .f32le .mulaw .ulaw .alaw, or none
  --out-format FORMAT   s16le s16be f32le mulaw alaw, or wav (a WAV container of s16le);
                        default s16le, or wav for a .wav path (which holds s16le, f32le,
                        mulaw or alaw)
  --out-ar HZ           output rate, as --ar (default 24000)
  --out-ac N            output channels: 1 or 2 (default 1)
  --from TAG            source language (ar-ae ar-eg ar-sa de-de en-gb en-us es-es fr-ca
  --to TAG[,TAG...]     target language  fr-fr hi-in ja-jp ko-kr pt-br zh-cn); several
                        languages: one session each, written to one -o file each, named
                        with {lang} (-o 'talk-{lang}.wav'); --events lines carry "lang"
  --voice ID            use the cloned voice ID; with several languages, for all of them,
                        or TAG=ID[,TAG=ID...] for some
  --text-only           text only (output_modalities ["text"]); no audio written
${createDirsUsage('the directories of -o and --events')}
  --events PATH         every event as one JSON object per line: each event the service sent
                        ("type" the library's name, "wireType" the service's; audio as byte
                        counts) and the command's own (response, reconnecting, reconnected,
                        warning, ended, and stats with --stats); '-': standard output (with
                        -o PATH or --text-only)
  --quiet-ms MS         after the input ends, wait for more translations until the service
                        has said nothing for MS ms since its last one (default 3000)
  --stall-ms MS         after the input ends, how long an answer still owed (one begun and
                        not finished, or speech sent after the last one began) may stay
                        silent before the command stops waiting and exits 3 (default 30000)
  --no-reconnect        fail at the first dropped connection instead of reconnecting and
                        sending the unanswered audio again (default: reconnect, said on stderr)
  --stats               print a summary at the end: responses, latency from the end of each
                        sentence to its transcript and first translated audio (p50/p95/max),
                        reconnects (also one {"type":"stats"} line in --events)
${PROGRESS_USAGE}
${apiKeyUsage(REALTIME_STDIN_NOTE)}
  --realtime-url URL    or env ${ENV_REALTIME_URL}; the host, /v1/realtime is appended
  --allow-insecure      allow plain-text ws:// to a host that is not loopback
  --emulator            start the embedded emulator on loopback and use it
  -h, --help; --version

-ar and -ac (one dash, as in ffmpeg) are accepted for --ar and --ac. Example:
  ffmpeg -i talk.mp4 -f s16le -ar 48000 -ac 2 - | rt-translate --from en-us --to fr-fr \\
    -f s16le --ar 48000 --ac 2 -o talk-fr.wav

Transcripts, translations and a summary are printed to stderr, with a progress line (on a
terminal, or with --progress). Ctrl-C stops reading the input at once and lets the last
translation finish; a second Ctrl-C aborts. A reader of stdout that goes away ends the
command quietly. Exit status:
  0    done
  1    service or network failure, or the output could not be written (after everything
       received has been written)
  3    the session ended, but without every answer it was owed: a response left unfinished,
       or speech sent after the service's last answer began that got none (the service
       closed, or --stall-ms passed); what arrived was written. With several languages:
       some language ended so, or failed while the others went on (each one named; 1 when
       every language failed)
  2    usage or configuration error (before any connection), or an input that cannot be read
       or decoded; when that happens midway, the audio before the failure is translated and
       written first, and the message says how much was used
  130  aborted by a second Ctrl-C (143: by SIGTERM); an output file keeps what arrived in
       OUT.partial, valid as far as it goes, and the last line says how much it holds

Other commands: rt-translate emulator --help`;

const OPTIONS = {
  input: { type: 'string', short: 'i' },
  format: { type: 'string', short: 'f' },
  ar: { type: 'string' },
  ac: { type: 'string' },
  realtime: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  'out-format': { type: 'string' },
  'out-ar': { type: 'string' },
  'out-ac': { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  voice: { type: 'string' },
  'text-only': { type: 'boolean' },
  events: { type: 'string' },
  ...CREATE_DIRS_OPTION,
  ...ACCESS_OPTIONS,
  'quiet-ms': { type: 'string' },
  'stall-ms': { type: 'string' },
  'no-reconnect': { type: 'boolean' },
  stats: { type: 'boolean' },
  ...PROGRESS_OPTIONS,
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

/** ffmpeg's single-dash spellings of the rate and channel flags. */
const FFMPEG_SPELLINGS: Record<string, string> = { '-ar': '--ar', '-ac': '--ac' };

/** Rewrites `-ar`/`-ac` to `--ar`/`--ac` (not after `--`, and not as another flag's value). */
function ffmpegSpellings(args: readonly string[]): string[] {
  const out: string[] = [];
  const takesValue = new Set(
    Object.entries(OPTIONS).flatMap(([name, o]) => (o.type === 'string' ? [`--${name}`, ...('short' in o ? [`-${o.short}`] : [])] : [])),
  );
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      out.push(...args.slice(i));
      break;
    }
    out.push(FFMPEG_SPELLINGS[arg] ?? arg);
    if (takesValue.has(arg) || FFMPEG_SPELLINGS[arg] !== undefined) {
      if (i + 1 < args.length) out.push(args[++i]!);
    }
  }
  return out;
}

export async function runTranslate(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandLine({ args: ffmpegSpellings(args), options: OPTIONS, strict: true });
  if (values.help) {
    io.stdout.write(`${TRANSLATE_USAGE}\n`);
    return EXIT_OK;
  }
  if (values.version) {
    io.stdout.write(`${packageVersion()}\n`);
    return EXIT_OK;
  }
  if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
  if (values.to === undefined) throw new UsageError('--to TAG is required (see --help).');
  const from = normalizeRealtimeLanguage(values.from, '--from');
  if (values.to.includes(',')) return (await import('../translate-fanout.js')).runFanoutTranslate(values, io, from);
  const to = normalizeRealtimeLanguage(values.to, '--to');
  const voiceId = intFlag(values.voice, '--voice', 1);
  const quietPeriodMs = intFlag(values['quiet-ms'], '--quiet-ms', 1);
  const responseStallTimeoutMs = intFlag(values['stall-ms'], '--stall-ms', 1);
  const textOnly = values['text-only'] === true;
  const progress = progressMode(values, io.stderr);
  const outputSpec = parseOutputSpec({
    output: values.output,
    outFormat: values['out-format'],
    outAr: values['out-ar'],
    outAc: values['out-ac'],
    textOnly,
  });

  const audioToStdout = !textOnly && (values.output === undefined || values.output === '-');
  if (audioToStdout && io.stdout.isTTY === true) {
    throw new UsageError('refusing to write audio to a terminal: pass -o PATH, redirect standard output, or use --text-only.');
  }
  const eventsToStdout = values.events === '-';
  if (eventsToStdout && audioToStdout) {
    throw new UsageError('--events - and the translated audio would both go to standard output: pass -o PATH for the audio, or --text-only.');
  }

  const access = await resolveAccess(values, io);

  const source = await openCommandInput(values, io);

  const createDirs = values['create-dirs'] === true;
  let sink;
  try {
    const outputPath = values.output === undefined || values.output === '-' ? undefined : values.output;
    sink = textOnly ? discardSink() : await openAudioOutput(io, outputPath, outputSpec, createDirs);
  } catch (error) {
    source.destroy();
    throw error;
  }
  // A failure from here until the session runs releases the input (which may hold an ffmpeg
  // process) and the output.
  const release = async () => {
    source.destroy();
    await sink.settle('failed').catch(() => undefined);
  };
  const { events, target } = await openBeforeSession(values.events, access, io, createDirs, release);
  const { emulator } = target;

  const controller = new AbortController();
  const rt = await createSession(
    () =>
      new RealtimeTranslateStream({
        from,
        to,
        ...(voiceId !== undefined ? { voiceId } : {}),
        ...translationOptions(values, target, controller.signal, { textOnly, quietPeriodMs, responseStallTimeoutMs }),
      }),
    release,
    emulator,
  );

  const report = new SessionReport(rt, io.stderr, { from, to, textOnly }, progress);
  // Settles with the log's failure (or undefined), reported once the session is over.
  const logging = events
    ? logEvents(rt.events(), eventToRecord, events, values.stats === true ? () => ({ type: 'stats', ...rt.stats }) : undefined)
    : undefined;

  // First Ctrl-C: stop reading the input at once (even an idle one: an open, quiet pipe) and end
  // the translator's input, so the session finishes with what was sent. Second, or SIGTERM:
  // abort; the output keeps what arrived.
  const signals = stopThenAbort(
    io,
    () => {
      report.stopping();
      source.stop();
    },
    () => controller.abort(new Error('interrupted')),
  );

  let failure: unknown;
  try {
    await pipeline(source, report.counter, rt, (chunks: AsyncIterable<Buffer>) =>
      writeInto(sink, chunks, async (chunk) => {
        report.received(chunk.length);
      }),
    );
  } catch (error) {
    failure = error;
  }
  signals.remove();
  const { interruptedBy, stopping } = signals;
  // The session ended (whatever ended its input): the output file is complete for what it
  // answered. A failure or an abort leaves what arrived in OUT.partial.
  const outcome = interruptedBy !== undefined ? 'interrupted' : failure === undefined ? 'complete' : 'failed';
  const kept = await sink.settle(outcome).catch((error: unknown) => void (failure ??= error));
  const summary = report.close();
  if (values.stats === true) for (const text of statsLines(rt.stats)) io.stderr.write(`rt-translate: ${text}\n`);
  failure ??= await logging;
  await emulator?.close();
  // An input failure after a Ctrl-C is not reported: the input was not wanted any more.
  const inputFailure = stopping ? undefined : source.failure;
  if (interruptedBy !== undefined) {
    io.stderr.write(kept ?? 'rt-translate: interrupted\n');
    return interruptedStatus(interruptedBy);
  }
  // The reader of standard output went away (`| head`): what it wanted it has; end quietly.
  if ((failure as NodeJS.ErrnoException | undefined)?.code === 'EPIPE') return EXIT_OK;
  if (summary !== undefined) io.stderr.write(`${summary}\n`);
  // Exit status: decided here, not by the error's class (a library ValidationError in the
  // middle of a session is not a usage error).
  if (inputFailure !== undefined) io.stderr.write(inputFailureLine(inputFailure, report.sentBytes, failure === undefined));
  if (failure !== undefined) {
    const hint = emulator === undefined ? undefined : (await import('../embedded-emulator.js')).embeddedRefusalHint(failure, emulator.stateDir);
    io.stderr.write(`${hint === undefined ? '' : `${hint}\n`}${describeFailure(failure)}\n${kept ?? ''}`);
    return EXIT_FAILURE;
  }
  if (inputFailure !== undefined) return EXIT_USAGE;
  return rt.stats.ending?.complete === false ? EXIT_INCOMPLETE : EXIT_OK;
}

/** The session ended without every answer it was owed (what arrived was written). */
const EXIT_INCOMPLETE = 3;
