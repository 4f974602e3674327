/**
 * What the realtime commands (`translate`, `listen`) share: how they reach the service (the key
 * from `--api-key`, `--api-key-file` or the environment; the host from `--realtime-url` or the
 * environment, checked before any file is opened; the embedded emulator when no host is
 * configured) and where `--events` lines go (a file, or standard output with `-`).
 */
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ENV_REALTIME_URL, ConfigError, ValidationError } from '../lib/index.js';
import { resolveRealtimeUrl } from '../lib/protocol.js';
import type { RunningEmulator } from '../lib/emulator/index.js';
import { UsageError, resolvePath, type CliIo } from './cli.js';
import { openWriteStream, writeAll } from './audio-io.js';
import { prepareOutputDirectory } from './file-errors.js';
import { API_KEY_OPTIONS, FLAG_HINTS, keySource, resolveKeyFlags, type ApiKeyFlags } from './api-key.js';

/** What `--api-key-file -` means for a realtime command's input, in its help. */
export const REALTIME_STDIN_NOTE = "with '-', the audio must come from -i PATH";

/** The flags every realtime command takes to reach the service. */
export const ACCESS_OPTIONS = {
  ...API_KEY_OPTIONS,
  'realtime-url': { type: 'string' },
  'allow-insecure': { type: 'boolean' },
  emulator: { type: 'boolean' },
} as const;

export interface AccessFlags extends ApiKeyFlags {
  'realtime-url'?: string;
  'allow-insecure'?: boolean;
  emulator?: boolean;
  input?: string;
}

/** Where the session goes: the key and URL given, or the embedded emulator (started by `connect()`). */
export interface RealtimeAccess {
  apiKey: string | undefined;
  /** Where the key came from (`--api-key`, ...), for the embedded emulator's notice; undefined without one. */
  keySource: string | undefined;
  realtimeUrl: string | undefined;
  useEmulator: boolean;
}

/** Checks the access flags and reads the key; every problem is a usage error, before any traffic. */
export async function resolveAccess(values: AccessFlags, io: CliIo): Promise<RealtimeAccess> {
  const realtimeUrl = values['realtime-url'] ?? io.env[ENV_REALTIME_URL];
  const useEmulator = values.emulator === true || !realtimeUrl;
  const stdinTaken = values.input === undefined || values.input === '-' ? 'the audio must come from a file: pass -i PATH' : undefined;
  const apiKey = await resolveKeyFlags(values, io, { required: !useEmulator, stdinTaken });
  // An unusable URL is a configuration error, found before any file is opened or written.
  if (!useEmulator) {
    resolveRealtimeUrl(values['realtime-url'], { allowInsecure: values['allow-insecure'] === true, env: io.env, field: '--realtime-url', hints: FLAG_HINTS });
  }
  return { apiKey, keySource: keySource(values, io.env), realtimeUrl, useEmulator };
}

/**
 * The key and URL to use, starting the embedded emulator when no host is configured (said on
 * stderr; it takes its own key, never the user's: `./embedded-emulator.ts`). `emulator` is to be
 * closed when the command ends.
 */
export async function connect(
  access: RealtimeAccess,
  io: CliIo,
): Promise<{ apiKey: string | undefined; realtimeUrl: string | undefined; emulator: RunningEmulator | undefined }> {
  if (!access.useEmulator) return { apiKey: access.apiKey, realtimeUrl: access.realtimeUrl, emulator: undefined };
  const { startEmbeddedEmulator, EMULATOR_DEFAULT_API_KEY } = await import('./embedded-emulator.js');
  const emulator = await startEmbeddedEmulator(io, access.keySource);
  return { apiKey: EMULATOR_DEFAULT_API_KEY, realtimeUrl: emulator.realtimeUrl, emulator };
}

/**
 * What a translation opens before its session: whatever `open` opens (the outputs), the
 * `--events` output, then the key and URL (`connect`). When any of it fails, `release` frees what
 * the command opened before (the input, which may hold an ffmpeg process, and the outputs).
 */
export async function openBeforeSession(
  eventsFlag: string | undefined,
  access: RealtimeAccess,
  io: CliIo,
  createDirs: boolean,
  release: () => Promise<void>,
  open: () => Promise<void> = async () => {},
): Promise<{ events: Writable | undefined; target: Awaited<ReturnType<typeof connect>> }> {
  try {
    await open();
    const events = await openEventsOutput(eventsFlag, io, createDirs);
    return { events, target: await connect(access, io) };
  } catch (error) {
    await release();
    throw error;
  }
}

/** The translation command's flags that shape every session, whatever its languages. */
export interface TranslationFlags {
  'allow-insecure'?: boolean;
  'no-reconnect'?: boolean;
}

/**
 * The options of a translation session (or of each of a fan-out's) from the command's flags,
 * the key and URL `connect()` gave, and the command's abort signal; languages and voices aside.
 */
export function translationOptions(
  values: TranslationFlags,
  target: { apiKey: string | undefined; realtimeUrl: string | undefined },
  signal: AbortSignal,
  o: { textOnly: boolean; quietPeriodMs: number | undefined; responseStallTimeoutMs: number | undefined },
) {
  return {
    apiKey: target.apiKey,
    realtimeUrl: target.realtimeUrl,
    signal,
    allowInsecure: values['allow-insecure'] === true,
    ...(o.textOnly ? { outputModalities: ['text'] as const } : {}),
    ...(o.quietPeriodMs !== undefined ? { quietPeriodMs: o.quietPeriodMs } : {}),
    ...(o.responseStallTimeoutMs !== undefined ? { responseStallTimeoutMs: o.responseStallTimeoutMs } : {}),
    ...(values['no-reconnect'] === true ? { reconnect: false } : {}),
  };
}

/**
 * The session made by `create` from the flags' options. When it cannot be (a bad option is a
 * usage error), `release` frees what the command opened first and the embedded emulator closes.
 */
export async function createSession<T>(create: () => T, release: () => Promise<void>, emulator: RunningEmulator | undefined): Promise<T> {
  try {
    return create();
  } catch (error) {
    await release();
    await emulator?.close();
    if (error instanceof ValidationError || error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
}

/** `stream` behind a Writable whose end leaves it open (standard output, for `--events -`). */
function unclosable(stream: Writable): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      writeAll(stream, chunk).then(() => callback(), callback);
    },
  });
}

/**
 * Where `--events` lines go: standard output for `-`, else the file, opened (a `FileError` when
 * it cannot be; with `createDirs`, its missing directories are created first).
 */
export async function openEventsOutput(flag: string | undefined, io: CliIo, createDirs = false): Promise<Writable | undefined> {
  if (flag === undefined) return undefined;
  if (flag === '-') return unclosable(io.stdout);
  const use = { flag: '--events', path: flag };
  const absolute = resolvePath(io, flag);
  await prepareOutputDirectory(absolute, { ...use, role: 'output' }, createDirs);
  return openWriteStream(absolute, use);
}

/**
 * `--events`: a session's events (its `events()` iterator) as one JSON line each, then the
 * `trailer` line if any, into `file`, through one pipeline. The iterator holds the session back
 * when the file is slower than the session (the stream's own bound on a consumer that is
 * behind), so nothing queues here. Settles with the file's failure, or undefined; the session's
 * own failure ends the lines and is reported by the session's pipeline.
 */
export function logEvents<E>(events: AsyncIterable<E>, record: (event: E) => unknown, file: Writable, trailer?: () => unknown): Promise<unknown> {
  async function* lines(): AsyncGenerator<string> {
    try {
      for await (const event of events) yield `${JSON.stringify(record(event))}\n`;
    } catch {
      // The session failed: its pipeline reports why.
    }
    if (trailer) yield `${JSON.stringify(trailer())}\n`;
  }
  return pipeline(lines(), file).then(
    () => undefined,
    (error: unknown) => error,
  );
}
