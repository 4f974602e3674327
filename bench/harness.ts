/**
 * The one way benchmarks measure here: a subject and the baseline that bounds it run
 * alternately in the same process, several rounds each, and the report gives the ratio of the
 * medians. The machines are shared and noisy, so absolute figures are printed for context only.
 */
import { performance } from 'node:perf_hooks';

export interface BenchCase {
  /** Short label printed in the report. */
  name: string;
  /** One unit of work; it may be async (a child process, a socket round trip). */
  run: () => unknown;
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
}

export interface CompareResult {
  title: string;
  subject: string;
  baseline: string;
  subjectMsPerRun: number;
  baselineMsPerRun: number;
  /** subject time / baseline time: 1.0 is parity, 2.0 is twice as slow. */
  ratio: number;
}

async function round(c: BenchCase, minMs: number): Promise<number> {
  let runs = 0;
  const start = performance.now();
  let elapsed = 0;
  do {
    await c.run();
    runs++;
    elapsed = performance.now() - start;
  } while (elapsed < minMs);
  return elapsed / runs;
}

function median(values: number[]): number {
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

/** Runs both cases alternately (warm-up first) and prints one line with the ratio. */
export async function compare(
  title: string,
  subject: BenchCase,
  baseline: BenchCase,
  options: CompareOptions = {},
): Promise<CompareResult> {
  const rounds = options.rounds ?? 7;
  const minMs = options.minRoundMs ?? 200;
  await round(subject, 20);
  await round(baseline, 20);
  const s: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < rounds; i++) {
    s.push(await round(subject, minMs));
    b.push(await round(baseline, minMs));
  }
  const result: CompareResult = {
    title,
    subject: subject.name,
    baseline: baseline.name,
    subjectMsPerRun: median(s),
    baselineMsPerRun: median(b),
    ratio: median(s) / median(b),
  };
  console.log(
    `${title}\n  ${subject.name}: ${rate(subject, result.subjectMsPerRun, options)}` +
      `\n  ${baseline.name}: ${rate(baseline, result.baselineMsPerRun, options)}` +
      `\n  ratio (subject time / baseline time, median of ${rounds} rounds): ${result.ratio.toFixed(2)}`,
  );
  return result;
}
