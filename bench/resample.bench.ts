/**
 * The four conversions of the integration paths against ffmpeg doing the same conversion on the
 * same bytes, in the same run:
 * - 48 kHz stereo s16le -> 24 kHz mono (Discord voice to the service),
 * - 24 kHz mono -> 48 kHz stereo (the service to Discord playback),
 * - 8 kHz mu-law -> 24 kHz mono (a phone call to the service),
 * - 24 kHz mono -> 8 kHz mu-law (the service to the phone call).
 *
 * Both sides are timed in CPU time, which the other processes of a shared machine do not
 * inflate. Ours: this process's CPU time for the public Transforms (`toServiceFormat` /
 * `fromServiceFormat`) fed `SECONDS` of audio in 64 KiB pieces (as a file or a pipe delivers
 * it, and as ffmpeg reads), and again in 20 ms pieces (as the Discord and Twilio adapters feed
 * it). ffmpeg: spawned per run, fed the same bytes on stdin, timed by its own `-benchmark`
 * figures (user + system CPU of the conversion), with start-up left out: each round also runs
 * it on 0.25 s of the same input and subtracts that. A wall-clock cross-check (elapsed time of
 * the whole run, minus the same for the short input) is printed for the comparable filter.
 *
 * The 20 ms rounds run without the harness's forced collection (`collect: false`). Each of our
 * rounds follows an ffmpeg round, during which this process only waits; a full collection then
 * finds the last round's streams dead, and V8 drops the optimized code of the stream machinery
 * that held them (Node's Readable and Writable internals, the processor) and recompiles it
 * during the round: 12,000 writes a run go through that code, so the recompilation (on V8's
 * worker threads, about 80 ms of CPU a run) and the slower code before it weighed more than
 * the conversion's own difference from ffmpeg (8k mu-law -> 24k: 1.95 with the collection, 0.97
 * without it, the same build). A call's process compiles that code once. The 64 KiB rounds
 * (240 writes a run) keep the collection.
 *
 * Baselines, by filter: soxr at precision 20 (ffmpeg's soxr default: about 120 dB of
 * rejection, at least our 105 dB design; the comparable precision), soxr at precision 28 (very
 * high quality, double precision inside), and swr's default 32-tap filter (far weaker than
 * ours, for context). Ratios are our time over ffmpeg's: below 1 is faster than ffmpeg.
 */
import { spawn } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { bytesPerSample, type AudioDescription } from '../lib/audio/audio-format.js';
import { fromServiceFormat, toServiceFormat } from '../lib/audio/convert.js';
import { encodeMulaw } from '../lib/audio/g711.js';
import { compare } from './harness.js';

const SECONDS = 240;
const SHORT_SECONDS = 0.25;

async function ffmpegPath(): Promise<string> {
  return (await import('@ffmpeg-installer/ffmpeg')).default.path;
}

/** Speech-like test material: a few moving tones plus noise, all channels different. */
export function program(rate: number, channels: number, seconds: number): Buffer {
  const frames = Math.round(rate * seconds);
  const b = Buffer.alloc(frames * channels * 2);
  let s = 1;
  for (let n = 0; n < frames; n++) {
    const t = n / rate;
    for (let c = 0; c < channels; c++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      const v =
        6000 * Math.sin(2 * Math.PI * (180 + 40 * Math.sin(t) + 30 * c) * t) + 3000 * Math.sin(2 * Math.PI * (1200 + 300 * c) * t) + ((s >>> 16) - 32768) / 16;
      b.writeInt16LE(Math.round(v), (n * channels + c) * 2);
    }
  }
  return b;
}

function toMulaw(pcm: Buffer): Buffer {
  const out = Buffer.alloc(pcm.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = encodeMulaw(pcm.readInt16LE(i * 2));
  return out;
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

interface FfmpegRun {
  bytes: number;
  /** User + system CPU ffmpeg reported (`-benchmark`), in ms, when asked for. */
  cpuMs?: number;
}

/** Runs ffmpeg on `input` (stdin); resolves with the output size (stdout). */
function throughFfmpeg(binary: string, args: string[], input: Buffer, benchmark = false): Promise<FfmpegRun> {
  return new Promise((resolve, reject) => {
    const logging = benchmark ? ['-nostats', '-loglevel', 'info', '-benchmark'] : ['-loglevel', 'error'];
    const child = spawn(binary, ['-hide_banner', ...logging, '-threads', '1', ...args], { stdio: ['pipe', 'pipe', benchmark ? 'pipe' : 'ignore'] });
    let bytes = 0;
    let log = '';
    child.stdout!.on('data', (c: Buffer) => (bytes += c.length));
    child.stderr?.on('data', (c: Buffer) => (log += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`ffmpeg exited with ${code}`));
      const times = /bench: utime=([\d.]+)s stime=([\d.]+)s/.exec(log);
      resolve({ bytes, cpuMs: times ? (Number(times[1]) + Number(times[2])) * 1000 : undefined });
    });
    child.stdin!.on('error', reject);
    child.stdin!.end(input);
  });
}

/** ffmpeg's `-f/-ar/-ac` input or output options for a description. */
function ffmpegFormat(d: AudioDescription): string[] {
  return ['-f', d.format === 'mulaw' ? 'mulaw' : 's16le', '-ar', String(d.rate), '-ac', String(d.channels)];
}

interface Conversion {
  name: string;
  label: string;
  from: AudioDescription;
  to: AudioDescription;
  make: () => NodeJS.ReadWriteStream;
}

const SERVICE: AudioDescription = { rate: 24000, channels: 1 };

const CONVERSIONS: Conversion[] = [
  {
    name: '48 kHz stereo s16le -> 24 kHz mono s16le (Discord in)',
    label: '48k stereo -> 24k mono',
    from: { rate: 48000, channels: 2 },
    to: SERVICE,
    make: () => toServiceFormat({ rate: 48000, channels: 2 }),
  },
  {
    name: '24 kHz mono s16le -> 48 kHz stereo s16le (Discord out)',
    label: '24k mono -> 48k stereo',
    from: SERVICE,
    to: { rate: 48000, channels: 2 },
    make: () => fromServiceFormat({ rate: 48000, channels: 2 }),
  },
  {
    name: '8 kHz mu-law -> 24 kHz mono s16le (phone in)',
    label: '8k mu-law -> 24k',
    from: { format: 'mulaw', rate: 8000, channels: 1 },
    to: SERVICE,
    make: () => toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }),
  },
  {
    name: '24 kHz mono s16le -> 8 kHz mu-law (phone out)',
    label: '24k -> 8k mu-law',
    from: SERVICE,
    to: { format: 'mulaw', rate: 8000, channels: 1 },
    make: () => fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }),
  },
];

function inputFor(d: AudioDescription, seconds: number): Buffer {
  const pcm = program(d.rate, d.channels, seconds);
  return d.format === 'mulaw' ? toMulaw(pcm) : pcm;
}

export default async function (): Promise<void> {
  let binary: string;
  try {
    binary = await ffmpegPath();
  } catch {
    console.log('resample: no ffmpeg binary (@ffmpeg-installer/ffmpeg is a dev dependency); skipped');
    return;
  }
  const filters: Array<{ filter: string; label: string; target?: number }> = [
    { filter: 'aresample=resampler=soxr:precision=20', label: 'soxr precision 20', target: 1 },
    { filter: 'aresample=resampler=soxr:precision=28', label: 'soxr precision 28', target: 1 },
    { filter: 'aresample=resampler=swr', label: 'swr default (32 taps, weaker)' },
  ];
  try {
    await throughFfmpeg(
      binary,
      [...ffmpegFormat(SERVICE), '-i', 'pipe:0', '-af', filters[0]!.filter, ...ffmpegFormat({ rate: 48000, channels: 1 }), 'pipe:1'],
      Buffer.alloc(9600),
    );
  } catch {
    console.log('resample: this ffmpeg has no soxr; comparing with swr only');
    filters.splice(0, 2);
  }
  const options = { unit: 'x realtime', audioSeconds: SECONDS, rounds: 5, minRoundMs: 300, clock: 'cpu' } as const;

  for (const conversion of CONVERSIONS) {
    const input = inputFor(conversion.from, SECONDS);
    const short = inputFor(conversion.from, SHORT_SECONDS);
    const frameMs20 = input.length / SECONDS / 50;
    const inFrames = input.length / (conversion.from.channels * bytesPerSample(conversion.from.format ?? 's16le'));
    const expected =
      Math.ceil((inFrames * conversion.to.rate) / conversion.from.rate) * conversion.to.channels * bytesPerSample(conversion.to.format ?? 's16le');
    for (const size of [65536, frameMs20]) {
      const ours = await throughTransform(conversion.make(), input, size);
      if (ours !== expected) throw new Error(`${conversion.label}: ours gave ${ours} bytes, expected ${expected}`);
    }
    const bulk = { name: 'rt-translate Transform, 64 KiB pieces', run: () => throughTransform(conversion.make(), input, 65536) };
    const framed = { name: 'rt-translate Transform, 20 ms pieces', run: () => throughTransform(conversion.make(), input, frameMs20) };
    console.log(`\n${conversion.name}, ${SECONDS} s of audio per run`);
    for (const [index, { filter, label, target }] of filters.entries()) {
      const args = [...ffmpegFormat(conversion.from), '-i', 'pipe:0', '-af', filter, ...ffmpegFormat(conversion.to), 'pipe:1'];
      const theirs = (await throughFfmpeg(binary, args, input)).bytes;
      if (Math.abs(theirs - expected) > expected * 0.01) throw new Error(`${conversion.label}: ffmpeg gave ${theirs} bytes, expected ${expected}`);
      const ffmpeg = {
        name: `ffmpeg -threads 1, ${label} (its -benchmark CPU, start-up subtracted)`,
        run: () => throughFfmpeg(binary, args, input, true),
        overhead: () => throughFfmpeg(binary, args, short, true),
      };
      await compare(`${conversion.label} vs ffmpeg ${label}`, bulk, ffmpeg, { ...options, target });
      if (index > 0) continue;
      // No forced collection before the 20 ms rounds (see the module comment).
      await compare(`${conversion.label}, 20 ms pieces, vs ffmpeg ${label}`, framed, ffmpeg, { ...options, target, collect: false });
      // Cross-check on the wall clock: elapsed time, ffmpeg's start-up subtracted the same way.
      await compare(
        `${conversion.label} vs ffmpeg ${label}, wall clock`,
        bulk,
        {
          name: `ffmpeg -threads 1, ${label} (elapsed, start-up subtracted)`,
          run: () => throughFfmpeg(binary, args, input),
          overhead: () => throughFfmpeg(binary, args, short),
        },
        { ...options, clock: 'wall' },
      );
    }
  }
}
