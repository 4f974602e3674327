/**
 * Runs the built `rt-translate` command (`dist/bin/rt-translate.js`, written by `npm run build`)
 * as a real child process with pipes. Every child is killed when its time limit passes or when
 * `killAllChildren()` runs (call it in `afterEach`), so a failing test never leaves one behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createServer, type AddressInfo } from 'node:net';

/** The command as built by `npm run build`. */
export const CLI_PATH = fileURLToPath(new URL('../../dist/bin/rt-translate.js', import.meta.url));

/** Default limit for one run, in ms; the child is killed (SIGKILL) and the run fails past it. */
export const DEFAULT_CLI_TIMEOUT_MS = 15_000;

/** Environment variables that would change what the command does; removed unless given. */
const CONFIG_ENV = ['RT_TRANSLATE_API_KEY', 'RT_TRANSLATE_REALTIME_URL', 'RT_TRANSLATE_BASE_URL', 'NODE_OPTIONS'];

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
  /** Kill the child and fail past this many ms. Default `DEFAULT_CLI_TIMEOUT_MS`. */
  timeoutMs?: number;
  /** Called with each piece of stderr text as it arrives. */
  onStderr?: (text: string) => void;
  /** Working directory of the child. Default: the test's. */
  cwd?: string;
}

function assertBuilt(): void {
  if (!existsSync(CLI_PATH)) {
    throw new Error(`${CLI_PATH} is missing: run \`npm run build\` before these tests (npm test does).`);
  }
}

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CONFIG_ENV) delete env[name];
  return { ...env, ...extra };
}

/** Spawns the command; the caller owns stdin. The child is tracked until it exits. */
export function spawnCli(args: readonly string[], env?: Record<string, string>, cwd?: string): ChildProcess {
  assertBuilt();
  const child = spawn(process.execPath, [CLI_PATH, ...args], {
    env: childEnv(env),
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

/** Collects the child's output until it exits, failing (after SIGKILL) past `timeoutMs`. */
export function collect(
  child: ChildProcess,
  timeoutMs = DEFAULT_CLI_TIMEOUT_MS,
  onStderr?: (text: string) => void,
  description = 'rt-translate',
): Promise<CliResult> {
  const stdout: Buffer[] = [];
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (text: string) => {
    stderr += text;
    onStderr?.(text);
  });
  return new Promise<CliResult>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${description} did not exit within ${timeoutMs} ms; stderr so far:\n${stderr}`));
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // 'close' (not 'exit'): every byte of stdout and stderr has been read by then.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(stdout), stderr });
    });
  });
}

/** Runs `rt-translate ARGS` to completion. */
export function runCli(args: readonly string[], options: CliRunOptions = {}): Promise<CliResult> {
  const child = spawnCli(args, options.env, options.cwd);
  const result = collect(child, options.timeoutMs, options.onStderr, `rt-translate ${args.join(' ')}`);
  child.stdin?.end(options.stdin ?? Buffer.alloc(0));
  return result;
}

/** A running `rt-translate emulator` process. */
export interface CliEmulator {
  child: ChildProcess;
  /** The one line the emulator printed on stdout, without its newline. */
  line: string;
  baseUrl: string;
  realtimeUrl: string;
  /** Everything printed on stdout so far (the JSON line and anything after it). */
  stdout(): string;
  /** Sends `signal` and waits for the process to end. */
  stop(signal?: NodeJS.Signals): Promise<CliResult>;
}

/** Starts `rt-translate emulator ARGS` and waits for its JSON line. */
export async function startCliEmulator(args: readonly string[], timeoutMs = DEFAULT_CLI_TIMEOUT_MS): Promise<CliEmulator> {
  const child = spawnCli(['emulator', ...args]);
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  const ended = collect(child, 60_000, undefined, `rt-translate emulator ${args.join(' ')}`);
  ended.catch(() => undefined);
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`rt-translate emulator printed no line within ${timeoutMs} ms`));
    }, timeoutMs);
    const check = () => {
      const newline = out.indexOf('\n');
      if (newline < 0) return;
      clearTimeout(timer);
      child.stdout?.off('data', check);
      resolve(out.slice(0, newline));
    };
    child.stdout?.on('data', check);
    void ended.then((result) => {
      clearTimeout(timer);
      reject(new Error(`rt-translate emulator exited (${result.code ?? result.signal}) before listening:\n${result.stderr}`));
    }, reject);
  });
  const parsed = JSON.parse(line) as { baseUrl: string; realtimeUrl: string };
  return {
    child,
    line,
    baseUrl: parsed.baseUrl,
    realtimeUrl: parsed.realtimeUrl,
    stdout: () => out,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const result = await ended;
      return { ...result, stdout: Buffer.from(out) };
    },
  };
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
