/**
 * One speaker, several languages: the CPU a `RealtimeFanout` with N targets spends, against N
 * independent `RealtimeTranslateStream`s fed by hand (each chunk written into every stream, the
 * next one once every stream that asked for it has drained), in the same run. Both translate
 * the same speech (the fixture, looped to `FANOUT_SECONDS` of audio, written as fast as the
 * sessions take it, in 100 ms chunks) and read every translated byte; the emulator runs in
 * another process (`concurrency-peer.ts`), so the CPU time measured is the clients' only. The
 * ratio is the fan-out's cost over doing it by hand: its own writable side and frame cutting,
 * the wait for the slowest target, and the output Readables.
 *
 * Single runs on a shared machine spread widely (two runs of the same case differ by a third),
 * so each round runs both cases, in turns, and the figure is the median of the rounds' own
 * ratios, after a warm-up of `FANOUT_WARMUP` runs of each (default 10: until the JIT has compiled
 * what both run). No forced garbage collection between runs (`collect: false`): after one,
 * every run costs about a third more CPU in both cases (8 targets by hand: 264 against 213 ms
 * a run) and the fan-out, with more live objects, somewhat more; a talk never runs in that
 * state, and the alternating order splits what one run leaves to the next between the cases.
 * Environment: `FANOUT_TARGETS` (a comma-separated list of counts, default
 * "2,4,8"), `FANOUT_SECONDS` (audio per run, default 60), `FANOUT_ROUNDS` (default 31),
 * `FANOUT_CONTROL=1` (also the baseline against itself, measured the same way: on a busy
 * machine that control alone has come out between 0.95 and 1.10).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Readable } from 'node:stream';
import { RealtimeFanout } from '../lib/realtime/fanout.js';
import { REALTIME_LANGUAGES } from '../lib/realtime/languages.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { compare } from './harness.js';
import { CONCURRENCY_KEY, speech24k } from './concurrency-shared.js';

const CHUNK = 4800;
/** The stream's quiet period after end(), shortened: idle time costs no CPU, but it costs the bench wall time. */
const QUIET_MS = 200;
const TARGET_RATIO = 1.05;
/** Runs of each case before the measured rounds (see the warm-up below). */
const WARMUP_RUNS = Number(process.env.FANOUT_WARMUP ?? 10);
/** Also measure the baseline against itself (`FANOUT_CONTROL=1`): the noise floor of the ratio on this machine. */
const CONTROL = process.env.FANOUT_CONTROL === '1';

function chunks(seconds: number): Buffer[] {
  const speech = speech24k();
  const total = seconds * 48_000;
  const out: Buffer[] = [];
  for (let at = 0; at < total; at += CHUNK) {
    const from = at % speech.length;
    out.push(speech.subarray(from, Math.min(from + CHUNK, speech.length, from + total - at)));
  }
  return out;
}

/** Reads everything `output` gives; resolves with the byte count once it ends. */
function readAll(output: Readable): Promise<number> {
  let bytes = 0;
  output.on('data', (chunk: Buffer) => (bytes += chunk.length));
  return once(output, 'end').then(() => bytes);
}

/** Writes every chunk into `writable`, waiting for drain when it asks. */
async function feed(writable: NodeJS.WritableStream & { write(chunk: Buffer): boolean }, input: readonly Buffer[]): Promise<void> {
  for (const chunk of input) if (!writable.write(chunk)) await once(writable as unknown as NodeJS.EventEmitter, 'drain');
  writable.end();
}

async function startPeer(): Promise<{ child: ChildProcess; realtimeUrl: string }> {
  const child = fork(fileURLToPath(new URL('./concurrency-peer.js', import.meta.url)), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [message] = (await once(child, 'message')) as [{ type: string; realtimeUrl: string }];
  if (message.type !== 'ready') throw new Error(`the emulator process said ${message.type}`);
  return { child, realtimeUrl: message.realtimeUrl };
}

export default async function (): Promise<void> {
  const counts = (process.env.FANOUT_TARGETS ?? '2,4,8').split(',').map(Number);
  const seconds = Number(process.env.FANOUT_SECONDS ?? 60);
  const rounds = Number(process.env.FANOUT_ROUNDS ?? 31);
  const input = chunks(seconds);
  const { child, realtimeUrl } = await startPeer();
  const common = { from: 'en-us' as const, apiKey: CONCURRENCY_KEY, realtimeUrl, quietPeriodMs: QUIET_MS };
  try {
    for (const n of counts) {
      const langs = REALTIME_LANGUAGES.filter((lang) => lang !== 'en-us').slice(0, n);
      let fanoutBytes = 0;
      let handBytes = 0;
      const subject = {
        name: `RealtimeFanout, ${n} targets`,
        run: async () => {
          const fan = new RealtimeFanout({ ...common, to: langs });
          const outputs = fan.targets.map((t) => readAll(t.output));
          await Promise.all([feed(fan, input), once(fan, 'finish')]);
          fanoutBytes = (await Promise.all(outputs)).reduce((a, b) => a + b, 0);
        },
      };
      const baseline = {
        name: `${n} RealtimeTranslateStreams by hand`,
        run: async () => {
          const streams = langs.map((to) => new RealtimeTranslateStream({ ...common, to }));
          const outputs = streams.map((s) => readAll(s));
          for (const chunk of input) {
            const waits: Array<Promise<unknown>> = [];
            for (const s of streams) if (!s.write(chunk)) waits.push(once(s, 'drain'));
            if (waits.length > 0) await Promise.all(waits);
          }
          for (const s of streams) s.end();
          handBytes = (await Promise.all(outputs)).reduce((a, b) => a + b, 0);
        },
      };
      // Warm-up until the JIT has compiled what both run: the fan-out runs more code (its own
      // and the streams'), whose optimization would otherwise fall in the measured rounds. A
      // fan-out lives as long as a talk; its compilation is not its cost per run.
      for (let i = 0; i < WARMUP_RUNS; i++) {
        await subject.run();
        await baseline.run();
      }
      await compare(`${n} languages from one input, ${seconds} s of speech: RealtimeFanout against ${n} streams fed by hand`, subject, baseline, {
        clock: 'cpu',
        rounds,
        minRoundMs: 0,
        paired: true,
        collect: false,
        target: TARGET_RATIO,
        label: `${n} targets: fan-out CPU / streams by hand`,
      });
      if (CONTROL) {
        // The same measurement of the baseline against itself: how far from 1 noise alone goes.
        await compare(`control: ${n} streams by hand against themselves`, { ...baseline, name: `${n} RealtimeTranslateStreams by hand (again)` }, baseline, {
          clock: 'cpu',
          rounds,
          minRoundMs: 0,
          paired: true,
          collect: false,
          label: `${n} targets: control, streams by hand / themselves`,
        });
      }
      // Both did the same work: every target translated the whole input. (Not to the byte: on a
      // busy machine a pause in the input of more than the emulator's idle time ends an utterance
      // early, which moves what its answers hold.)
      if (fanoutBytes === 0 || Math.abs(fanoutBytes - handBytes) > 0.05 * handBytes) {
        throw new Error(`the fan-out received ${fanoutBytes} bytes in its last run, the streams by hand ${handBytes}`);
      }
      console.log(
        `  last runs: ${n} x ${(fanoutBytes / n / 48_000).toFixed(1)} s (fan-out), ${n} x ${(handBytes / n / 48_000).toFixed(1)} s (by hand) of translated audio received`,
      );
    }
  } finally {
    child.send({ type: 'exit' });
    if (child.exitCode === null) await once(child, 'exit');
  }
}
