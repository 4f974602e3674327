/**
 * A long realtime session over a network that keeps dropping: an hour of speech (the fixture,
 * looped) written at 20x real time into one `RealtimeTranslateStream`, against an emulator in
 * another process that resets every session's connection after a few minutes of audio (what
 * was in flight is lost, as on a real network). Reports the drops, the
 * audio sent again, the duplicated output (answers interrupted by a drop come again in full),
 * answers missing or wrong (must be 0), the most input kept for replay and the peak RSS of this
 * process (with its RSS at the start, which after other benches is mostly theirs), and the latency from the end of each sentence to its first translated audio.
 *
 * `SOAK_MINUTES` (default 60), `SOAK_SPEED` (default 20) and `SOAK_DROP_MINUTES` (default 3,
 * in audio time) change the run. The ending's quiet period is compressed like the audio (3 s of
 * a real call); a drop interval shorter than twice that is raised to it, since a session that
 * drops in every quiet period can never end (each one answers nothing, so the drops add up to one
 * outage and the stream gives up by design). A give-up is reported, not thrown.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { UtteranceSegmenter } from '../lib/emulator/vad.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';

const KEY = 'soak-key';
const BYTES_PER_SECOND = 48_000;
/** Audio written per pacing step. */
const STEP_MS = 100;
/** The stream's default quiet period after end(), in ms of a real call; compressed by the speed. */
const CALL_QUIET_MS = 3_000;
/** Shortest quiet period the soak uses, in ms: loopback answers and timer jitter stay well inside it. */
const MIN_QUIET_MS = 250;

function sha(data: Buffer): string {
  return createHash('sha1').update(data).digest('hex');
}

async function startEmulatorProcess(dropAfterMs: number): Promise<{ child: ChildProcess; realtimeUrl: string }> {
  const url = new URL('../lib/emulator/index.js', import.meta.url).href;
  const script =
    `const { startEmulator } = await import(${JSON.stringify(url)});` +
    `const emu = await startEmulator({ apiKeys: [${JSON.stringify(KEY)}], faults: { dropAfterMs: ${dropAfterMs}, dropReset: true } });` +
    `console.log(JSON.stringify({ realtimeUrl: emu.realtimeUrl }));` +
    `process.on('SIGTERM', () => emu.close().then(() => process.exit(0)));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await Promise.race([
    once(child.stdout!, 'data'),
    once(child, 'exit').then(([code]) => Promise.reject(new Error(`The emulator process exited (${String(code)}) before it listened.`))),
  ])) as [Buffer];
  return { child, realtimeUrl: (JSON.parse(line.toString('utf8')) as { realtimeUrl: string }).realtimeUrl };
}

export default async function (): Promise<void> {
  const minutes = Number(process.env.SOAK_MINUTES ?? 60);
  const speed = Number(process.env.SOAK_SPEED ?? 20);
  const fixture = readFileSync(new URL('../../test/fixtures/speech-en-24k.wav', import.meta.url)).subarray(44);
  const loops = Math.ceil((minutes * 60 * BYTES_PER_SECOND) / fixture.length);
  const totalBytes = loops * fixture.length;
  const quietPeriodMs = Math.max(MIN_QUIET_MS, Math.round(CALL_QUIET_MS / speed));
  const asked = Number(process.env.SOAK_DROP_MINUTES ?? 3);
  const dropAfterMs = Math.max(2 * quietPeriodMs, Math.round((asked * 60_000) / speed));
  const dropMinutes = (dropAfterMs * speed) / 60_000;
  if (dropMinutes > asked) {
    console.log(
      `  a drop every ${asked} min of audio is ${Math.round((asked * 60_000) / speed)} ms at ${speed}x, under twice the ` +
        `${quietPeriodMs} ms quiet period that ends the session: using a drop every ${dropMinutes.toFixed(2)} min`,
    );
  }
  const { child, realtimeUrl } = await startEmulatorProcess(dropAfterMs);
  try {
    await soak({ minutes, speed, dropMinutes, quietPeriodMs, fixture, totalBytes, realtimeUrl });
  } finally {
    // Also when the soak throws: an emulator left running would outlive `npm run bench`.
    child.kill('SIGTERM');
    if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  }
}

interface SoakRun {
  minutes: number;
  speed: number;
  dropMinutes: number;
  quietPeriodMs: number;
  fixture: Buffer;
  totalBytes: number;
  realtimeUrl: string;
}

async function soak({ minutes, speed, dropMinutes, quietPeriodMs, fixture, totalBytes, realtimeUrl }: SoakRun): Promise<void> {
  // What the emulator must answer, utterance by utterance, in order. A session that starts with
  // a replay counts its 30 ms frames from the replay's start, which the client puts on its own
  // 20 ms frames: each answer is the one of one of three grid phases (leading silence of 0, 240
  // or 480 samples gives each).
  const phases = [0, 240, 480].map((lead) => {
    const segmenter = new UtteranceSegmenter();
    segmenter.push(Buffer.alloc(lead * 2));
    return { segmenter, answers: [] as string[] };
  });
  const expected = phases[0]!.answers;
  const feedExpected = (pcm: Buffer) => {
    for (const phase of phases) for (const u of phase.segmenter.push(pcm)) phase.answers.push(sha(u.audio));
  };

  const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, quietPeriodMs });
  let current: Buffer[] = [];
  let duplicateBytes = 0;
  let matched = 0;
  let wrong = 0;
  let mostKept = 0;
  // RSS when the soak starts: in `npm run bench` it also holds what earlier benches left behind.
  const startRss = process.memoryUsage().rss;
  let peakRss = startRss;
  stream.on('audio.delta', (audio) => current.push(audio));
  stream.on('reconnecting', () => {
    // An answer cut by the drop: it comes again in full after the replay.
    duplicateBytes += current.reduce((n, b) => n + b.length, 0);
    current = [];
  });
  stream.on('response', () => {
    const got = sha(Buffer.concat(current));
    current = [];
    if (phases.some((phase) => phase.answers[matched] === got)) matched += 1;
    else wrong += 1;
  });
  let attempts = 0;
  let mostAttempts = 0;
  stream.on('reconnecting', (info) => {
    attempts = info.attempt;
    mostAttempts = Math.max(mostAttempts, attempts);
  });
  stream.on('warning', (warning) => console.log(`  warning: ${warning.message}`));
  // The stream fails through destroy(err): without a listener a give-up would crash the run.
  let failure: Error | undefined;
  stream.on('error', (error) => (failure ??= error));
  stream.resume();
  const finished = new Promise<Error | undefined>((resolve) => stream.once('close', () => resolve(failure ?? stream.errored ?? undefined)));

  const sampler = setInterval(() => {
    mostKept = Math.max(mostKept, stream.stats.replayBytes);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 250);
  const started = performance.now();
  const step = (STEP_MS * BYTES_PER_SECOND) / 1000;
  for (let offset = 0; offset < totalBytes && !stream.destroyed;) {
    const at = offset % fixture.length;
    const piece = Buffer.from(fixture.subarray(at, Math.min(fixture.length, at + step)));
    offset += piece.length;
    feedExpected(piece);
    if (!stream.write(piece)) await Promise.race([once(stream, 'drain'), finished]);
    // An absolute schedule: audio time divided by the speed.
    const wait = started + (offset / BYTES_PER_SECOND) * (1000 / speed) - performance.now();
    if (wait > 1) await sleep(wait);
  }
  feedExpected(Buffer.alloc(800 * 48));
  if (!stream.destroyed) stream.end();
  const error = await finished;
  clearInterval(sampler);
  const wallSeconds = (performance.now() - started) / 1000;

  const s = stream.stats;
  const seconds = (bytes: number) => (bytes / BYTES_PER_SECOND).toFixed(1);
  console.log(
    `realtime soak: ${minutes} min of speech at ${speed}x real time (${wallSeconds.toFixed(0)} s), a drop every ${+dropMinutes.toFixed(2)} min of audio, ${quietPeriodMs} ms quiet period\n` +
      `  outcome: ${error ? `FAILED after ${seconds(s.inputBytes)} s of input: ${error.message}` : `complete ${s.ending?.complete}`}\n` +
      `  drops survived: ${s.reconnects}, time without a session ${(s.outageMs / 1000).toFixed(1)} s (longest ${s.longestOutageMs} ms), ` +
      `most attempts for one outage ${mostAttempts}${error ? ` (${attempts} when it stopped)` : ''}\n` +
      `  answers: ${matched} of ${expected.length} correct and in order, ${wrong} wrong, ${expected.length - matched - wrong} missing\n` +
      `  audio sent again: ${seconds(s.bytesReplayed)} s; duplicated output (answers cut by a drop, given again): ${seconds(duplicateBytes)} s\n` +
      `  most input kept for replay: ${seconds(mostKept)} s (${(mostKept / 1e6).toFixed(2)} MB); peak RSS ${(peakRss / 1e6).toFixed(0)} MB (${(startRss / 1e6).toFixed(0)} MB when the soak began)\n` +
      `  first translated audio after the end of a sentence: p50 ${s.latency.firstAudioMs.p50} ms, p95 ${s.latency.firstAudioMs.p95} ms, max ${s.latency.firstAudioMs.max} ms`,
  );
}
