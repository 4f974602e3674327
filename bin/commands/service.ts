/**
 * What the HTTP subcommands (`tts`, `translated-tts`, `transcribe`, `dub`, `subtitles`,
 * `separate`, `voices`, `task-status`, ...) share to reach the service: their flags and usage
 * text, the checks of those flags, the client on the configured base URL or the embedded
 * emulator (`withService`, with Ctrl-C and the progress line), a request checked before any
 * traffic with the flag named for each field (`checkRequest`, `withFlagNames`), and the task
 * flags (`taskSettings`).
 *
 * Task waits are in `task-waits.ts`, outputs in `outputs.ts`, progress text in `transfers.ts`.
 * Composition only; the protocol is in lib/http.
 */
import { ENV_BASE_URL, LocalizationClient, ValidationError, ServiceValidationError, type LocalizationClientOptions } from '../../lib/index.js';
import { parseServiceUrl, fromWireName, validate, type Check } from '../../lib/protocol.js';
import type { RunningEmulator } from '../../lib/emulator/index.js';
import {
  EMULATOR_DEFAULT_API_KEY,
  ENV_HOME,
  ENV_XDG_STATE_HOME,
  NO_STATE_DIR,
  embeddedRefusalHint,
  emulatorStateDir,
  startEmbeddedEmulator,
} from '../embedded-emulator.js';
import type { parseArgs, ParseArgsConfig } from 'node:util';
import { UsageError, intFlag, interruptedStatus, onInterrupt, parseCommandLine, type CliIo, type InterruptSignal } from '../cli.js';
import { LiveStatus, PROGRESS_OPTIONS, PROGRESS_USAGE, progressMode, type ProgressMode } from '../status-line.js';
import { keptLine, type OutputFile, type PartialFile } from '../output-file.js';
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
export function parseCommand<O extends CommandOptions>(
  args: string[],
  options: O,
  usage: string,
  io: CliIo,
  allowPositionals = false,
): ParsedCommand<O> | undefined {
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
  return (
    value
      ?.split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '') ?? []
  );
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
  if (!useEmulator)
    parseServiceUrl(baseOption!, values['base-url'] !== undefined ? '--base-url' : ENV_BASE_URL, 'https:', { allowInsecure, hints: FLAG_HINTS });
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
export async function withService(
  settings: ServiceSettings,
  io: CliIo,
  body: (service: Service) => Promise<number>,
  clientOptions: Pick<LocalizationClientOptions, 'rateLimiter'> = {},
): Promise<number> {
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
      ...clientOptions,
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

/** `--run ID` as a run id, or undefined; `--run` with `--no-wait` is a usage error. */
export function runFlag(values: TaskValues): number | undefined {
  const runId = intFlag(values.run, '--run', 1);
  if (runId !== undefined && values['no-wait'])
    throw new UsageError('--run and --no-wait do not go together: --run fetches a result, --no-wait only creates a task.');
  return runId;
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
