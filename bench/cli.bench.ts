/**
 * The command line against the least a program can do (`bare-pipe.ts`: `ws` alone, the same
 * appends, the same ending rule), both as processes of their own, with the emulator in a third
 * (`concurrency-peer.ts`), so that each side's figures are its own:
 *
 * 1. start-up: from spawning `rt-translate -i FILE` to the first translated byte on its
 *    standard output, against the bare client's;
 * 2. piping a large file (`CLI_PIPE_MB`, default 1024 MiB, of speech) file to file: wall-clock
 *    throughput against the bare client's, and the command's peak resident set size (the
 *    kernel's high-water mark, read at exit by `peak-rss-hook.ts`), which must stay under
 *    100 MB.
 */
import { spawn, fork } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { compare, record } from './harness.js';
import { CONCURRENCY_KEY, speech24k } from './concurrency-shared.js';

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const CLI = here('../bin/rt-translate.js');
const BARE = here('./bare-pipe.js');
const HOOK = here('./peak-rss-hook.js');
const QUIET_MS = 1000;

interface Run {
  /** ms from spawn to the first byte on stdout (when the output is stdout). */
  firstByteMs: number;
  /** Peak RSS in bytes. */
  peakRss: number;
}

/** Spawns one side; with `firstByteOnly`, kills it once its first output byte arrives. */
async function runOnce(args: string[], env: NodeJS.ProcessEnv, rssFile: string, firstByteOnly: boolean): Promise<Run> {
  const start = performance.now();
  const child = spawn(process.execPath, ['--import', HOOK, ...args], {
    env: { ...process.env, ...env, PEAK_RSS_FILE: rssFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr = (stderr + text).slice(-4000)));
  let firstByteMs = Number.NaN;
  child.stdout.on('data', () => {
    if (!Number.isNaN(firstByteMs)) return;
    firstByteMs = performance.now() - start;
    if (firstByteOnly) child.kill('SIGKILL');
  });
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  if (firstByteOnly ? Number.isNaN(firstByteMs) : code !== 0) {
    throw new Error(`${args.join(' ')} ended with ${code ?? signal} ${firstByteOnly ? 'before any output' : ''}\n${stderr}`);
  }
  const peakRss = firstByteOnly ? 0 : Number(await readFile(rssFile, 'utf8'));
  return { firstByteMs, peakRss };
}

/** A file of `bytes` of speech (the fixture repeated), PCM16 mono 24 kHz. */
async function speechFile(path: string, bytes: number): Promise<void> {
  const speech = speech24k();
  const out = createWriteStream(path);
  for (let written = 0; written < bytes; written += speech.length) {
    if (!out.write(speech.subarray(0, Math.min(speech.length, bytes - written)))) await once(out, 'drain');
  }
  out.end();
  await once(out, 'close');
}

export default async function (): Promise<void> {
  const peer = fork(here('./concurrency-peer.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [ready] = (await once(peer, 'message')) as [{ realtimeUrl: string }];
  const url = ready.realtimeUrl;
  const dir = await mkdtemp(join(tmpdir(), 'rt-translate-cli-bench-'));
  const env = { RT_TRANSLATE_API_KEY: CONCURRENCY_KEY };
  const rssFile = join(dir, 'rss');
  try {
    // 1. Start-up: the first translated byte of a short file.
    const short = join(dir, 'speech.pcm');
    await writeFile(short, speech24k());
    const cliArgs = (input: string, output: string): string[] => [
      CLI,
      '--from',
      'en-us',
      '--to',
      'es-es',
      '-f',
      's16le',
      '-i',
      input,
      '-o',
      output,
      '--quiet-ms',
      String(QUIET_MS),
      '--realtime-url',
      url,
    ];
    let cliFirst = 0;
    let bareFirst = 0;
    const startup = await compare(
      'start-up: spawn to the first translated byte on stdout (8.3 s of speech in a file)',
      { name: 'rt-translate -i FILE', run: async () => (cliFirst = (await runOnce(cliArgs(short, '-'), env, rssFile, true)).firstByteMs) },
      { name: 'bare ws client', run: async () => (bareFirst = (await runOnce([BARE, url, short, '-', String(QUIET_MS)], env, rssFile, true)).firstByteMs) },
      { rounds: 9, minRoundMs: 0, label: 'CLI start-up to the first translated byte vs bare client' },
    );
    console.log(`  (last runs: ${cliFirst.toFixed(0)} ms against ${bareFirst.toFixed(0)} ms; ratio ${startup.ratio.toFixed(2)})`);

    // 2. A large file through, file to file.
    const mib = Number(process.env.CLI_PIPE_MB ?? 1024);
    const big = join(dir, 'big.pcm');
    const out = join(dir, 'out.pcm');
    await speechFile(big, mib * 1024 * 1024);
    const bytes = (await stat(big)).size;
    let cliPeak = 0;
    let barePeak = 0;
    let outBytes = 0;
    const piping = await compare(
      `piping ${mib} MiB of speech, file to file, emulator in another process`,
      {
        name: 'rt-translate -i FILE -o FILE',
        units: bytes,
        run: async () => {
          const run = await runOnce(cliArgs(big, out), env, rssFile, false);
          cliPeak = Math.max(cliPeak, run.peakRss);
          outBytes = (await stat(out)).size;
        },
      },
      {
        name: 'bare ws client',
        units: bytes,
        run: async () => {
          barePeak = Math.max(barePeak, (await runOnce([BARE, url, big, out, String(QUIET_MS)], env, rssFile, false)).peakRss);
        },
      },
      { rounds: 3, minRoundMs: 0, target: 1.1, label: `CLI piping ${mib} MiB vs bare client, wall clock` },
    );
    const mbps = bytes / 1e6 / (piping.subjectMsPerRun / 1000);
    console.log(
      `  peak RSS: rt-translate ${(cliPeak / 1e6).toFixed(0)} MB, bare client ${(barePeak / 1e6).toFixed(0)} MB; ` +
        `${(outBytes / 1e6).toFixed(0)} MB of translated audio written`,
    );
    record({ name: `CLI peak RSS piping ${mib} MiB`, value: cliPeak / 1e6, kind: 'max', bound: 100, unit: ' MB' });
    record({ name: `CLI throughput piping ${mib} MiB`, value: mbps, kind: 'min', bound: 65, unit: ' MB/s' });
  } finally {
    peer.send({ type: 'exit' });
    await once(peer, 'exit');
    await rm(dir, { recursive: true, force: true });
  }
}
