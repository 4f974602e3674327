/**
 * The four conversions of the integration paths against ffmpeg doing the same conversion on the
 * same bytes, in the same run:
 * - 48 kHz stereo s16le -> 24 kHz mono (Discord voice to the service),
 * - 24 kHz mono -> 48 kHz stereo (the service to Discord playback),
 * - 8 kHz mu-law -> 24 kHz mono (a phone call to the service),
 * - 24 kHz mono -> 8 kHz mu-law (the service to the phone call).
 *
 * Ours: the public Transforms (`toServiceFormat` / `fromServiceFormat`) fed 20 ms chunks, as
 * the adapters feed them, `SECONDS` of audio per run. ffmpeg: spawned per run and fed the same
 * bytes on stdin, with its start-up left out: each round also times ffmpeg on 0.25 s of the
 * same input and subtracts that (the "overhead" of the harness). As a cross-check that needs
 * no subtraction, ffmpeg's own `-benchmark` user CPU time over the whole input is printed too.
 *
 * Baselines, by filter: soxr at precision 20 (ffmpeg's soxr default: about 120 dB of
 * rejection, at least our 105 dB design; the comparable precision, and the target), soxr at
 * precision 28 (very high quality, double precision inside), and swr's default 32-tap filter
 * (far weaker than ours, for context). Figures are "x realtime"; ratios are our time over
 * ffmpeg's, so below 1 means faster than ffmpeg.
 */
import { spawn } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { bytesPerSample, type AudioDescription } from '../lib/audio/audio-format.js';
import { fromServiceFormat, toServiceFormat } from '../lib/audio/convert.js';
import { encodeMulaw } from '../lib/audio/g711.js';
import { compare, record } from './harness.js';

const SECONDS = 60;
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
        6000 * Math.sin(2 * Math.PI * (180 + 40 * Math.sin(t) + 30 * c) * t) +
        3000 * Math.sin(2 * Math.PI * (1200 + 300 * c) * t) +
        ((s >>> 16) - 32768) / 16;
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
  /** User CPU seconds ffmpeg reported (`-benchmark`), when asked for. */
  utime?: number;
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
      const utime = /bench: utime=([\d.]+)s/.exec(log);
      resolve({ bytes, utime: utime ? Number(utime[1]) : undefined });
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
    await throughFfmpeg(binary, [...ffmpegFormat(SERVICE), '-i', 'pipe:0', '-af', filters[0]!.filter, ...ffmpegFormat({ rate: 48000, channels: 1 }), 'pipe:1'], Buffer.alloc(9600));
  } catch {
    console.log('resample: this ffmpeg has no soxr; comparing with swr only');
    filters.splice(0, 2);
  }

  for (const conversion of CONVERSIONS) {
    const input = inputFor(conversion.from, SECONDS);
    const short = inputFor(conversion.from, SHORT_SECONDS);
    const chunkBytes = input.length / SECONDS / 50;
    const inFrames = input.length / (conversion.from.channels * bytesPerSample(conversion.from.format ?? 's16le'));
    const expected = Math.ceil((inFrames * conversion.to.rate) / conversion.from.rate) * conversion.to.channels * bytesPerSample(conversion.to.format ?? 's16le');
    const ours = await throughTransform(conversion.make(), input, chunkBytes);
    if (Math.abs(ours - expected) > 8) throw new Error(`${conversion.label}: ours gave ${ours} bytes, expected ${expected}`);
    const subject = { name: 'rt-translate (Transform, 20 ms chunks)', run: () => throughTransform(conversion.make(), input, chunkBytes) };
    console.log(`\n${conversion.name}, ${SECONDS} s of audio per run`);
    for (const { filter, label, target } of filters) {
      const args = [...ffmpegFormat(conversion.from), '-i', 'pipe:0', '-af', filter, ...ffmpegFormat(conversion.to), 'pipe:1'];
      const theirs = (await throughFfmpeg(binary, args, input)).bytes;
      if (Math.abs(theirs - expected) > expected * 0.01) throw new Error(`${conversion.label}: ffmpeg gave ${theirs} bytes, expected ${expected}`);
      const result = await compare(
        `${conversion.label} vs ffmpeg ${label}`,
        subject,
        {
          name: `ffmpeg -threads 1, ${label}, start-up subtracted (spawn on ${SHORT_SECONDS} s of input)`,
          run: () => throughFfmpeg(binary, args, input),
          overhead: () => throughFfmpeg(binary, args, short),
        },
        { unit: 'x realtime', audioSeconds: SECONDS, rounds: 5, minRoundMs: 300, target },
      );
      // Cross-check: ffmpeg's own CPU time for the whole input, minus that for the short one.
      const cpu: number[] = [];
      for (let i = 0; i < 3; i++) {
        const long = (await throughFfmpeg(binary, args, input, true)).utime;
        const tiny = (await throughFfmpeg(binary, args, short, true)).utime;
        if (long !== undefined && tiny !== undefined) cpu.push(long - tiny);
      }
      if (cpu.length > 0) {
        cpu.sort((a, b) => a - b);
        const ffmpegMs = cpu[cpu.length >> 1]! * 1000;
        const ratio = result.subjectMsPerRun / Math.max(ffmpegMs, 0.001);
        console.log(`  cross-check: ffmpeg -benchmark user CPU ${ffmpegMs.toFixed(0)} ms per run (${(SECONDS / (ffmpegMs / 1000)).toFixed(0)}x realtime); ours / that = ${ratio.toFixed(2)}`);
        if (target !== undefined) record({ name: `${conversion.label} vs ffmpeg ${label} (its -benchmark CPU time)`, value: ratio, kind: 'max', bound: target });
      }
    }
  }
}
