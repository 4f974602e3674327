/**
 * The one way benchmarks measure here: a subject and the baseline that bounds it run
 * alternately in the same process, several rounds each, and the report gives the ratio of the
 * medians (`compare`; the concurrency bench, whose windows need processes of their own, runs
 * each path beside its baseline instead). The machines are shared and noisy, so absolute
 * figures are printed for context only.
 * Every comparison is also recorded, with its target when it has one, for the summary table
 * that `bench/run.ts` prints at the end (`summary()`).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface BenchCase {
  /** Short label printed in the report. */
  name: string;
  /**
   * One unit of work; it may be async (a child process, a socket round trip). With the `cpu`
   * clock, a run that resolves to `{ cpuMs }` (a child process's own CPU time) is timed by that
   * figure instead of this process's CPU time.
   */
  run: () => unknown;
  /**
   * A fixed cost inside `run` that the comparison leaves out (a child process's start-up,
   * measured on a tiny input): timed in the same rounds and subtracted from `run`'s time.
   */
  overhead?: () => unknown;
  /** Bytes (or other units) one `run` processes, for the throughput column. */
  units?: number;
}

export interface CompareOptions {
  /** Rounds per case; the median is kept. Default 7. */
  rounds?: number;
  /** Each round repeats `run` until at least this long has passed. Default 200 ms. */
  minRoundMs?: number;
  /** Unit name for the throughput column. Default 'MB'. */
  unit?: 'MB' | 'x realtime' | 'ops';
  /** For 'x realtime': seconds of audio one run processes. */
  audioSeconds?: number;
  /** The ratio to meet (subject time / baseline time at most this), for the summary. */
  target?: number;
  /** Name in the summary table; default the title. */
  label?: string;
  /**
   * `wall` (default): elapsed time. `cpu`: this process's CPU time (`cpuMsNow`), which other
   * processes on a shared machine do not inflate; see `BenchCase.run` for child processes.
   */
  clock?: 'wall' | 'cpu';
  /**
   * Each round runs the two cases in turn, the baseline first in every other round, and the
   * ratio is the median of the rounds' own ratios: on a shared machine whose load drifts, both
   * cases of a round meet the same load, and neither always follows the other. Default false
   * (the ratio of the medians, the subject always first).
   */
  paired?: boolean;
  /**
   * A full garbage collection before each round (default true), so a round does not pay for the
   * other case's garbage. Off for long runs of live sessions (`paired` splits what one run
   * leaves between both cases): after a forced collection every run of them costs about a
   * third more CPU, both cases alike, a state a session that runs for an hour is never in.
   */
  collect?: boolean;
}

export interface CompareResult {
  title: string;
  subject: string;
  baseline: string;
  subjectMsPerRun: number;
  baselineMsPerRun: number;
  /** subject time / baseline time: 1.0 is parity, 2.0 is twice as slow. */
  ratio: number;
  target: number | undefined;
}

/** A line of the summary table: a ratio (or other figure) and the bound it must meet. */
export interface SummaryRow {
  name: string;
  value: number;
  /** `max`: value must be at most `bound`; `min`: at least. */
  kind: 'max' | 'min';
  bound: number | undefined;
  unit?: string;
}

const rows: SummaryRow[] = [];
let section = '';

/** Names the bench whose rows follow (run.ts sets it per file). */
export function beginSection(name: string): void {
  section = name;
}

/** Records a figure for the summary table. */
export function record(row: SummaryRow): void {
  rows.push({ ...row, name: section ? `${section}: ${row.name}` : row.name });
}

/** The figures recorded so far (a bench process hands them to `run.ts`). */
export function recorded(): readonly SummaryRow[] {
  return rows;
}

/** Adds figures another process recorded, already named by their section. */
export function adopt(list: readonly SummaryRow[]): void {
  rows.push(...list);
}

/** Prints every recorded figure with its bound and whether it was met; returns the misses. */
export function summary(): number {
  if (rows.length === 0) return 0;
  const width = Math.min(100, Math.max(...rows.map((r) => r.name.length)));
  console.log(`\n== summary (${rows.length} figures)`);
  let misses = 0;
  for (const r of rows) {
    const value = `${r.value.toFixed(2)}${r.unit ?? ''}`;
    let verdict = '';
    if (r.bound !== undefined) {
      const ok = r.kind === 'max' ? r.value <= r.bound : r.value >= r.bound;
      if (!ok) misses++;
      verdict = `${ok ? 'ok  ' : 'MISS'} (${r.kind === 'max' ? '<=' : '>='} ${r.bound}${r.unit ?? ''})`;
    }
    console.log(`  ${r.name.padEnd(width)}  ${value.padStart(9)}  ${verdict}`);
  }
  return misses;
}

type Clock = 'wall' | 'cpu';

/**
 * CPU time of this process so far, in ms (`total`), and of its threads other than the main one
 * (`others`: V8's and libuv's helpers). On Linux, the scheduler's exact run time of each thread
 * (`/proc/self/task/<id>/schedstat`, nanoseconds); elsewhere `process.cpuUsage()`, which Linux
 * fills from timer ticks and so is only right on average over many of them, and no split.
 */
export function cpuNow(): { total: number; others: number | undefined } {
  try {
    let main = 0;
    let others = 0;
    for (const task of readdirSync('/proc/self/task')) {
      const ms = Number(readFileSync(`/proc/self/task/${task}/schedstat`, 'utf8').split(' ', 1)[0]) / 1e6;
      if (task === String(process.pid)) main += ms;
      else others += ms;
    }
    if (Number.isFinite(main + others) && main + others > 0) return { total: main + others, others };
  } catch {
    // not Linux, or a thread ended while being read: fall through
  }
  const { user, system } = process.cpuUsage();
  return { total: (user + system) / 1000, others: undefined };
}

/** CPU time of this process so far, in ms (`cpuNow().total`). */
export function cpuMsNow(): number {
  return cpuNow().total;
}

/** Repeats `run` for at least `minMs` of wall time; returns its mean time on `clock`. */
async function timeRuns(run: () => unknown, minMs: number, clock: Clock): Promise<number> {
  let runs = 0;
  let reported = 0;
  let reportedRuns = 0;
  const start = performance.now();
  const cpuStart = cpuMsNow();
  let elapsed = 0;
  do {
    const result = await run();
    const cpuMs = (result as { cpuMs?: unknown } | undefined)?.cpuMs;
    if (typeof cpuMs === 'number') {
      reported += cpuMs;
      reportedRuns++;
    }
    runs++;
    elapsed = performance.now() - start;
  } while (elapsed < minMs);
  if (clock === 'wall') return elapsed / runs;
  if (reportedRuns === runs) return reported / runs;
  return (cpuMsNow() - cpuStart) / runs;
}

/**
 * A full garbage collection, outside the timed part of a round, so that a round does not pay
 * for the garbage the previous one (the other case) left: V8's `gc`, reached through `vm` once
 * the flag that exposes it is set (the benches' own processes; the library never does this).
 * Undefined where V8 refuses the flag.
 */
export const collect: (() => void) | undefined = (() => {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
})();

async function round(c: BenchCase, minMs: number, clock: Clock, gc = true): Promise<number> {
  if (gc) collect?.();
  const total = await timeRuns(c.run, minMs, clock);
  if (!c.overhead) return total;
  if (gc) collect?.();
  return Math.max(total - (await timeRuns(c.overhead, minMs / 2, clock)), 1e-6);
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function rate(c: BenchCase, msPerRun: number, options: CompareOptions): string {
  const seconds = msPerRun / 1000;
  if (options.unit === 'x realtime' && options.audioSeconds) return `${(options.audioSeconds / seconds).toFixed(0)}x realtime`;
  if (options.unit === 'ops') return `${(1 / seconds).toFixed(0)} ops/s`;
  if (c.units) return `${(c.units / 1e6 / seconds).toFixed(0)} MB/s`;
  return `${msPerRun.toFixed(3)} ms/run`;
}

/**
 * Runs both cases alternately (warm-up first), prints one block with the ratio, and records it
 * for the summary under `options.target`'s bound (or none).
 */
export async function compare(title: string, subject: BenchCase, baseline: BenchCase, options: CompareOptions = {}): Promise<CompareResult> {
  const rounds = options.rounds ?? 7;
  const minMs = options.minRoundMs ?? 200;
  const clock = options.clock ?? 'wall';
  // Warm-up: long enough for the JIT to settle both cases.
  const gc = options.collect ?? true;
  await round(subject, Math.max(100, minMs / 2), clock, gc);
  await round(baseline, Math.max(100, minMs / 2), clock, gc);
  const s: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < rounds; i++) {
    if (options.paired && i % 2 === 1) {
      b.push(await round(baseline, minMs, clock, gc));
      s.push(await round(subject, minMs, clock, gc));
    } else {
      s.push(await round(subject, minMs, clock, gc));
      b.push(await round(baseline, minMs, clock, gc));
    }
  }
  const result: CompareResult = {
    title,
    subject: subject.name,
    baseline: baseline.name,
    subjectMsPerRun: median(s),
    baselineMsPerRun: median(b),
    ratio: options.paired ? median(s.map((ms, i) => ms / b[i]!)) : median(s) / median(b),
    target: options.target,
  };
  const what = clock === 'cpu' ? 'CPU time' : 'time';
  const spread = (values: number[]): string => {
    const sorted = [...values].sort((x, y) => x - y);
    return `${((sorted[sorted.length - 1]! / sorted[0]! - 1) * 100).toFixed(0)}%`;
  };
  console.log(
    `${title}\n  ${subject.name}: ${rate(subject, result.subjectMsPerRun, options)} (spread ${spread(s)})` +
      `\n  ${baseline.name}: ${rate(baseline, result.baselineMsPerRun, options)} (spread ${spread(b)})` +
      `\n  ratio (subject ${what} / baseline ${what}, median of ${rounds} rounds${options.paired ? "' own ratios" : ''}): ${result.ratio.toFixed(2)}` +
      (options.target === undefined ? '' : ` (target <= ${options.target})`),
  );
  record({ name: options.label ?? title, value: result.ratio, kind: 'max', bound: options.target });
  return result;
}

/**
 * With a directory `dir` (a bench's `..._PROFILE` variable), starts this process's CPU profiler,
 * sampling every `intervalUs`; the function returned stops it and writes `dir/NAME.cpuprofile`.
 * Undefined without a directory.
 */
export async function startCpuProfile(dir: string | undefined, intervalUs: number): Promise<((name: string) => Promise<void>) | undefined> {
  if (!dir) return undefined;
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: intervalUs });
  await post('Profiler.start');
  return async (name) => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    session.disconnect();
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
  };
}

/** Something that emits `close` once it has ended. */
interface Closing {
  once(event: 'close', listener: () => void): unknown;
}

/**
 * Ends every item with `end` and resolves once all have emitted `close`. An item that fails as it
 * is ended (a socket still connecting, a session given up on a loaded machine) emits an error
 * before it closes: that is the end asked for, so only `close` is waited for (`once(item,
 * 'close')` would reject on the error and fail the bench).
 */
async function endAll<T extends Closing>(items: readonly T[], isClosed: (item: T) => boolean, end: (item: T) => void): Promise<void> {
  await Promise.all(
    items.map((item) => {
      if (isClosed(item)) return undefined;
      const closed = new Promise<void>((resolve) => item.once('close', () => resolve()));
      end(item);
      return closed;
    }),
  );
}

/** Destroys every stream and resolves once all have closed (see `endAll`). */
export function destroyAll(streams: ReadonlyArray<Closing & { readonly closed: boolean; destroy(): void }>): Promise<void> {
  return endAll(
    streams,
    (s) => s.closed,
    (s) => s.destroy(),
  );
}

/** Cuts every `ws` socket and resolves once all have closed (see `endAll`). */
export function terminateAll(sockets: ReadonlyArray<Closing & { readonly readyState: number; readonly CLOSED: number; terminate(): void }>): Promise<void> {
  return endAll(
    sockets,
    (ws) => ws.readyState === ws.CLOSED,
    (ws) => ws.terminate(),
  );
}
