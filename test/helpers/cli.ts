/**
 * Running `rt-translate` in tests, two ways with one result shape (`CliResult`):
 *
 * - In process (`runInProcess`, `startInProcess`): `main()` of `bin/main.ts` with an injected
 *   `CliIo` (stdin a stream the test feeds, stdout and stderr collected, terminals simulated by
 *   `isTTY`/`columns`, signals sent with `run.signal('SIGINT')`, `cwd` and `env` given). No
 *   process start, so argument, format and exit-status cases cost only their own work.
 * - Spawned (`runCli`, `spawnCli`, `startCliEmulator`): the built `dist/bin/rt-translate.js` as a
 *   child process with pipes, for what only a real process shows (signals from the OS, a reader
 *   that goes away, the exit status as the shell sees it). `npm run build` first (npm test does).
 *
 * Neither has a time limit of its own: the test's timeout bounds every run, and
 * `killAllChildren()` (call it in `afterAll`) ends every child still running, so a failing test
 * never leaves one behind.
 *
 * In process, a command sees only its `CliIo`: it must take signals from `signalsOf(io)` and
 * resolve relative paths with `resolvePath(io, path)` (bin/cli.ts) for `signal()` and `cwd` to
 * reach it, as the realtime and emulator commands do.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createServer, type AddressInfo } from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import { main } from '../../bin/main.js';
import type { CliIo } from '../../bin/cli.js';

/** The command as built by `npm run build`. */
export const CLI_PATH = fileURLToPath(new URL('../../dist/bin/rt-translate.js', import.meta.url));

/** Environment variables that would change what the command does; removed unless given. */
const CONFIG_ENV = ['RT_TRANSLATE_API_KEY', 'RT_TRANSLATE_REALTIME_URL', 'RT_TRANSLATE_BASE_URL', 'FFMPEG_PATH', 'NODE_OPTIONS'];

const live = new Set<ChildProcess>();

export interface CliResult {
  /** Exit status, or null when the child ended by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
}

export interface CliRunOptions {
  /** Added to a copy of the test's environment from which the rt-translate variables were removed. */
  env?: Record<string, string>;
  /** Bytes written to stdin, which is then closed. Default: an empty, closed stdin. */
  stdin?: Buffer;
  /** Called with each piece of stderr text as it arrives. */
  onStderr?: (text: string) => void;
  /** Working directory of the command. Default: the test's. */
  cwd?: string;
}

/**
 * The test's environment without the variables that configure rt-translate, plus `extra`. Its
 * `XDG_STATE_HOME` is the test file's temporary one (`state-home.ts`), never the user's.
 */
export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CONFIG_ENV) delete env[name];
  return { ...env, ...extra };
}

/* ----------------------------------------------------------------------------------------- */
/* In process                                                                                */

export interface InProcessOptions extends CliRunOptions {
  /** Simulate a terminal on stdout (`isTTY`). */
  stdoutTTY?: boolean;
  /** Simulate a terminal on stdin (`isTTY`). */
  stdinTTY?: boolean;
  /** Simulate a terminal on stderr (`isTTY`), `columns` wide. */
  stderrTTY?: boolean;
  /** Width of the simulated terminals. Default 80. */
  columns?: number;
  /** Replaces the collecting stdout (a reader that fails, a slow one); `result.stdout` is then empty. */
  stdout?: Writable;
  /** Called with each piece of stdout as it arrives. */
  onStdout?: (chunk: Buffer) => void;
}

/** A command running in this process. */
export interface InProcessRun {
  /** The command's standard input: write to it, end it. */
  stdin: PassThrough;
  /** Delivers a signal to the command (as the OS would to the process). */
  signal(name: 'SIGINT' | 'SIGTERM'): void;
  /** Settles when `main()` returns: exit status, stdout, stderr (`signal` is always null). */
  result: Promise<CliResult>;
}

/** Starts `rt-translate ARGS` in this process; the caller owns stdin. */
export function startInProcess(args: readonly string[], options: InProcessOptions = {}): InProcessRun {
  const stdin = Object.assign(new PassThrough(), options.stdinTTY ? { isTTY: true } : {});
  const out: Buffer[] = [];
  let stderr = '';
  const columns = options.columns ?? 80;
  const stdout =
    options.stdout ??
    Object.assign(
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          out.push(Buffer.from(chunk));
          options.onStdout?.(chunk);
          callback();
        },
      }),
      options.stdoutTTY ? { isTTY: true, columns } : {},
    );
  const stderrStream = Object.assign(
    new Writable({
      decodeStrings: false,
      write(chunk: Buffer | string, _encoding, callback) {
        const text = chunk.toString();
        stderr += text;
        options.onStderr?.(text);
        callback();
      },
    }),
    options.stderrTTY ? { isTTY: true, columns } : {},
  );
  const signals = new EventEmitter();
  const io: CliIo = { stdin, stdout, stderr: stderrStream, env: cliEnv(options.env), signals, cwd: options.cwd ?? process.cwd() };
  const result = main([...args], io).then((code) => ({ code, signal: null, stdout: Buffer.concat(out), stderr }));
  return { stdin, signal: (name) => signals.emit(name), result };
}

/** The texts a terminal's status line showed: each is `\r\x1b[K` then a text without a newline. */
export function statusTexts(stderr: string): string[] {
  return stderr
    .split('\r\x1b[K')
    .slice(1)
    .filter((part) => part !== '' && !part.includes('\n'));
}

/** The permanent lines of a terminal's stderr: without the status line's texts and control sequences. */
export function permanentLines(stderr: string): string[] {
  return (
    stderr
      // eslint-disable-next-line no-control-regex -- the terminal's erase-line sequence is what is removed
      .replace(/\r\x1b\[K[^\n\r]*(?=\r|$)/g, '')
      .replaceAll('\r\x1b[K', '')
      .split('\n')
      .filter((line) => line !== '')
  );
}

/** Runs `rt-translate ARGS` in this process to completion. */
export function runInProcess(args: readonly string[], options: InProcessOptions = {}): Promise<CliResult> {
  const run = startInProcess(args, options);
  run.stdin.end(options.stdin ?? Buffer.alloc(0));
  return run.result;
}

/** A part of a command's standard input: `audio`, written once `when` holds for what stderr has said so far. */
export interface StdinPart {
  audio: Buffer;
  when?: (stderr: string) => boolean;
}

/**
 * Runs `rt-translate ARGS` in this process with standard input written in parts, as a speaker
 * would: each part once its `when` holds for the command's stderr (a part without one at once,
 * after the part before it), then the input ends. Waits on what the command says, never on the
 * clock.
 */
export function runSpoken(args: readonly string[], parts: readonly StdinPart[], options: InProcessOptions = {}): Promise<CliResult> {
  let said = '';
  let next = 0;
  const feed = (): void => {
    while (next < parts.length && (parts[next]!.when?.(said) ?? true)) run.stdin.write(parts[next++]!.audio);
    if (next === parts.length && !run.stdin.writableEnded) run.stdin.end();
  };
  const run = startInProcess(args, {
    ...options,
    onStderr: (text) => {
      said += text;
      options.onStderr?.(text);
      feed();
    },
  });
  feed();
  return run.result;
}

/** A running emulator (`rt-translate emulator`, in process or spawned). */
export interface CliEmulator {
  /** The JSON line the emulator printed on stdout, without its newline. */
  line: string;
  baseUrl: string;
  realtimeUrl: string;
  /** Everything printed on stdout so far. */
  stdout(): string;
  /** Sends `signal` and waits for the command to end. */
  stop(signal?: 'SIGINT' | 'SIGTERM'): Promise<CliResult>;
}

/**
 * Resolves with the first complete line of `text()` that starts with `prefix` (the line a
 * command prints once it listens); `wake` re-checks.
 */
function listeningLine(
  text: () => string,
  subscribe: (wake: () => void) => void,
  ended: Promise<CliResult>,
  prefix = '{"baseUrl"',
  command = 'emulator',
): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const check = () => {
      const found = text()
        .split('\n')
        .find((candidate, i, all) => i < all.length - 1 && candidate.startsWith(prefix));
      if (found !== undefined) resolve(found);
    };
    subscribe(check);
    check();
    void ended.then(
      (result) => reject(new Error(`rt-translate ${command} ended (${result.code ?? result.signal}) before listening:\n${result.stderr}`)),
      reject,
    );
  });
}

/** Starts `rt-translate emulator ARGS` in this process; it runs until `stop()`. */
export async function startInProcessEmulator(args: readonly string[]): Promise<CliEmulator> {
  let out = '';
  let wake = () => {};
  const run = startInProcess(['emulator', ...args], {
    onStdout: (chunk) => {
      out += chunk.toString('utf8');
      wake();
    },
  });
  run.result.catch(() => undefined);
  const line = await listeningLine(
    () => out,
    (check) => (wake = check),
    run.result,
  );
  const parsed = JSON.parse(line) as { baseUrl: string; realtimeUrl: string };
  return {
    line,
    baseUrl: parsed.baseUrl,
    realtimeUrl: parsed.realtimeUrl,
    stdout: () => out,
    async stop(signal = 'SIGTERM') {
      run.signal(signal);
      return run.result;
    },
  };
}

/* ----------------------------------------------------------------------------------------- */
/* Spawned                                                                                   */

function assertBuilt(): void {
  if (!existsSync(CLI_PATH)) {
    throw new Error(`${CLI_PATH} is missing: run \`npm run build\` before these tests (npm test does).`);
  }
}

/** Spawns the command; the caller owns stdin. The child is tracked until it exits. */
export function spawnCli(args: readonly string[], env?: Record<string, string>, cwd?: string): ChildProcess {
  assertBuilt();
  const child = spawn(process.execPath, [CLI_PATH, ...args], {
    env: cliEnv(env),
    stdio: ['pipe', 'pipe', 'pipe'],
    ...(cwd !== undefined ? { cwd } : {}),
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  // A command that exits before reading all of its input makes writes fail with EPIPE: that is
  // the command's business (its exit status says what happened), not a test failure.
  child.stdin?.on('error', () => undefined);
  return child;
}

/** Collects the child's output until it has exited and closed its pipes. */
export function collect(child: ChildProcess, onStderr?: (text: string) => void): Promise<CliResult> {
  const stdout: Buffer[] = [];
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (text: string) => {
    stderr += text;
    onStderr?.(text);
  });
  return new Promise<CliResult>((resolve, reject) => {
    child.once('error', reject);
    // 'close' (not 'exit'): every byte of stdout and stderr has been read by then.
    child.once('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(stdout), stderr }));
  });
}

/** Runs `rt-translate ARGS` as a child process to completion. */
export function runCli(args: readonly string[], options: CliRunOptions = {}): Promise<CliResult> {
  const child = spawnCli(args, options.env, options.cwd);
  const result = collect(child, options.onStderr);
  child.stdin?.end(options.stdin ?? Buffer.alloc(0));
  return result;
}

/** A spawned command that listens until stopped (`rt-translate emulator`, `rt-translate serve`). */
export interface SpawnedListener {
  child: ChildProcess;
  /** The JSON line it printed once listening, without its newline. */
  line: string;
  /** Everything printed on stdout and stderr so far. */
  stdout(): string;
  stderr(): string;
  /** Sends `signal` and waits for the command to end. */
  stop(signal?: 'SIGINT' | 'SIGTERM'): Promise<CliResult>;
}

/**
 * Spawns `rt-translate ARGS` and waits for its listening line (the first stdout line starting
 * with `prefix`). It runs until `stop()` or `killAllChildren()`.
 */
export async function startSpawnedListener(args: readonly string[], prefix: string, env?: Record<string, string>): Promise<SpawnedListener> {
  const child = spawnCli(args, env);
  let out = '';
  let err = '';
  const ended = collect(child, (text) => (err += text));
  ended.catch(() => undefined);
  const line = await listeningLine(
    () => out,
    (check) =>
      child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
        check();
      }),
    ended,
    prefix,
    args[0],
  );
  return {
    child,
    line,
    stdout: () => out,
    stderr: () => err,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const result = await ended;
      return { ...result, stdout: Buffer.from(out) };
    },
  };
}

/**
 * Starts `rt-translate emulator ARGS` as a child process and waits for the line that says where
 * it listens. It runs until `stop()` or `killAllChildren()`.
 */
export async function startCliEmulator(args: readonly string[]): Promise<CliEmulator & { child: ChildProcess }> {
  const listener = await startSpawnedListener(['emulator', ...args], '{"baseUrl"');
  const parsed = JSON.parse(listener.line) as { baseUrl: string; realtimeUrl: string };
  return { ...listener, baseUrl: parsed.baseUrl, realtimeUrl: parsed.realtimeUrl };
}

/** Kills every child still running (SIGKILL) and waits for them to exit. */
export async function killAllChildren(): Promise<void> {
  const waiting = [...live].map(
    (child) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  );
  await Promise.all(waiting);
}

/* ----------------------------------------------------------------------------------------- */

/** A loopback listener that only counts TCP connections: proves a command connected nowhere. */
export interface ConnectionCounter {
  /** `ws://127.0.0.1:PORT` of the listener. */
  readonly url: string;
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startConnectionCounter(): Promise<ConnectionCounter> {
  let connections = 0;
  const listener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  return {
    url: `ws://127.0.0.1:${(listener.address() as AddressInfo).port}`,
    get connections() {
      return connections;
    },
    close: () => new Promise<void>((resolve) => listener.close(() => resolve())),
  };
}
