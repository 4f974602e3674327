/**
 * `rt-translate --from TAG --to TAG`: realtime speech translation from a file or stdin to a file
 * or stdout, in the ffmpeg habit. The input is described by `-f`/`--ar`/`--ac` or recognised by
 * its header (WAV, Ogg/Opus, FLAC; other files through ffmpeg when it is on PATH); the output
 * by `--out-format`/`--out-ar`/`--out-ac` or a `.wav` path. The audio ends are composed in
 * `../audio-io.ts`; this module runs the session.
 */
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { Writable } from 'node:stream';
import { RealtimeTranslateStream, type RealtimeStats } from '../../lib/realtime/realtime-translate-stream.js';
import type { LatencySummary } from '../../lib/realtime/speech-ledger.js';
import { normalizeRealtimeLanguage } from '../../lib/realtime/languages.js';
import { REALTIME_SAMPLE_RATE } from '../../lib/realtime/codec.js';
import { eventToRecord } from '../../lib/realtime/realtime-events.js';
import { ENV_API_KEY, ENV_REALTIME_URL, resolveApiKey, resolveRealtimeUrl } from '../../lib/config.js';
import { ValidationError, ConfigError, RtTranslateError } from '../../lib/errors.js';
import { startEmulator, EMULATOR_DEFAULT_API_KEY, type RunningEmulator } from '../../lib/emulator/server.js';
import {
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  UsageError,
  describeFailure,
  intFlag,
  packageVersion,
  parseCommandLine,
  type CliIo,
} from '../cli.js';
import { discardSink, openAudioInput, openAudioOutput, parseInputSpec, parseOutputSpec, type InputError } from '../audio-io.js';

export const TRANSLATE_USAGE = `Usage: rt-translate --from TAG --to TAG [options]      realtime speech translation

  -i, --input PATH      audio in; '-' or absent: stdin
  -f FORMAT             input format: s16le s16be f32le mulaw alaw (raw), wav ogg flac.
                        Without -f, WAV, Ogg/Opus and FLAC are recognised by their header;
                        other files (MP3, MP4, WebM, ...) are decoded with ffmpeg when it is
                        on PATH; anything else is raw s16le
  --ar HZ               raw input rate: 8000 16000 22050 24000 44100 48000 (default 24000;
                        8000 for mulaw and alaw)
  --ac N                raw input channels: 1 or 2 (default 1)
  --realtime            send the input at real-time speed (a file played as a microphone)
  -o, --output PATH     translated audio out; '-' or absent: stdout. A path ending in .wav
                        gets a WAV header (exact sizes once done)
  --out-format FORMAT   s16le s16be f32le mulaw alaw, or wav (a WAV container of s16le);
                        default s16le, or wav for a .wav path (which holds s16le, f32le,
                        mulaw or alaw)
  --out-ar HZ           output rate, as --ar (default 24000)
  --out-ac N            output channels: 1 or 2 (default 1)
  --from TAG            source language (ar-ae ar-eg ar-sa de-de en-gb en-us es-es fr-ca
  --to TAG              target language  fr-fr hi-in ja-jp ko-kr pt-br zh-cn)
  --voice ID            use the cloned voice ID
  --text-only           text only (output_modalities ["text"]); no audio written
  --events PATH         every server event as one JSON object per line (audio as byte counts)
  --quiet-ms MS         after the input ends, wait for the last translation until no event
                        has arrived for MS ms (default 3000)
  --no-reconnect        fail at the first dropped connection instead of reconnecting and
                        sending the unanswered audio again (default: reconnect, said on stderr)
  --stats               print a summary at the end: responses, latency from the end of each
                        sentence to its transcript and first translated audio (p50/p95/max),
                        reconnects (also one {"type":"stats"} line in --events)
  --api-key KEY         or env ${ENV_API_KEY}
  --realtime-url URL    or env ${ENV_REALTIME_URL}; the host, /v1/realtime is appended
  --allow-insecure      allow plain-text ws:// to a host that is not loopback
  --emulator            start the embedded emulator on loopback and use it
  -h, --help; --version

-ar and -ac (one dash, as in ffmpeg) are accepted for --ar and --ac. Example:
  ffmpeg -i talk.mp4 -f s16le -ar 48000 -ac 2 - | rt-translate --from en-us --to fr-fr \\
    -f s16le --ar 48000 --ac 2 -o talk-fr.wav

Transcripts and translations are printed to stderr. Ctrl-C stops reading the input at once and
lets the last translation finish; a second Ctrl-C aborts. Exit status:
  0    done
  1    service or network failure, or the output could not be written (after everything
       received has been written)
  3    the session ended, but without every answer it was owed (the service closed early,
       or an answer never came within the stall timeout); what arrived was written
  2    usage or configuration error (before any connection), or an input that cannot be read
       or decoded; when that happens midway, the audio before the failure is translated and
       written first, and the message says how much was used
  130  aborted by a second Ctrl-C

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
  'api-key': { type: 'string' },
  'realtime-url': { type: 'string' },
  'allow-insecure': { type: 'boolean' },
  emulator: { type: 'boolean' },
  'quiet-ms': { type: 'string' },
  'no-reconnect': { type: 'boolean' },
  stats: { type: 'boolean' },
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

/** Writes a chunk, waiting for drain; fails if the stream fails or closes meanwhile. */
async function writeAll(stream: Writable, chunk: Buffer | string): Promise<void> {
  if (stream.destroyed) throw stream.errored ?? new Error('the output was closed');
  if (stream.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (error?: Error | null) => {
      stream.off('drain', onDrain);
      stream.off('error', onError);
      stream.off('close', onClose);
      if (error) reject(error);
      else resolve();
    };
    const onDrain = () => done();
    const onError = (error: Error) => done(error);
    const onClose = () => done(stream.errored ?? new Error('the output was closed'));
    stream.on('drain', onDrain);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}

/** Bytes of event lines queued beyond which the translated audio is no longer read. */
const EVENT_LOG_HIGH_WATER = 256 * 1024;

/**
 * `--events`: server events as JSON lines, written in order with the file's backpressure.
 *
 * The translator emits its events synchronously and cannot wait for a file, so `add()` only
 * queues a line; one loop writes the queue out (all queued lines in one write, then waits for
 * `drain` when the file is behind). The queue is bounded through the audio: while more than
 * `EVENT_LOG_HIGH_WATER` bytes are queued, the command stops reading translated audio
 * (`belowHighWater()`), so the translator stops reading its socket and no more events arrive
 * until the file has caught up. (With `--text-only` there is no audio to hold back; the events
 * are then only text, a few bytes per word.) A write failure is kept, later lines are dropped,
 * and `close()` reports it.
 */
export class EventLog {
  readonly #file: Writable;
  #queue: string[] = [];
  #queuedBytes = 0;
  #writing: Promise<void> | undefined;
  #error: unknown;
  #waiters: Array<() => void> = [];

  constructor(file: Writable) {
    this.#file = file;
  }

  add(line: string): void {
    if (this.#error !== undefined) return;
    this.#queue.push(line);
    this.#queuedBytes += Buffer.byteLength(line);
    this.#writing ??= this.#writeQueue();
  }

  /** Resolves once the queue is at most `EVENT_LOG_HIGH_WATER` bytes (or writing failed). */
  async belowHighWater(): Promise<void> {
    while (this.#queuedBytes > EVENT_LOG_HIGH_WATER && this.#error === undefined) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Writes what is queued, ends the file and waits until it is closed; throws a write failure. */
  async close(): Promise<void> {
    while (this.#writing) await this.#writing;
    if (this.#error === undefined) {
      this.#file.end();
      try {
        await finished(this.#file);
      } catch (error) {
        this.#error = error;
      }
    } else if (!this.#file.destroyed) {
      this.#file.destroy();
    }
    if (this.#error !== undefined) throw this.#error;
  }

  async #writeQueue(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.join('');
        this.#queue = [];
        await writeAll(this.#file, batch);
        this.#queuedBytes -= Buffer.byteLength(batch);
        this.#wake();
      }
    } catch (error) {
      this.#error = error;
      this.#queue = [];
      this.#queuedBytes = 0;
    } finally {
      this.#writing = undefined;
      this.#wake();
    }
  }

  #wake(): void {
    if (this.#queuedBytes > EVENT_LOG_HIGH_WATER && this.#error === undefined) return;
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

/** Resolves when `stream` drains, closes or fails, or `stop` is called (never rejects). */
function drainOrStop(stream: Writable, onStop: (stop: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      stream.off('error', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('close', done);
    stream.on('error', done);
    onStop(done);
  });
}

function seconds(bytes: number): string {
  return (bytes / (REALTIME_SAMPLE_RATE * 2)).toFixed(1);
}

export async function runTranslate(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandLine(() => parseArgs({ args: ffmpegSpellings(args), options: OPTIONS, strict: true }));
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
  const to = normalizeRealtimeLanguage(values.to, '--to');
  const voiceId = intFlag(values.voice, '--voice', 1);
  const quietPeriodMs = intFlag(values['quiet-ms'], '--quiet-ms', 1);
  const textOnly = values['text-only'] === true;
  const inputSpec = parseInputSpec({ format: values.format, ar: values.ar, ac: values.ac });
  const outputSpec = parseOutputSpec({
    output: values.output,
    outFormat: values['out-format'],
    outAr: values['out-ar'],
    outAc: values['out-ac'],
    textOnly,
  });

  const realtimeOption = values['realtime-url'] ?? io.env[ENV_REALTIME_URL];
  const useEmulator = values.emulator === true || !realtimeOption;
  let apiKey = resolveApiKey(values['api-key'], io.env);
  if (!useEmulator && apiKey === undefined) {
    throw new UsageError(`no API key: pass --api-key or set ${ENV_API_KEY}.`);
  }
  // An unusable URL is a configuration error, found before any file is opened or written.
  if (!useEmulator) resolveRealtimeUrl(realtimeOption, { allowInsecure: values['allow-insecure'] === true });

  const input = await openAudioInput({
    path: values.input,
    spec: inputSpec,
    realtime: values.realtime === true,
    stdin: io.stdin,
    env: io.env,
  });
  const source = input.stream;

  let sink;
  try {
    sink = textOnly
      ? discardSink(new Writable({ write: (_chunk, _encoding, callback) => callback() }))
      : await openAudioOutput(values.output, outputSpec, io.stdout);
  } catch (error) {
    input.close();
    throw error;
  }
  // A failure from here until the session runs releases the input (which may hold an ffmpeg
  // process) and the output.
  const release = async () => {
    input.close();
    await sink.close().catch(() => undefined);
  };
  let events: ReturnType<typeof createWriteStream> | undefined;
  let emulator: RunningEmulator | undefined;
  let realtimeUrl = realtimeOption;
  try {
    if (values.events) {
      const file = createWriteStream(values.events);
      events = file;
      await new Promise<void>((resolve, reject) => {
        file.once('open', () => resolve());
        file.once('error', (error: NodeJS.ErrnoException) =>
          reject(new UsageError(`cannot write events to ${values.events}: ${error.code ?? error.message}`)),
        );
      });
    }
    if (useEmulator) {
      apiKey ??= EMULATOR_DEFAULT_API_KEY;
      emulator = await startEmulator({ apiKeys: [apiKey] });
      realtimeUrl = emulator.realtimeUrl;
      if (values.emulator !== true) {
        io.stderr.write(
          `rt-translate: no realtime URL configured (--realtime-url or ${ENV_REALTIME_URL}); ` +
            `using the embedded emulator at ${emulator.realtimeUrl}\n`,
        );
      }
    }
  } catch (error) {
    await release();
    throw error;
  }

  const controller = new AbortController();
  let rt: RealtimeTranslateStream;
  try {
    rt = new RealtimeTranslateStream({
      from,
      to,
      apiKey,
      realtimeUrl,
      signal: controller.signal,
      allowInsecure: values['allow-insecure'] === true,
      ...(voiceId !== undefined ? { voiceId } : {}),
      ...(textOnly ? { outputModalities: ['text'] as const } : {}),
      ...(quietPeriodMs !== undefined ? { quietPeriodMs } : {}),
      ...(values['no-reconnect'] === true ? { reconnect: false } : {}),
    });
  } catch (error) {
    await release();
    await emulator?.close();
    if (error instanceof ValidationError || error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }

  // Progress and text lines on stderr.
  const tty = io.stderr.isTTY === true;
  let progressShown = false;
  const clearProgress = () => {
    if (progressShown) io.stderr.write('\r\x1b[K');
    progressShown = false;
  };
  const line = (text: string) => {
    clearProgress();
    io.stderr.write(`${text}\n`);
  };
  const progress = tty
    ? setInterval(() => {
        const s = rt.stats;
        io.stderr.write(`\r\x1b[Ksent ${seconds(s.bytesSent)} s, received ${seconds(s.bytesReceived)} s, ${s.responses} responses`);
        progressShown = true;
      }, 250)
    : undefined;
  progress?.unref();
  rt.on('transcript.done', (text) => line(`transcript (${from}): ${text}`));
  rt.on('text.done', (text) => line(`translation (${to}): ${text}`));
  rt.on('warning', (warning) => line(`rt-translate: warning: ${warning.message}`));
  rt.on('reconnecting', ({ attempt, delayMs, cause }) =>
    line(`rt-translate: connection lost (${cause.message.replace(/\.$/, '')}); reconnecting in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt})`),
  );
  rt.on('reconnected', ({ replayedMs, outageMs, notReplayedMs }) =>
    line(
      `rt-translate: reconnected after ${(outageMs / 1000).toFixed(1)} s; sent ${(replayedMs / 1000).toFixed(1)} s of unanswered audio again` +
        (notReplayedMs > 0 ? ` (${(notReplayedMs / 1000).toFixed(1)} s more was no longer kept and may be missing)` : ''),
    ),
  );
  const eventLog = events ? new EventLog(events) : undefined;
  if (eventLog) rt.on('event', (event) => eventLog.add(`${JSON.stringify(eventToRecord(event))}\n`));

  // First Ctrl-C: stop reading the input at once (even an idle one: an open, quiet pipe) and end
  // the translator's input, so the session finishes with what was sent. Second: abort.
  let stopping = false;
  let wakeInput: (() => void) | undefined;
  const onSignal = () => {
    if (stopping) {
      controller.abort(new Error('interrupted'));
      return;
    }
    stopping = true;
    input.close();
    wakeInput?.();
  };
  process.on('SIGINT', onSignal);

  /** Service-format bytes of input sent to the translator. */
  let bytesIn = 0;
  /** An input failure that happened before any Ctrl-C (after one, the input is not wanted). */
  let inputFailure: InputError | undefined;
  const pumpInput = async () => {
    try {
      for await (const chunk of source) {
        if (stopping || rt.destroyed) break;
        bytesIn += (chunk as Buffer).length;
        if (!rt.write(chunk)) {
          await drainOrStop(rt, (stop) => (wakeInput = stop));
          wakeInput = undefined;
        }
      }
    } catch {
      // The input was closed under the loop (Ctrl-C, or the session is over): nothing to report.
    }
    // A failing input ends `source` after what it decoded before the failure.
    if (!stopping) inputFailure = input.failure;
    if (!rt.destroyed && !rt.writableEnded) rt.end();
  };
  const pumpOutput = async () => {
    for await (const chunk of rt) {
      await writeAll(sink.stream, chunk as Buffer);
      if (eventLog) await eventLog.belowHighWater();
    }
  };

  let failure: unknown;
  const inputDone = pumpInput();
  try {
    await pumpOutput();
  } catch (error) {
    failure ??= error;
  }
  // The session is over: stop reading an input that may never end (a microphone, an open pipe).
  input.close();
  wakeInput?.();
  await inputDone;
  process.off('SIGINT', onSignal);
  if (progress) clearInterval(progress);
  clearProgress();
  try {
    await sink.close();
  } catch (error) {
    failure ??= error;
  }
  if (values.stats === true) {
    const stats = rt.stats;
    for (const text of statsLines(stats)) line(`rt-translate: ${text}`);
    eventLog?.add(`${JSON.stringify({ type: 'stats', ...stats })}\n`);
  }
  try {
    await eventLog?.close();
  } catch (error) {
    failure ??= error;
  }
  await emulator?.close();
  if (controller.signal.aborted) {
    io.stderr.write('rt-translate: interrupted\n');
    return 130;
  }
  // Exit status: decided here, not by the error's class (a library ValidationError in the
  // middle of a session is not a usage error).
  if (inputFailure !== undefined) {
    const cause = inputFailure.cause;
    const code = cause instanceof RtTranslateError ? ` [${cause.code}]` : '';
    const used = `${seconds(bytesIn)} s of audio before the failure ${failure === undefined ? 'were translated' : 'were sent'}`;
    io.stderr.write(`rt-translate: input error: ${inputFailure.message.replace(/\.$/, '')}${code}; ${used}.\n`);
  }
  if (failure !== undefined) {
    io.stderr.write(`${describeFailure(failure)}\n`);
    return EXIT_FAILURE;
  }
  if (inputFailure !== undefined) return EXIT_USAGE;
  return rt.stats.ending?.complete === false ? EXIT_INCOMPLETE : EXIT_OK;
}

/** The session ended without every answer it was owed (what arrived was written). */
const EXIT_INCOMPLETE = 3;

function latencyText(summary: LatencySummary): string {
  if (summary.count === 0) return 'n/a';
  const s = (v: number | undefined) => ((v ?? 0) / 1000).toFixed(2);
  return `p50 ${s(summary.p50)} s, p95 ${s(summary.p95)} s, max ${s(summary.max)} s`;
}

/** `--stats`: a few lines a person reads at the end of a session. */
function statsLines(stats: RealtimeStats): string[] {
  const lines = [
    `${stats.responses} ${stats.responses === 1 ? 'response' : 'responses'}; ` +
      `${seconds(stats.inputBytes)} s of audio in, ${seconds(stats.bytesReceived)} s of translated audio out`,
    `latency from the end of a sentence: transcript ${latencyText(stats.latency.transcriptMs)}; ` +
      `first translated audio ${latencyText(stats.latency.firstAudioMs)}`,
  ];
  if (stats.reconnects > 0) {
    lines.push(
      `${stats.reconnects} ${stats.reconnects === 1 ? 'reconnect' : 'reconnects'}, ${(stats.outageMs / 1000).toFixed(1)} s without a session ` +
        `(longest ${(stats.longestOutageMs / 1000).toFixed(1)} s), ${seconds(stats.bytesReplayed)} s of audio sent again`,
    );
  }
  if (stats.ending && !stats.ending.complete) {
    lines.push(`ended incomplete (${stats.ending.reason}): ${(stats.ending.unansweredSpeechMs / 1000).toFixed(1)} s of speech unanswered`);
  }
  return lines;
}
