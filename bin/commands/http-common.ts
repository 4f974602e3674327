/**
 * What the HTTP subcommands (`tts`, `translated-tts`, `transcribe`, `dub`, `subtitles`,
 * `separate`, `separate-results`, `voices`, `task-status`, ...) share: the service flags and
 * their checks, the client (on the configured base URL or the embedded emulator), Ctrl-C, and:
 *
 * - progress (`Service.progress`, a `LiveStatus`): task waits (what is waited for, its status, the
 *   next check), uploads, audio streams and downloads (bytes, seconds of audio, time) on one
 *   line of stderr, redrawn on a terminal, plain lines with `--progress`, none with
 *   `--no-progress`;
 * - task waits (`taskRun`, `waitForRun`): the task and its run named on stderr, failed status
 *   reads said when they start and stop failing, and after a wait that ended without the task's
 *   final status, the command that resumes it;
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
import type { RunningEmulator } from '../../lib/emulator/server.js';
import { EMULATOR_DEFAULT_API_KEY, ENV_HOME, ENV_XDG_STATE_HOME, NO_STATE_DIR, embeddedRefusalHint, emulatorStateDir, startEmbeddedEmulator } from '../embedded-emulator.js';
import { ValidationError } from '../../lib/errors.js';
import { HttpStatusError, PaymentRequiredError, ServiceValidationError, TaskFailedError } from '../../lib/http/errors.js';
import { fromWireName } from '../../lib/http/wire.js';
import { validate, type Check } from '../../lib/http/validation.js';
import type { UploadProgress } from '../../lib/http/multipart.js';
import type { CreatedTask } from '../../lib/http/endpoint-kit.js';
import { TASK_KIND_SPECS, type TaskKind } from '../../lib/http/task-kinds.js';
import type { parseArgs, ParseArgsConfig } from 'node:util';
import { UsageError, intFlag, interruptedStatus, onInterrupt, parseCommandLine, type CliIo, type InterruptSignal } from '../cli.js';
import { LiveStatus, PROGRESS_OPTIONS, PROGRESS_USAGE, progressMode, type ProgressMode } from '../status-line.js';
import { keptLine, openOutputFile, writeOutputFile, type OutputContent, type OutputFile, type PartialFile } from '../output-file.js';
import { API_KEY_OPTIONS, FLAG_HINTS, apiKeyUsage, keySource, resolveKeyFlags, type ApiKeyFlags } from '../api-key.js';

/** A subcommand's options, in `parseArgs` form. */
export type CommandOptions = NonNullable<ParseArgsConfig['options']>;

/** What `parseArgs` answers for the options `O` of a subcommand. */
export type ParsedCommand<O extends CommandOptions> = ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: boolean }>>;

/**
 * Parses a subcommand's arguments (a parse error, or an argument where `allowPositionals` is
 * false, is a usage error pointing to the command's own help, the command named by the first
 * line of `usage`). With `--help`, prints `usage` on stdout and returns undefined: the command
 * then ends with status 0.
 */
export function parseCommand<O extends CommandOptions>(args: string[], options: O, usage: string, io: CliIo, allowPositionals = false): ParsedCommand<O> | undefined {
  const command = /^Usage: (rt-translate(?: [a-z][a-z-]*)?)/.exec(usage)?.[1] ?? 'rt-translate';
  const parsed = parseCommandLine({ args, options, strict: true, allowPositionals }, `${command} --help`);
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

/** Flags of the subcommands that wait for a task: its polling, and the progress line. */
export const POLL_OPTIONS = {
  'poll-ms': { type: 'string' },
  ...PROGRESS_OPTIONS,
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

export { PROGRESS_OPTIONS, PROGRESS_USAGE };

export const POLL_USAGE = `  --poll-ms MS          poll every MS (default: the service's guidance, 2 s growing to 5 s
                        for speech, 15 s growing to 60 s for subtitles and separation)
${PROGRESS_USAGE}`;

export const TASK_USAGE = `  --no-wait             create the task, print {"task_id":...,"kind":...} on stdout and exit
                        (the embedded emulator remembers it for the next commands, as the
                        service and a running \`rt-translate emulator\` do)
  --run ID              skip the task: fetch the result of the finished run ID (from an earlier
                        --no-wait, then task-status --wait)
${POLL_USAGE}`;

export const EXIT_USAGE_TEXT = `Exit status: 0 done; 1 service or network failure (the message names the cause; an output
file is written whole or not at all: audio received before a failure is kept in OUT.partial,
said on stderr); 2 usage or configuration error, before any request.`;

/** Time a task of the embedded emulator stays PENDING, ms (it says so in each status answer: the wait follows). */
const EMBEDDED_TASK_MS = 500;

export interface ServiceValues extends ApiKeyFlags {
  'base-url'?: string;
  'allow-insecure'?: boolean;
  emulator?: boolean;
  'poll-ms'?: string;
  progress?: boolean;
  'no-progress'?: boolean;
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
  /** Where the key came from (`--api-key`, ...), for the embedded emulator's notice; undefined without one. */
  keySource: string | undefined;
  allowInsecure: boolean;
  /** Start the embedded emulator. */
  useEmulator: boolean;
  /** Where the embedded emulator remembers (undefined: it remembers nothing, or the service is used). */
  stateDir: string | undefined;
  /** Fixed polling interval, ms, from `--poll-ms`. */
  pollMs: number | undefined;
  /** How progress is shown (`--progress`, `--no-progress`, and whether stderr is a terminal). */
  progress: ProgressMode;
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
  const progress = progressMode(values, io.stderr);
  return {
    baseUrl: useEmulator ? undefined : baseOption,
    apiKey,
    keySource: keySource(values, io.env),
    allowInsecure,
    useEmulator,
    stateDir: useEmulator ? emulatorStateDir(io.env) : undefined,
    pollMs,
    progress,
  };
}

/** A client on the configured service or the embedded emulator, and Ctrl-C (or SIGTERM) as an AbortSignal. */
export interface Service {
  client: LocalizationClient;
  emulator: RunningEmulator | undefined;
  /** Aborted by SIGINT or SIGTERM. */
  signal: AbortSignal;
  io: CliIo;
  /** The command's progress line on stderr (its steps: `waitForRun`, `withTransfer`). */
  progress: LiveStatus;
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
  const pollMs = settings.pollMs;
  if (settings.useEmulator) {
    emulator = await startEmbeddedEmulator(io, settings.keySource, { taskMs: EMBEDDED_TASK_MS });
    apiKey = EMULATOR_DEFAULT_API_KEY;
    baseUrl = emulator.baseUrl;
  }
  const fixed = pollMs === undefined ? undefined : { initialIntervalMs: pollMs, maxIntervalMs: pollMs, factor: 1 };
  const controller = new AbortController();
  let interruptedBy: InterruptSignal | undefined;
  const stopListening = onInterrupt(io, (signal) => {
    interruptedBy ??= signal;
    controller.abort(new Error('interrupted'));
  });
  const progress = new LiveStatus(io.stderr, settings.progress);
  let keptFiles = 0;
  const kept = (file: OutputFile, partial: PartialFile): void => {
    keptFiles++;
    progress.print(keptLine(file, partial, controller.signal.aborted).trimEnd());
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
    return await body({ client, emulator, signal: controller.signal, io, progress, kept });
  } catch (error) {
    progress.stop();
    if (interruptedBy !== undefined) {
      if (keptFiles === 0) io.stderr.write('rt-translate: interrupted\n');
      return interruptedStatus(interruptedBy);
    }
    const hint = emulator === undefined ? undefined : embeddedRefusalHint(error, emulator.stateDir);
    if (hint !== undefined) io.stderr.write(`${hint}\n`);
    throw withFlagNames(error);
  } finally {
    progress.stop();
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
    const got = error.received;
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
 * (a task or run created earlier, or a task left for later) when the embedded emulator would
 * answer it without a state directory: it then remembers nothing, so it could only answer 404.
 * With one, it remembers the tasks and runs of earlier commands. `need` says what needs it.
 */
export function requirePersistentService(settings: ServiceSettings, need: string): void {
  if (!settings.useEmulator || settings.stateDir !== undefined) return;
  throw new UsageError(
    `${need}, but no base URL is configured, and the embedded emulator remembers nothing between commands here ` +
      `(${NO_STATE_DIR}): it could only answer 404. Set ${ENV_XDG_STATE_HOME} or ${ENV_HOME}, point --base-url ` +
      `(or ${ENV_BASE_URL}) at the service, or run \`rt-translate emulator\` in another terminal and use its baseUrl for the task's whole life.`,
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
    service.progress.print(
      `rt-translate: task ${task.taskId} (${kind}) created; wait for it with \`rt-translate task-status ${kind} ${task.taskId} --wait\`, ` +
        'then fetch its result with --run RUN_ID',
    );
    return undefined;
  }
  service.progress.print(`rt-translate: task ${task.taskId} (${kind}) created`);
  const run = await waitForRun(io, service, kind, task.taskId);
  service.progress.print(`rt-translate: task ${task.taskId}: run ${run.runId}`);
  return run.runId;
}

/** The task's own final statuses, or a task the service does not know (404): nothing is left to resume. */
function nothingToResume(error: unknown): boolean {
  return (
    error instanceof TaskFailedError ||
    (error instanceof PaymentRequiredError && error.taskId !== undefined) ||
    (error instanceof HttpStatusError && error.status === 404)
  );
}

/**
 * Waits for task `taskId` of `kind`, with its progress on the command's line (`waitText`). A status read that fails
 * is said on stderr when a run of failures starts and when it ends (the wait goes on until its
 * limit). When the wait ends without the task's final status (its limit passed, a failure no
 * retry fixes, Ctrl-C), stderr says that the task may still be running and how to resume: with
 * `task-status KIND TASK_ID --wait`, then `--run` (not for an embedded emulator that remembers
 * nothing, whose tasks end with the command). `seen` gets each status read; `readAtOnce` reads
 * the status at once (a task created earlier may be final already), then polls.
 */
export async function waitForRun(
  io: CliIo,
  service: Pick<Service, 'client' | 'emulator' | 'signal' | 'progress'>,
  kind: TaskKind,
  taskId: string,
  seen?: (progress: TaskProgress) => void,
  readAtOnce?: boolean,
): Promise<CompletedTask> {
  const { progress } = service;
  const start = Date.now();
  // As the wait does: a server that announced its pace (the emulator) is read at once, the service after the schedule's first interval.
  const atOnce = readAtOnce === true || service.client.emulatorVersion !== undefined;
  const wait: WaitProgress = {
    kind,
    status: undefined,
    failedReads: 0,
    nextCheckAt: start + (atOnce ? 0 : service.client.pollingFor(TASK_KIND_SPECS[kind].profile).initialIntervalMs),
    now: start,
    start,
  };
  progress.show(() => waitText({ ...wait, now: Date.now() }));
  let failing = 0;
  const onReadFailure = (failure: TaskReadFailure): void => {
    wait.failedReads = failure.failedReads;
    wait.nextCheckAt = Date.now() + failure.retryInMs;
    progress.refresh();
    if (failing++ > 0) return;
    progress.print(
      `rt-translate: task ${taskId}: reading its status failed (${failure.error.message.replace(/\.$/, '')} [${failure.error.code}]); ` +
        `trying again in ${(failure.retryInMs / 1000).toFixed(1)} s, until the wait's limit`,
    );
  };
  const onProgress = (p: TaskProgress): void => {
    if (failing > 0) progress.print(`rt-translate: task ${taskId}: status read again after ${failing} failed ${failing === 1 ? 'read' : 'reads'}`);
    failing = 0;
    wait.status = p.status;
    wait.failedReads = p.failedReads;
    wait.nextCheckAt = p.nextPollInMs === undefined ? undefined : Date.now() + p.nextPollInMs;
    progress.refresh();
    seen?.(p);
  };
  try {
    return await service.client.tasks.wait(kind, taskId, { signal: service.signal, onProgress, onReadFailure, ...(readAtOnce ? { readAtOnce } : {}) });
  } catch (error) {
    progress.stop();
    // An embedded emulator without a state directory forgets the task with this command.
    const remembered = service.emulator === undefined || service.emulator.stateDir !== undefined;
    if (!nothingToResume(error) && remembered) {
      progress.print(
        `rt-translate: task ${taskId} (${kind}) may still be running${service.emulator === undefined ? ', and the service bills it' : ''}: wait for it again with ` +
          `\`rt-translate task-status ${kind} ${taskId} --wait\`, then fetch its result with --run RUN_ID`,
      );
    }
    throw error;
  } finally {
    progress.stop();
  }
}

/**
 * Where a result of the embedded emulator is on disk, given the presigned URL it answered: its
 * URL dies with the command, its file stays in the state directory (until the cap removes it).
 * Undefined for the service, a running \`rt-translate emulator\`, or an embedded emulator that
 * remembers nothing: their URLs are printed as they are.
 */
export function localResult(service: Service, url: string): string | undefined {
  return service.emulator?.localFilePath(url);
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
 * at once, so a source that fails early is never left unwatched; `counted` is shown each piece
 * once written (for progress).
 */
export async function audioOutput(
  service: Service,
  output: string | undefined,
): Promise<(source: Readable, pcm?: PcmLayout, counted?: (chunk: Buffer) => void) => Promise<number>> {
  const { io } = service;
  if (isStdout(output)) return (source, _pcm, counted) => copyToSink(source, openRawSink(undefined, io), counted);
  const file = await openOutputFile(io, output!);
  return (source, pcm, counted) => {
    const content: OutputContent = pcm?.container === 'raw' ? { kind: 'pcm', bytesPerSecond: 2 * pcm.rate * pcm.channels } : { kind: 'file' };
    const sink = (path: string): AudioSink => (pcm?.container === 'wav' ? openWavSink(path, pcm.rate, pcm.channels) : openRawSink(path, io));
    return writeOutputFile(file, (path) => copyToSink(source, sink(path), counted), { content, report: (partial) => service.kept(file, partial) });
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
 * what was received is kept. Rethrows the failure (of the source first). Returns the bytes;
 * `counted` is shown each piece once written.
 */
export async function copyToSink(source: Readable, sink: AudioSink, counted?: (chunk: Buffer) => void): Promise<number> {
  let bytes = 0;
  let failure: unknown;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      await sink.write(chunk);
      bytes += chunk.length;
      counted?.(chunk);
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
 * its progress on the command's line and, when it resumes, a line on stderr (`label` names it).
 * On failure the bytes received stay in `path.partial` (a FLAC there cut after its last complete
 * frame; an empty one is removed), named by the `DownloadError`; after an interruption the
 * service says so at once.
 */
export async function downloadToFile(service: Service, open: () => Promise<FlacDownloadStream>, path: string, label: string): Promise<number> {
  const { io, progress } = service;
  let kept: PartialFile | undefined;
  try {
    const file = await openOutputFile(io, path);
    return await withTransfer(progress, { what: `downloading ${label}`, done: `downloaded ${label}` }, async (transfer) =>
      writeOutputFile(
        file,
        async (partial) => {
          const download = await open();
          transfer.source(downloadSource(download, false));
          download.on('retry', (info) => progress.print(describeRetry(label, info)));
          return copyToSink(download, openRawSink(partial, io), (chunk) => transfer.add(chunk.length));
        },
        {
          report: (partial) => {
            if (service.signal.aborted) service.kept(file, partial);
            else kept = partial;
          },
        },
      ),
    );
  } catch (error) {
    throw new DownloadError(error, kept);
  }
}

/* ----------------------------------------------------------------------------------------- */
/* Progress                                                                                  */

/** A size in decimal units, as file managers show it: `812 B`, `12.3 kB`, `72.7 MB`, `1.20 GB`. */
export function byteText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  if (bytes < 1e9) return `${(bytes / 1e6).toFixed(1)} MB`;
  return `${(bytes / 1e9).toFixed(2)} GB`;
}

/** A time waited or taken, whole seconds: `12 s`, `3 min 05 s`, `1 h 02 min`. */
export function elapsedText(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  if (total < 60) return `${total} s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return `${minutes} min ${String(total % 60).padStart(2, '0')} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** A length of audio: tenths of a second under a minute (`45.0 s`), else as `elapsedText`. */
export function audioText(seconds: number): string {
  return seconds < 60 ? `${seconds.toFixed(1)} s` : elapsedText(seconds * 1000);
}

/** Where a task wait is (times in ms since the epoch). */
export interface WaitProgress {
  kind: TaskKind;
  /** The last status read; undefined before the first. */
  status: string | undefined;
  failedReads: number;
  /** When the next status read is due; undefined once the task is final. */
  nextCheckAt: number | undefined;
  now: number;
  start: number;
}

/**
 * The line of a task wait: what is waited for, the last status, failed reads, when the next
 * check is, and the time waited: `waiting for the dub task (status PENDING, next check in 4 s), 12 s`.
 */
export function waitText(p: WaitProgress): string {
  const parts = [p.status === undefined ? 'submitted' : `status ${p.status}`];
  if (p.failedReads > 0) parts.push(`${p.failedReads} status ${p.failedReads === 1 ? 'read' : 'reads'} failed`);
  if (p.nextCheckAt !== undefined) {
    const inMs = p.nextCheckAt - p.now;
    const next = p.status === undefined && p.failedReads === 0 ? 'first check' : 'next check';
    parts.push(inMs > 0 ? `${next} in ${Math.ceil(inMs / 1000)} s` : 'checking now');
  }
  return `waiting for the ${p.kind} task (${parts.join(', ')}), ${elapsedText(p.now - p.start)}`;
}

/** Where a transfer is. */
export interface TransferProgress {
  /** What moves, in words: `uploading talk.wav`, `receiving the audio`. */
  what: string;
  /** Bytes moved so far; undefined before the first (the service has not answered yet). */
  bytes: number | undefined;
  totalBytes?: number | undefined;
  /** Seconds of audio moved so far and in all, where the stream says. */
  audioSeconds?: number | undefined;
  totalAudioSeconds?: number | undefined;
  elapsedMs: number;
}

/**
 * The line of a transfer: `receiving the audio: 2.1 MB, 45.0 s of audio, 9 s`, or with what the
 * stream says of its whole, `downloading the audio: 12.3 MB of 72.7 MB, 30 min 00 s of audio in
 * all, 14 s`; before the first byte, `...: waiting for the service, 3 s`.
 */
export function transferText(p: TransferProgress): string {
  if (p.bytes === undefined) return `${p.what}: waiting for the service, ${elapsedText(p.elapsedMs)}`;
  const amount = [p.totalBytes !== undefined ? `${byteText(p.bytes)} of ${byteText(p.totalBytes)}` : byteText(p.bytes)];
  if (p.audioSeconds !== undefined) {
    amount.push(`${audioText(p.audioSeconds)}${p.totalAudioSeconds !== undefined ? ` of ${audioText(p.totalAudioSeconds)}` : ''} of audio`);
  } else if (p.totalAudioSeconds !== undefined) {
    amount.push(`${audioText(p.totalAudioSeconds)} of audio in all`);
  }
  return `${p.what}: ${amount.join(', ')}, ${elapsedText(p.elapsedMs)}`;
}

/** What a transfer's source can tell of itself (a download: its size and audio format). */
export interface TransferSource {
  readonly totalBytes?: number | undefined;
  /** Seconds of audio in `bytes` of the stream, and in all, where known. */
  audioSeconds?(bytes: number): number | undefined;
  totalAudioSeconds?(): number | undefined;
}

/**
 * What a transfer step (`withTransfer`) is told as it goes. Its summary reads, for example,
 * `rt-translate: downloaded audio of run 1001 (72.7 MB, 30 min 00 s of audio) in 14 s`.
 */
export interface Transfer {
  /** Counts `bytes` more moved. */
  add(bytes: number): void;
  /** Sets the bytes moved so far (an upload that started again counts from 0). */
  at(bytes: number): void;
  /** Where the sizes and seconds come from, once known. */
  source(source: TransferSource): void;
}

/** A transfer step: what moves (`uploading talk.wav`), what was done once it succeeded (`uploaded talk.wav`). */
export interface TransferStep {
  what: string;
  done: string;
  /** Bytes moved as the step starts: 0 for an upload, which starts at once; by default none until the service answers. */
  bytes?: number;
}

/**
 * Runs `body`, a transfer, as a step of `progress`: what moves, the bytes `body` counts on the
 * `Transfer` it is given, the total and the seconds of audio as its `source` knows them, the
 * time taken; once `body` succeeded, a summary saying what was done where progress is shown.
 */
export async function withTransfer<T>(progress: LiveStatus, step: TransferStep, body: (transfer: Transfer) => Promise<T>): Promise<T> {
  const { what } = step;
  const start = Date.now();
  let bytes = step.bytes;
  let from: TransferSource | undefined;
  const state = (): TransferProgress => ({
    what,
    bytes,
    totalBytes: from?.totalBytes,
    audioSeconds: bytes === undefined ? undefined : from?.audioSeconds?.(bytes),
    totalAudioSeconds: from?.totalAudioSeconds?.(),
    elapsedMs: Date.now() - start,
  });
  progress.show(() => transferText(state()));
  const transfer: Transfer = {
    add: (n) => {
      bytes = (bytes ?? 0) + n;
      progress.refresh();
    },
    at: (n) => {
      bytes = n;
      progress.refresh();
    },
    source: (source) => {
      from = source;
      progress.refresh();
    },
  };
  let result: T;
  try {
    result = await body(transfer);
  } catch (error) {
    progress.stop();
    throw error;
  }
  const p = state();
  const audio = p.audioSeconds ?? p.totalAudioSeconds;
  progress.stop(`rt-translate: ${step.done} (${byteText(p.bytes ?? 0)}${audio !== undefined ? `, ${audioText(audio)} of audio` : ''}) in ${elapsedText(p.elapsedMs)}`);
  return result;
}

/**
 * Runs `send`, an upload of `name`, as a step of `progress` (`withTransfer`): `send` passes the
 * callback it is given as the call's `onUploadProgress`.
 */
export function withUploadProgress<T>(progress: LiveStatus, name: string, send: (onUploadProgress: (p: UploadProgress) => void) => Promise<T>): Promise<T> {
  return withTransfer(progress, { what: `uploading ${name}`, done: `uploaded ${name}`, bytes: 0 }, (transfer) => {
    let total: number | undefined;
    transfer.source({
      get totalBytes() {
        return total;
      },
    });
    return send((p) => {
      total = p.totalBytes;
      transfer.at(p.sentBytes);
    });
  });
}

/**
 * What a download knows of itself, from its headers and (a FLAC) STREAMINFO: its size (of the
 * file), the seconds of audio in all, and with `decoded` (the bytes are PCM16) the seconds so far.
 */
export function downloadSource(download: FlacDownloadStream, decoded: boolean): TransferSource {
  return {
    get totalBytes() {
      return decoded ? undefined : download.totalBytes;
    },
    audioSeconds: (bytes) => {
      const format = download.format;
      return decoded && format ? bytes / (format.sampleRate * format.channels * 2) : undefined;
    },
    totalAudioSeconds: () => {
      const format = download.format;
      return format && format.totalSamples > 0 ? format.totalSamples / format.sampleRate : undefined;
    },
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
