/**
 * Conversion to the service format against ffmpeg doing the same conversion on the same bytes:
 * - 48 kHz stereo s16le -> 24 kHz mono s16le (Discord voice to the service), and
 * - 8 kHz mu-law -> 24 kHz mono s16le (a phone call to the service).
 *
 * Each run converts 60 s of audio. Ours goes through the public Transform
 * (`toServiceFormat`) in 20 ms chunks, as a voice receiver delivers it. ffmpeg is spawned per run
 * and fed the raw bytes on stdin; its time includes process start-up, which is a small part of
 * 60 s of audio (measured and printed below on 1 s of input). Figures are "x realtime" (seconds
 * of audio converted per second); the ratio is our time over ffmpeg's.
 *
 * Two ffmpeg baselines, because their filters differ in quality:
 * - "swr default": ffmpeg's default resampler (swr, 32-tap filter, cutoff 0.97), whose stopband
 *   is far short of our 90 dB: cheaper, but not the same work;
 * - "high quality": a filter at least as good as ours, `aresample=resampler=soxr:precision=28`
 *   when this ffmpeg has soxr (found by a trial run), else swr with a long filter
 *   (`filter_size=256:cutoff=0.9:kaiser_beta=12`).
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { toServiceFormat } from '../lib/audio/convert.js';
import { encodeMulaw } from '../lib/audio/g711.js';
import { compare } from './harness.js';

const SECONDS = 60;

async function ffmpegPath(): Promise<string> {
  return (await import('@ffmpeg-installer/ffmpeg')).default.path;
}

/** Speech-like test material: a few moving tones plus noise, all channels different. */
function program(rate: number, channels: number, seconds: number): Buffer {
  const frames = rate * seconds;
  const b = Buffer.alloc(frames * channels * 2);
  let s = 1;
  for (let n = 0; n < frames; n++) {
    const t = n / rate;
    for (let c = 0; c < channels; c++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      const v =
        6000 * Math.sin(2 * Math.PI * (180 + 40 * Math.sin(t) + 30 * c) * t) +
        3000 * Math.sin(2 * Math.PI * (1200 + 300 * c) * t) +
        ((s >>> 16) - 32768) / 16;
      b.writeInt16LE(Math.round(v), (n * channels + c) * 2);
    }
  }
  return b;
}

/** Pushes `input` through `transform` in `chunkBytes` pieces; resolves with the output size. */
async function throughTransform(transform: NodeJS.ReadWriteStream, input: Buffer, chunkBytes: number): Promise<number> {
  let bytes = 0;
  await pipeline(
    Readable.from(
      (function* () {
        for (let i = 0; i < input.length; i += chunkBytes) yield input.subarray(i, i + chunkBytes);
      })(),
    ),
    transform,
    new Writable({
      write(chunk: Buffer, _e, cb) {
        bytes += chunk.length;
        cb();
      },
    }),
  );
  return bytes;
}

/** Runs ffmpeg on `input` (stdin) and resolves with the output size (stdout). */
function throughFfmpeg(binary: string, args: string[], input: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['-hide_banner', '-loglevel', 'error', '-threads', '1', ...args], { stdio: ['pipe', 'pipe', 'ignore'] });
    let bytes = 0;
    child.stdout.on('data', (c: Buffer) => (bytes += c.length));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(bytes) : reject(new Error(`ffmpeg exited with ${code}`))));
    child.stdin.on('error', reject);
    child.stdin.end(input);
  });
}

async function startupMs(binary: string, args: string[], oneSecond: Buffer): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await throughFfmpeg(binary, args, oneSecond);
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[2]!;
}

/** The `-af` filter of the high-quality baseline: soxr when this ffmpeg has it, else a long swr filter. */
async function highQualityFilter(binary: string): Promise<{ filter: string; label: string }> {
  const soxr = 'aresample=resampler=soxr:precision=28';
  const trial = ['-f', 's16le', '-ar', '48000', '-ac', '1', '-i', 'pipe:0', '-af', soxr, '-f', 's16le', '-ar', '24000', 'pipe:1'];
  try {
    if ((await throughFfmpeg(binary, trial, Buffer.alloc(9600))) > 0) return { filter: soxr, label: 'soxr, precision 28' };
  } catch {
    // no soxr in this build
  }
  return { filter: 'aresample=resampler=swr:filter_size=256:cutoff=0.9:kaiser_beta=12', label: 'swr, 256 taps, cutoff 0.9, beta 12' };
}

/** ffmpeg arguments with the high-quality filter put before the output options. */
function withFilter(args: string[], filter: string): string[] {
  const output = args.lastIndexOf('-f');
  return [...args.slice(0, output), '-af', filter, ...args.slice(output)];
}

export default async function (): Promise<void> {
  let binary: string;
  try {
    binary = await ffmpegPath();
  } catch {
    console.log('resample: no ffmpeg binary (@ffmpeg-installer/ffmpeg is a dev dependency); skipped');
    return;
  }
  const hq = await highQualityFilter(binary);

  // --- 48 kHz stereo -> 24 kHz mono ----------------------------------------------------------
  const stereo = program(48000, 2, SECONDS);
  const discordArgs = ['-f', 's16le', '-ar', '48000', '-ac', '2', '-i', 'pipe:0', '-f', 's16le', '-ar', '24000', '-ac', '1', 'pipe:1'];
  const expectedOut = SECONDS * 24000 * 2;
  const ours = await throughTransform(toServiceFormat({ rate: 48000, channels: 2 }), stereo, 3840);
  const theirs = await throughFfmpeg(binary, discordArgs, stereo);
  if (ours !== expectedOut || Math.abs(theirs - expectedOut) > 4800) {
    throw new Error(`unexpected output sizes: ours ${ours}, ffmpeg ${theirs}, expected ${expectedOut}`);
  }
  const discordSubject = { name: 'rt-translate toServiceFormat (Transform, 20 ms chunks)', run: () => throughTransform(toServiceFormat({ rate: 48000, channels: 2 }), stereo, 3840) };
  const discord = await compare(
    `48 kHz stereo s16le -> 24 kHz mono s16le, ${SECONDS} s of audio per run, vs ffmpeg swr default (weaker filter)`,
    discordSubject,
    { name: 'ffmpeg -threads 1, swr default (spawned, stdin/stdout)', run: () => throughFfmpeg(binary, discordArgs, stereo) },
    { unit: 'x realtime', audioSeconds: SECONDS, rounds: 5 },
  );
  const discordHqArgs = withFilter(discordArgs, hq.filter);
  await compare(
    `48 kHz stereo s16le -> 24 kHz mono s16le, ${SECONDS} s of audio per run, vs ffmpeg high quality (${hq.label})`,
    discordSubject,
    { name: `ffmpeg -threads 1, ${hq.label} (spawned, stdin/stdout)`, run: () => throughFfmpeg(binary, discordHqArgs, stereo) },
    { unit: 'x realtime', audioSeconds: SECONDS, rounds: 5 },
  );
  const perSpeaker = (discord.subjectMsPerRun / (SECONDS * 1000)) * 100;
  console.log(`  CPU per concurrent Discord speaker (this conversion): ${perSpeaker.toFixed(2)} % of one core`);
  console.log(`  ffmpeg start-up share: ${(await startupMs(binary, discordArgs, stereo.subarray(0, 48000 * 4))).toFixed(0)} ms for 1 s of audio`);

  // --- 8 kHz mu-law -> 24 kHz mono -----------------------------------------------------------
  const pcm8k = program(8000, 1, SECONDS);
  const mulaw = Buffer.alloc(pcm8k.length / 2);
  for (let i = 0; i < mulaw.length; i++) mulaw[i] = encodeMulaw(pcm8k.readInt16LE(i * 2));
  const phoneArgs = ['-f', 'mulaw', '-ar', '8000', '-ac', '1', '-i', 'pipe:0', '-f', 's16le', '-ar', '24000', '-ac', '1', 'pipe:1'];
  const phoneSubject = {
    name: 'rt-translate toServiceFormat (Transform, 20 ms chunks)',
    run: () => throughTransform(toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), mulaw, 160),
  };
  await compare(
    `8 kHz mu-law -> 24 kHz mono s16le, ${SECONDS} s of audio per run, vs ffmpeg swr default (weaker filter)`,
    phoneSubject,
    { name: 'ffmpeg -threads 1, swr default (spawned, stdin/stdout)', run: () => throughFfmpeg(binary, phoneArgs, mulaw) },
    { unit: 'x realtime', audioSeconds: SECONDS, rounds: 5 },
  );
  const phoneHqArgs = withFilter(phoneArgs, hq.filter);
  await compare(
    `8 kHz mu-law -> 24 kHz mono s16le, ${SECONDS} s of audio per run, vs ffmpeg high quality (${hq.label})`,
    phoneSubject,
    { name: `ffmpeg -threads 1, ${hq.label} (spawned, stdin/stdout)`, run: () => throughFfmpeg(binary, phoneHqArgs, mulaw) },
    { unit: 'x realtime', audioSeconds: SECONDS, rounds: 5 },
  );
  console.log(`  ffmpeg start-up share: ${(await startupMs(binary, phoneArgs, mulaw.subarray(0, 8000))).toFixed(0)} ms for 1 s of audio`);
}
