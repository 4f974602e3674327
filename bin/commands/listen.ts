/**
 * `rt-translate listen`: live transcription of a file or standard input, one line per final
 * result as it comes (`[start-end] text`, or JSON with `--json`). The input is opened by
 * `openAudioSource` like the realtime command's; this module parses the flags and runs one
 * `pipeline()`: input, `LiveTranscriptionStream`, lines.
 */
import { createWriteStream } from 'node:fs';
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ENV_REALTIME_URL, ConfigError, ValidationError, LiveTranscriptionStream, type LiveTranscript } from '../../lib/index.js';
import { liveEventToRecord, encodeLiveQuery, REALTIME_SAMPLE_RATE } from '../../lib/protocol.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, interruptedStatus, parseCommandLine, stopThenAbort, type CliIo } from '../cli.js';
import { describeFailure } from '../failures.js';
import { openCommandInput } from '../audio-io.js';
import { CREATE_DIRS_OPTION, createDirsUsage } from '../file-errors.js';
import { keptLine, openOutputFile, type PartialFile } from '../output-file.js';
import { apiKeyUsage } from '../api-key.js';
import { ACCESS_OPTIONS, REALTIME_STDIN_NOTE, connect, logEvents, openEventsOutput, resolveAccess } from '../realtime-access.js';

export const LISTEN_USAGE = `Usage: rt-translate listen [options]      live transcription, one line per sentence

  -i, --input PATH      audio in; '-' or absent: stdin (not a terminal). Described and
                        recognised as for the realtime command (-f, --ar, --ac; WAV, Ogg/Opus,
                        FLAC, anything else through ffmpeg)
  -f FORMAT, --ar HZ, --ac N   raw input: s16le s16be f32le mulaw alaw, its rate and channels
  --realtime            send the input at real-time speed (a file played as a microphone)
  --language TAG        the speech's language (default en-us)
  --model NAME          the transcription model (default boli-v5)
  --json                one JSON object per final result: start, end, transcript,
                        confidence, words (times in seconds from the start of the input)
  --interim             also print interim results, to stderr
  -o, --output PATH     the lines; '-' or absent: stdout. A file is written as PATH.partial and
                        renamed once the session ended (a failure keeps what came in .partial)
  --events PATH         every event as one JSON object per line ('-': stdout, with -o PATH)
${createDirsUsage('the directories of -o and --events')}
  --no-reconnect        fail at the first dropped connection (default: reconnect and send the
                        audio after the last final result again)
${apiKeyUsage(REALTIME_STDIN_NOTE)}
  --realtime-url URL    or env ${ENV_REALTIME_URL}: the realtime host
  --allow-insecure      allow plain-text ws:// to a host that is not loopback
  --emulator            start the embedded emulator on loopback and use it
  -h, --help

Ctrl-C stops reading the input and lets the last results come; a second Ctrl-C (or SIGTERM)
aborts: -o PATH then keeps the lines received in PATH.partial, as the last line on stderr says.

Exit status: 0 done; 1 service or network failure (after every line received was written);
2 usage, configuration or input error; 3 the service did not send its last results in time;
130 aborted by a second Ctrl-C (143: by SIGTERM).`;

const OPTIONS = {
  input: { type: 'string', short: 'i' },
  format: { type: 'string', short: 'f' },
  ar: { type: 'string' },
  ac: { type: 'string' },
  realtime: { type: 'boolean' },
  language: { type: 'string' },
  model: { type: 'string' },
  json: { type: 'boolean' },
  interim: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  events: { type: 'string' },
  ...CREATE_DIRS_OPTION,
  'no-reconnect': { type: 'boolean' },
  ...ACCESS_OPTIONS,
  help: { type: 'boolean', short: 'h' },
} as const;

/** A final result as the command prints it. */
function lineOf(result: LiveTranscript, json: boolean): string {
  if (json) {
    const { start, end, transcript, confidence, words } = result;
    return `${JSON.stringify({ start, end, transcript, confidence, words })}\n`;
  }
  return `[${result.start.toFixed(2)}-${result.end.toFixed(2)}] ${result.transcript}\n`;
}

export async function runListen(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandLine({ args, options: OPTIONS, strict: true }, 'rt-translate listen --help');
  if (values.help) {
    io.stdout.write(`${LISTEN_USAGE}\n`);
    return EXIT_OK;
  }
  const linesToStdout = values.output === undefined || values.output === '-';
  if (values.events === '-' && linesToStdout) throw new UsageError('--events - and the transcript would both go to standard output: pass -o PATH.');
  // The language and model are checked before anything is opened or started.
  try {
    encodeLiveQuery({
      ...(values.language !== undefined ? { language: values.language } : {}),
      ...(values.model !== undefined ? { model: values.model } : {}),
    });
  } catch (error) {
    if (error instanceof ValidationError) throw new UsageError(error.message.replace(/^Invalid (language|model):/, (_m, name: string) => `Invalid --${name}:`));
    throw error;
  }
  const access = await resolveAccess(values, io);
  // Checked now; written as OUT.partial once the session runs, and named OUT when it ended.
  const createDirs = values['create-dirs'] === true;
  const file = linesToStdout ? undefined : await openOutputFile(io, values.output!, { createDirs });
  const source = await openCommandInput(values, io);
  let target: Awaited<ReturnType<typeof connect>>;
  let events: Writable | undefined;
  try {
    events = await openEventsOutput(values.events, io, createDirs);
    target = await connect(access, io);
  } catch (error) {
    source.destroy();
    throw error;
  }
  const { apiKey, realtimeUrl, emulator } = target;

  const controller = new AbortController();
  let listener: LiveTranscriptionStream;
  try {
    // What openAudioSource gives: PCM16 mono 24 kHz.
    listener = new LiveTranscriptionStream({
      apiKey,
      realtimeUrl,
      allowInsecure: values['allow-insecure'] === true,
      signal: controller.signal,
      encoding: 'linear16',
      sampleRate: REALTIME_SAMPLE_RATE,
      ...(values.language !== undefined ? { language: values.language } : {}),
      ...(values.model !== undefined ? { model: values.model } : {}),
      ...(values['no-reconnect'] === true ? { reconnect: false } : {}),
    });
  } catch (error) {
    source.destroy();
    await emulator?.close();
    if (error instanceof ValidationError || error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
  listener.on('warning', (warning) => io.stderr.write(`rt-translate: warning: ${warning.message}\n`));
  listener.on('reconnecting', ({ attempt, delayMs, cause }) =>
    io.stderr.write(
      `rt-translate: connection lost (${cause.message.replace(/\.$/, '')}); reconnecting in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt})\n`,
    ),
  );
  if (values.interim === true) listener.on('interim', (r) => io.stderr.write(`(interim) ${r.transcript}\n`));
  const logging = events ? logEvents(listener.events(), liveEventToRecord, events) : undefined;

  // Ctrl-C: stop reading the input; the service sends its last results and the command ends.
  // A second Ctrl-C, or SIGTERM: abort, keeping the lines received.
  const signals = stopThenAbort(
    io,
    () => source.stop(),
    () => controller.abort(new Error('interrupted')),
  );
  const output = file ? createWriteStream(file.path) : io.stdout;
  let lines = 0;
  let failure: unknown;
  try {
    await pipeline(
      source,
      listener,
      async function* (results: AsyncIterable<LiveTranscript>) {
        for await (const result of results) {
          lines++;
          yield lineOf(result, values.json === true);
        }
      },
      output,
      { end: !linesToStdout },
    );
  } catch (error) {
    failure = error;
  }
  signals.remove();
  const { interruptedBy } = signals;
  // The session ended: OUT holds every final result. A failure or an interruption keeps those
  // that came in OUT.partial.
  let kept: PartialFile | undefined;
  if (file) {
    if (!output.closed) await new Promise<void>((resolve) => output.once('close', () => resolve()));
    if (failure === undefined && interruptedBy === undefined) await file.commit().catch((error: unknown) => (failure = error));
    else kept = await file.abandon(lines > 0, { kind: 'lines' });
  }
  failure ??= await logging;
  await emulator?.close();
  if (interruptedBy !== undefined) {
    io.stderr.write(file && kept ? keptLine(file, kept, true) : 'rt-translate: interrupted\n');
    return interruptedStatus(interruptedBy);
  }
  if ((failure as NodeJS.ErrnoException | undefined)?.code === 'EPIPE') return EXIT_OK;
  const inputFailure = source.failure;
  if (inputFailure !== undefined) io.stderr.write(`rt-translate: input error: ${inputFailure.message}\n`);
  if (failure !== undefined) {
    io.stderr.write(`${describeFailure(failure)}\n`);
    if (file && kept) io.stderr.write(keptLine(file, kept, false));
    return EXIT_FAILURE;
  }
  if (inputFailure !== undefined) return EXIT_USAGE;
  return listener.stats.ending?.complete === false ? 3 : EXIT_OK;
}
