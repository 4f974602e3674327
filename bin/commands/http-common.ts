/**
 * What the HTTP subcommands (`tts`, `translated-tts`, `transcribe`, `dub`, `subtitles`,
 * `separate-results`, `voices`, `delete-voice`, `task-status`, ...) share: the service flags and
 * their checks, the client (on the configured base URL or the embedded emulator), Ctrl-C, and:
 *
 * - task waits (`taskRun`, `waitForRun`): the task and its run named on stderr, a progress line
 *   on a terminal, failed status reads said when they start and stop failing, and after a wait
 *   that ended without the task's final status, the command that resumes it;
 * - outputs in the ffmpeg habit (`-o PATH`, `-` or absent for standard output), files written
 *   whole or not at all (`../output-file.ts`): audio and downloads keep what arrived before a
 *   failure or an interruption in `NAME.partial` (valid as far as it goes), said on stderr;
 *   text is written at once or not at all.
 *
 * Composition only; the protocol is in lib/http.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { ENV_BASE_URL, parseServiceUrl } from '../../lib/config.js';
import { LocalizationClient } from '../../lib/http/client.js';
import type { CompletedTask, TaskProgress, TaskReadFailure } from '../../lib/http/tasks.js';
import type { FlacDownloadRetry, FlacDownloadStream } from '../../lib/http/flac-download-stream.js';
import { WavFileWriter } from '../../lib/audio/wav.js';
import { startEmulator, EMULATOR_DEFAULT_API_KEY, type RunningEmulator } from '../../lib/emulator/server.js';
import { ValidationError } from '../../lib/errors.js';
import { HttpStatusError, PaymentRequiredError, ServiceValidationError, TaskFailedError, TaskTimeoutError } from '../../lib/http/errors.js';
import { fromWireName } from '../../lib/http/wire.js';
import { validate, type Check } from '../../lib/http/validation.js';
import type { CreatedTask } from '../../lib/http/endpoint-kit.js';
import type { TaskKind } from '../../lib/http/task-kinds.js';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError, intFlag, interruptedStatus, onInterrupt, parseCommandLine, type CliIo, type InterruptSignal } from '../cli.js';
import { fitToWidth } from '../status-line.js';
import { keptLine, openOutputFile, writeOutputFile, type OutputContent, type OutputFile, type PartialFile } from '../output-file.js';
import { API_KEY_OPTIONS, FLAG_HINTS, apiKeyUsage, resolveKeyFlags, type ApiKeyFlags } from '../api-key.js';

/** A subcommand's options, in `parseArgs` form. */
export type CommandOptions = NonNullable<ParseArgsConfig['options']>;

/** What `parseArgs` answers for the options `O` of a subcommand. */
export type ParsedCommand<O extends CommandOptions> = ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: boolean }>>;

/**
 * Parses a subcommand's arguments (a parse error, or an argument where `allowPositionals` is
 * false, is a usage error). With `--help`, prints `usage` on stdout and returns undefined: the
 * command then ends with status 0.
 */
export function parseCommand<O extends CommandOptions>(args: string[], options: O, usage: string, io: CliIo, allowPositionals = false): ParsedCommand<O> | undefined {
  const parsed = parseCommandLine(() => parseArgs({ args, options, strict: true, allowPositionals }));
  if ((parsed.values as { help?: boolean }).help) {
    io.stdout.write(`${usage}\n`);
    return undefined;
  }
  return parsed;
}

/** A comma-separated flag value as its items (`es-es,fr-fr`), blanks dropped. */
export function listFlag(value: string | undefined): string[] {
  return value?.split(',').map((item) => item.trim()).filter((item) => item !== '') ?? [];
}

/** Flags every HTTP subcommand takes (`parseArgs` form). */
export const SERVICE_OPTIONS = {
  ...API_KEY_OPTIONS,
  'base-url': { type: 'string' },
  'allow-insecure': { type: 'boolean' },
  emulator: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Flags of the subcommands that wait for a task. */
export const POLL_OPTIONS = {
  'poll-ms': { type: 'string' },
} as const;

/** Flags of the subcommands that create a task: don't wait, or fetch an earlier run's result. */
export const TASK_OPTIONS = {
  ...POLL_OPTIONS,
  'no-wait': { type: 'boolean' },
  run: { type: 'string' },
} as const;

export const SERVICE_USAGE = `${apiKeyUsage()}
  --base-url URL        or env ${ENV_BASE_URL} (for example https://client.camb.ai/apis)
  --allow-insecure      allow plain-text http:// to a host that is not loopback
  --emulator            start the embedded emulator on loopback and use it (the default when
                        no base URL is configured)
  -h, --help`;

export const POLL_USAGE = `  --poll-ms MS          poll every MS (default: the service's guidance, 2 s growing to 5 s
                        for speech, 15 s growing to 60 s for subtitles and separation)`;

export const TASK_USAGE = `  --no-wait             create the task, print {"task_id":...,"kind":...} on stdout and exit
                        (needs a base URL: the service, or a running \`rt-translate emulator\`)
  --run ID              skip the task: fetch the result of the finished run ID (from an earlier
                        --no-wait, then task-status --wait)
${POLL_USAGE}`;

export const EXIT_USAGE_TEXT = `Exit status: 0 done; 1 service or network failure (the message names the cause; an output
file is written whole or not at all: audio received before a failure is kept in OUT.partial,
said on stderr); 2 usage or configuration error, before any request.`;

/** Time a task of the embedded emulator stays PENDING, and how often it is polled, ms. */
const EMBEDDED_TASK_MS = 500;
const EMBEDDED_POLL_MS = 100;

export interface ServiceValues extends ApiKeyFlags {
  'base-url'?: string;
  'allow-insecure'?: boolean;
  emulator?: boolean;
  'poll-ms'?: string;
}

/** The task flags as `parseArgs` gives them. */
export interface TaskValues extends ServiceValues {
  'no-wait'?: boolean;
  run?: string;
}

/** The service configuration, checked: a problem is a usage error before anything else happens. */
export interface ServiceSettings {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  allowInsecure: boolean;
  /** Start the embedded emulator. */
  useEmulator: boolean;
  /** The emulator was chosen because no base URL is configured: say so. */
  announce: boolean;
  /** Fixed polling interval, ms, from `--poll-ms`. */
  pollMs: number | undefined;
}

/**
 * Checks the service flags and reads the key (`resolveKeyFlags`; `stdinTaken` names what else the
 * command reads from standard input); every problem is a usage error naming the flag or variable.
 */
export async function serviceSettings(values: ServiceValues, io: CliIo, stdinTaken?: string): Promise<ServiceSettings> {
  const baseOption = values['base-url'] ?? io.env[ENV_BASE_URL];
  const useEmulator = values.emulator === true || !baseOption;
  const allowInsecure = values['allow-insecure'] === true;
  const apiKey = await resolveKeyFlags(values, io, { required: !useEmulator, stdinTaken });
  // Messages name what the user typed: the flag or the variable, and --allow-insecure.
  if (!useEmulator) parseServiceUrl(baseOption!, values['base-url'] !== undefined ? '--base-url' : ENV_BASE_URL, 'https:', { allowInsecure, hints: FLAG_HINTS });
  const pollMs = intFlag(values['poll-ms'], '--poll-ms', 10);
  return {
    baseUrl: useEmulator ? undefined : baseOption,
    apiKey,
    allowInsecure,
    useEmulator,
    announce: useEmulator && values.emulator !== true,
    pollMs,
  };
}

/** A client on the configured service or the embedded emulator, and Ctrl-C (or SIGTERM) as an AbortSignal. */
export interface Service {
  client: LocalizationClient;
  emulator: RunningEmulator | undefined;
  /** Aborted by SIGINT or SIGTERM. */
  signal: AbortSignal;
  io: CliIo;
  /**
   * Says on stderr what an output file whose write failed or was interrupted kept
   * (`rt-translate: interrupted: out.wav.partial holds the first 2.8 s of audio`).
   */
  kept(file: OutputFile, partial: PartialFile): void;
}

/**
 * Runs `body` with a connected service; closes the client and the emulator afterwards. SIGINT
 * (Ctrl-C) or SIGTERM aborts the signal; the command then ends with status 130 (143 for
 * SIGTERM) once what was received is written, the output files finished as far as they go.
 */
export async function withService(settings: ServiceSettings, io: CliIo, body: (service: Service) => Promise<number>): Promise<number> {
  let emulator: RunningEmulator | undefined;
  let baseUrl = settings.baseUrl;
  let apiKey = settings.apiKey;
  let pollMs = settings.pollMs;
  if (settings.useEmulator) {
    apiKey ??= EMULATOR_DEFAULT_API_KEY;
    emulator = await startEmulator({ apiKeys: [apiKey], taskMs: EMBEDDED_TASK_MS });
    baseUrl = emulator.baseUrl;
    pollMs ??= EMBEDDED_POLL_MS;
    if (settings.announce) {
      io.stderr.write(
        `rt-translate: no base URL configured (--base-url or ${ENV_BASE_URL}); using the embedded emulator at ${emulator.baseUrl}\n`,
      );
    }
  }
  const fixed = pollMs === undefined ? undefined : { initialIntervalMs: pollMs, maxIntervalMs: pollMs, factor: 1 };
  const controller = new AbortController();
  let interruptedBy: InterruptSignal | undefined;
  const stopListening = onInterrupt(io, (signal) => {
    interruptedBy ??= signal;
    controller.abort(new Error('interrupted'));
  });
  let keptFiles = 0;
  const kept = (file: OutputFile, partial: PartialFile): void => {
    keptFiles++;
    io.stderr.write(keptLine(file, partial, controller.signal.aborted));
  };
  let client: LocalizationClient | undefined;
  try {
    client = new LocalizationClient({
      baseUrl,
      apiKey,
      allowInsecure: settings.allowInsecure,
      env: {},
      ...(fixed ? { polling: { speech: fixed, longMedia: fixed } } : {}),
    });
    return await body({ client, emulator, signal: controller.signal, io, kept });
  } catch (error) {
    if (interruptedBy !== undefined) {
      if (keptFiles === 0) io.stderr.write('rt-translate: interrupted\n');
      return interruptedStatus(interruptedBy);
    }
    throw withFlagNames(error);
  } finally {
    stopListening();
    await client?.close();
    await emulator?.close();
  }
}

/**
 * The flag that sets each request field, for every HTTP command: fields as the library names
 * them (camelCase, dotted when nested), path parameters under `path.`. Messages about a field,
 * from the library's checks before a request or the service's 422 after it, name the flag.
 */
export const FIELD_FLAGS: Readonly<Record<string, string>> = {
  text: '--text',
  texts: 'TEXT',
  language: '--language',
  sourceLanguage: '--from',
  targetLanguage: '--to',
  targetLanguages: '--to',
  voiceId: '--voice',
  speechModel: '--model',
  outputConfiguration: '--format',
  'outputConfiguration.sampleRate': '--sample-rate',
  mediaUrl: '--url',
  videoUrl: '--url',
  mediaFile: '-i',
  transcriptionMode: '--mode',
  formality: '--formal or --casual',
  voiceName: '--name',
  gender: '--gender',
  age: '--age',
  description: '--description',
  voiceDescription: '--description',
  file: '--file',
  runIds: 'RUN_ID',
  'path.runId': '--run',
  'path.taskId': 'TASK_ID',
  'path.voiceId': 'ID',
};

/** The flag that sets `field` (`outputConfiguration.sampleRate`, `runIds.2`), or its top-level field's. */
function flagOf(field: string): string | undefined {
  return FIELD_FLAGS[field] ?? FIELD_FLAGS[field.split('.')[0]!];
}

/**
 * The library's checks of a request built from flags, before anything is opened or sent; a
 * problem is a usage error naming the flag (`withFlagNames`) and what it accepts. Returns the
 * request's wire body.
 */
export function checkRequest<T = Record<string, unknown>>(schema: Check, request: object): T {
  try {
    return validate<T>(schema, request);
  } catch (error) {
    throw withFlagNames(error);
  }
}

/**
 * A failure about a request field, told with the flag that set it (`FIELD_FLAGS`): the
 * library's check (also one made once the service's language list is known) as a usage error,
 * `--to expects ...`; the service's 422 as `--to: ...` instead of `body.target_language: ...`.
 * Any other failure as it is.
 */
export function withFlagNames(error: unknown): unknown {
  if (error instanceof ValidationError) {
    const flag = flagOf(error.field);
    if (flag === undefined) return error;
    const got = /\(got (.*)\)\.$/.exec(error.message)?.[1];
    const accepted = error.accepted.replace(/listLanguages\('(source|target)'\)/, 'rt-translate languages --$1');
    return new UsageError(`${flag} expects ${accepted}${got === undefined ? '' : ` (got ${got})`}.`);
  }
  if (!(error instanceof ServiceValidationError)) return error;
  let named = false;
  const detail = error.detail.map((entry) => {
    const [where, ...rest] = entry.loc;
    const loc = where === 'body' || where === 'query' ? rest : entry.loc;
    const flag = flagOf(loc.map((part) => (typeof part === 'string' ? fromWireName(part) : part)).join('.'));
    if (flag === undefined) return entry;
    named = true;
    return { ...entry, loc: [flag] };
  });
  if (!named) return error;
  return new ServiceValidationError(detail, { method: error.method, path: error.path, serverMessage: error.serverMessage, cause: error });
}

/**
 * Refuses, before anything starts, an operation that needs a service which outlives this command
 * (a task or run created earlier, or a task left for later): the embedded emulator starts empty
 * for each command, so it could only answer 404. `need` says what needs it, in words.
 */
export function requirePersistentService(settings: ServiceSettings, need: string): void {
  if (!settings.useEmulator) return;
  throw new UsageError(
    `${need}, but no base URL is configured, and the embedded emulator starts ` +
      `empty for each command: it could only answer 404. Point --base-url (or ${ENV_BASE_URL}) at the service, ` +
      `or run \`rt-translate emulator\` in another terminal and use its baseUrl for the task's whole life.`,
  );
}

/**
 * `serviceSettings` of a command with the task flags: `--run` and `--no-wait` need a service that
 * outlives the command (the task `--no-wait` leaves is waited for and fetched by later commands).
 */
export async function taskSettings(values: TaskValues, io: CliIo, stdinTaken?: string): Promise<ServiceSettings> {
  const settings = await serviceSettings(values, io, stdinTaken);
  const runId = runFlag(values);
  if (runId !== undefined) requirePersistentService(settings, `--run ${runId} needs the service that made it`);
  if (values['no-wait']) {
    requirePersistentService(settings, '--no-wait leaves the task to later commands (task-status, then --run), which need the service that made it');
  }
  return settings;
}

/** `--run ID` as a run id, or undefined; `--run` with `--no-wait` is a usage error. */
export function runFlag(values: TaskValues): number | undefined {
  const runId = intFlag(values.run, '--run', 1);
  if (runId !== undefined && values['no-wait']) throw new UsageError('--run and --no-wait do not go together: --run fetches a result, --no-wait only creates a task.');
  return runId;
}

/**
 * The run a command's result comes from: `--run ID` as given; else the task `create` makes,
 * announced on stderr and waited for (a progress line on a terminal), its run announced too.
 * With `--no-wait`, prints `{"task_id","kind"}` on stdout and how to go on on stderr, and
 * returns undefined.
 */
export async function taskRun(
  io: CliIo,
  service: Service,
  kind: TaskKind,
  values: TaskValues,
  create: (signal: AbortSignal) => Promise<CreatedTask>,
): Promise<number | undefined> {
  const given = runFlag(values);
  if (given !== undefined) return given;
  const task = await create(service.signal);
  if (values['no-wait']) {
    io.stdout.write(`${JSON.stringify({ task_id: task.taskId, kind })}\n`);
    io.stderr.write(
      `rt-translate: task ${task.taskId} (${kind}) created; wait for it with \`rt-translate task-status ${kind} ${task.taskId} --wait\`, ` +
        'then fetch its result with --run RUN_ID\n',
    );
    return undefined;
  }
  io.stderr.write(`rt-translate: task ${task.taskId} (${kind}) created\n`);
  const run = await waitForRun(io, service, kind, task.taskId);
  io.stderr.write(`rt-translate: task ${task.taskId}: run ${run.runId}\n`);
  return run.runId;
}

/** The task's own final statuses, or a task the service does not know (404): nothing is left to resume. */
function nothingToResume(error: unknown): boolean {
  return (
    error instanceof TaskFailedError ||
    error instanceof TaskTimeoutError ||
    error instanceof PaymentRequiredError ||
    (error instanceof HttpStatusError && error.status === 404)
  );
}

/**
 * Waits for task `taskId` of `kind`, with a progress line on a terminal. A status read that fails
 * is said on stderr when a run of failures starts and when it ends (the wait goes on until its
 * limit). When the wait ends without the task's final status (its limit passed, a failure no
 * retry fixes, Ctrl-C), stderr says that the task may still be running and how to resume: with
 * `task-status KIND TASK_ID --wait`, then `--run` (not for the embedded emulator, whose tasks
 * end with the command). `seen` gets each status read.
 */
export async function waitForRun(
  io: CliIo,
  service: Pick<Service, 'client' | 'emulator' | 'signal'>,
  kind: TaskKind,
  taskId: string,
  seen?: (progress: TaskProgress) => void,
): Promise<CompletedTask> {
  const progress = taskProgress(io, `task ${taskId}`);
  let failing = 0;
  const onReadFailure = (failure: TaskReadFailure): void => {
    progress.onReadFailure(failure);
    if (failing++ > 0) return;
    progress.line(
      `rt-translate: task ${taskId}: reading its status failed (${failure.error.message.replace(/\.$/, '')} [${failure.error.code}]); ` +
        `trying again in ${(failure.retryInMs / 1000).toFixed(1)} s, until the wait's limit`,
    );
  };
  const onProgress = (p: TaskProgress): void => {
    if (failing > 0) progress.line(`rt-translate: task ${taskId}: status read again after ${failing} failed ${failing === 1 ? 'read' : 'reads'}`);
    failing = 0;
    progress.onProgress(p);
    seen?.(p);
  };
  try {
    return await service.client.waitForTask(kind, taskId, { signal: service.signal, onProgress, onReadFailure });
  } catch (error) {
    if (!nothingToResume(error) && service.emulator === undefined) {
      progress.line(
        `rt-translate: task ${taskId} (${kind}) may still be running, and the service bills it: wait for it again with ` +
          `\`rt-translate task-status ${kind} ${taskId} --wait\`, then fetch its result with --run RUN_ID`,
      );
    }
    throw error;
  } finally {
    progress.stop();
  }
}

/* ----------------------------------------------------------------------------------------- */
/* Output                                                                                    */

/** Where audio goes: a file or standard output. Writes wait for drain; `close` keeps all. */
export interface AudioSink {
  /** `standard output` or the path. */
  label: string;
  toStdout: boolean;
  write(chunk: Buffer): Promise<void>;
  /** Ends the file (never standard output) and waits until everything is written. */
  close(): Promise<void>;
}

function isTerminal(stream: Writable): boolean {
  return (stream as Writable & { isTTY?: boolean }).isTTY === true;
}

/** True when `-o` means standard output. */
export function isStdout(path: string | undefined): boolean {
  return path === undefined || path === '-';
}

/**
 * Checks that audio can go to `path` (absent or `-`: standard output, which must not be a
 * terminal) before any request: a problem is a usage error (a `FileError` for the file). Nothing
 * is created but, with `createDirs`, the missing directories: the file is written as
 * `PATH.partial` and renamed once complete (`../output-file.ts`).
 */
export async function checkOutput(path: string | undefined, io: CliIo, createDirs = false): Promise<void> {
  if (isStdout(path)) {
    if (isTerminal(io.stdout)) {
      throw new UsageError('refusing to write audio to a terminal: pass -o PATH, or redirect standard output.');
    }
    return;
  }
  await openOutputFile(io, path!, { createDirs });
}

async function writeTo(stream: Writable, chunk: Buffer): Promise<void> {
  if (!stream.write(chunk)) await once(stream, 'drain');
}

async function endFile(stream: WriteStream | WavFileWriter): Promise<void> {
  if (stream.destroyed) return;
  const closed = once(stream, 'close');
  stream.end();
  await closed;
}

/** Raw bytes to `path` (checked by `checkOutput`) or standard output. */
export function openRawSink(path: string | undefined, io: CliIo): AudioSink {
  if (isStdout(path)) {
    return {
      label: 'standard output',
      toStdout: true,
      write: (chunk) => writeTo(io.stdout, chunk),
      close: async () => {
        if (io.stdout.writableNeedDrain) await once(io.stdout, 'drain');
      },
    };
  }
  const file = createWriteStream(path!);
  const failed = once(file, 'error').then(([error]) => Promise.reject(error as Error));
  failed.catch(() => undefined);
  return {
    label: path!,
    toStdout: false,
    write: (chunk) => Promise.race([writeTo(file, chunk), failed]),
    close: () => Promise.race([endFile(file), failed]),
  };
}

/** PCM16 LE to a WAV file at `path`, whose header gets the exact sizes on `close`. */
export function openWavSink(path: string, rate: number, channels: number): AudioSink {
  const file = new WavFileWriter(path, { format: 's16le', rate, channels });
  const failed = once(file, 'error').then(([error]) => Promise.reject(error as Error));
  failed.catch(() => undefined);
  return {
    label: path,
    toStdout: false,
    write: (chunk) => Promise.race([writeTo(file, chunk), failed]),
    close: () => Promise.race([endFile(file), failed]),
  };
}

/** PCM16 LE that a command decoded itself: its layout, and whether it goes into a WAV container. */
export interface PcmLayout {
  rate: number;
  channels: number;
  container: 'wav' | 'raw';
}

/**
 * Where a command's audio goes, checked (a usage error otherwise) before the audio is asked for:
 * the function returned copies a source there as it arrives (PCM16 LE laid out as `pcm`, or the
 * bytes as they come). Standard output for `-` or no `output`; else a file written as
 * `OUTPUT.partial` and renamed once complete (for `pcm` in a WAV container, a WAV file with
 * exact sizes). After a failure or an interruption the audio received so far stays in
 * `OUTPUT.partial`, valid as far as it goes (a WAV's sizes, a FLAC's last frame), as a stderr
 * line says (a file without audio is removed); `OUTPUT` is never written half. The copy starts
 * at once, so a source that fails early is never left unwatched.
 */
export async function audioOutput(service: Service, output: string | undefined): Promise<(source: Readable, pcm?: PcmLayout) => Promise<number>> {
  const { io } = service;
  if (isStdout(output)) return (source) => copyToSink(source, openRawSink(undefined, io));
  const file = await openOutputFile(io, output!);
  return (source, pcm) => {
    const content: OutputContent = pcm?.container === 'raw' ? { kind: 'pcm', bytesPerSecond: 2 * pcm.rate * pcm.channels } : { kind: 'file' };
    const sink = (path: string): AudioSink => (pcm?.container === 'wav' ? openWavSink(path, pcm.rate, pcm.channels) : openRawSink(path, io));
    return writeOutputFile(file, (path) => copyToSink(source, sink(path)), { content, report: (partial) => service.kept(file, partial) });
  };
}

/** `text` to `output`: standard output, or a file written whole (as `audioOutput` does; nothing kept after a failure). */
export async function writeTextOutput(output: string | undefined, io: CliIo, text: string): Promise<void> {
  if (isStdout(output)) {
    await openRawSink(undefined, io).write(Buffer.from(text));
    return;
  }
  await writeOutputFile(await openOutputFile(io, output!), (path) => writeFile(path, text));
}

/**
 * Copies `source` into `sink` as it arrives, then closes the sink, also after a failure, so
 * what was received is kept. Rethrows the failure (of the source first). Returns the bytes.
 */
export async function copyToSink(source: Readable, sink: AudioSink): Promise<number> {
  let bytes = 0;
  let failure: unknown;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      await sink.write(chunk);
      bytes += chunk.length;
    }
  } catch (error) {
    failure = error;
    if (!source.destroyed) source.destroy();
  }
  try {
    await sink.close();
  } catch (error) {
    failure ??= error;
  }
  if (failure !== undefined) throw failure;
  return bytes;
}

/* ----------------------------------------------------------------------------------------- */
/* Downloads to files                                                                        */

/** A download that failed; `partial` names the file holding what was received, if any. */
export class DownloadError extends Error {
  constructor(
    readonly failure: unknown,
    readonly partial: PartialFile | undefined,
  ) {
    super(failure instanceof Error ? failure.message : String(failure));
  }
}

/**
 * Downloads the file `open` opens to `path` (written as `path.partial`, renamed once complete),
 * saying on stderr when it resumes (`label` names it). On failure the bytes received stay in
 * `path.partial` (a FLAC there cut after its last complete frame; an empty one is removed),
 * named by the `DownloadError`; after an interruption the service says so at once.
 */
export async function downloadToFile(service: Service, open: () => Promise<FlacDownloadStream>, path: string, label: string): Promise<number> {
  const { io } = service;
  let kept: PartialFile | undefined;
  try {
    const file = await openOutputFile(io, path);
    return await writeOutputFile(
      file,
      async (partial) => {
        const download = await open();
        download.on('retry', (info) => io.stderr.write(`${describeRetry(label, info)}\n`));
        return copyToSink(download, openRawSink(partial, io));
      },
      {
        report: (partial) => {
          if (service.signal.aborted) service.kept(file, partial);
          else kept = partial;
        },
      },
    );
  } catch (error) {
    throw new DownloadError(error, kept);
  }
}

/* ----------------------------------------------------------------------------------------- */
/* Progress                                                                                  */

/** A live status line on stderr when it is a terminal; nothing otherwise. */
export interface ProgressLine {
  /** Shows `text` (replaced by the next call). */
  show(text: string): void;
  /** Prints a permanent line (the live line is cleared first and redrawn by the next `show`). */
  line(text: string): void;
  /** Clears the live line. */
  stop(): void;
}

export function progressLine(io: CliIo): ProgressLine {
  const tty = io.stderr.isTTY === true;
  let shown = false;
  const clear = (): void => {
    if (shown) io.stderr.write('\r\x1b[K');
    shown = false;
  };
  return {
    show(text) {
      if (!tty) return;
      // Cut to the terminal's width: a line that wraps leaves a copy behind at every redraw.
      io.stderr.write(`\r\x1b[K${fitToWidth(text, io.stderr.columns)}`);
      shown = true;
    },
    line(text) {
      clear();
      io.stderr.write(`${text}\n`);
    },
    stop: clear,
  };
}

/** A task wait's progress line: `onProgress` and `onReadFailure` go to the wait. */
export interface TaskProgressLine {
  onProgress(progress: TaskProgress): void;
  onReadFailure(failure: TaskReadFailure): void;
  /** Prints a permanent line on stderr (the live line is redrawn after it). */
  line(text: string): void;
  /** Ends the ticker and clears the line. */
  stop(): void;
  last(): TaskProgress | undefined;
}

/**
 * Shows a task's status, the time waited and the status reads that failed on the progress line,
 * refreshed every 250 ms between polls.
 */
export function taskProgress(io: CliIo, what: string): TaskProgressLine {
  const progress = progressLine(io);
  const start = Date.now();
  let last: TaskProgress | undefined;
  let failedReads = 0;
  const render = (): void => {
    const status = last?.status ?? 'submitted';
    const failed = failedReads > 0 ? `, ${failedReads} status ${failedReads === 1 ? 'read' : 'reads'} failed` : '';
    progress.show(`${what}: ${status}, ${((Date.now() - start) / 1000).toFixed(1)} s${failed}`);
  };
  const ticker = io.stderr.isTTY === true ? setInterval(render, 250) : undefined;
  ticker?.unref();
  render();
  return {
    onProgress(p) {
      last = p;
      failedReads = p.failedReads;
      render();
    },
    onReadFailure(failure) {
      failedReads = failure.failedReads;
      render();
    },
    line(text) {
      progress.line(text);
      render();
    },
    stop() {
      if (ticker) clearInterval(ticker);
      progress.stop();
    },
    last: () => last,
  };
}

/** The stderr line for a resumed download. */
export function describeRetry(what: string, info: FlacDownloadRetry): string {
  const reason =
    info.reason === 'expired'
      ? 'the URL expired; asked for a fresh one'
      : info.reason === 'status'
        ? `HTTP ${info.status ?? '?'}`
        : info.reason === 'timeout'
          ? 'no data came in time'
          : info.reason === 'connect'
            ? 'could not connect'
            : 'the connection was lost';
  return `rt-translate: ${what}: ${reason}; going on from byte ${info.offset}`;
}
