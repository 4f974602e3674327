/**
 * `rt-translate` with any input and output format, run in this process against the
 * embedded emulator (which answers each utterance with its own audio): raw formats described by
 * flags, WAV / Ogg/Opus / FLAC recognised by their header, MP3 and MP4 decoded through ffmpeg on
 * PATH (and the message without it), output formats and rates, `--realtime`, and the usage
 * errors that stop the command before any connection.
 *
 * Inputs are made from the speech fixture by the ffmpeg binary of the dev dependency
 * `@ffmpeg-installer/ffmpeg`, independently of the library's converters.
 *
 * How the translated audio is checked (the reference is the fixture's expected answer: each
 * utterance's voiced region as the emulator's detector finds it, PCM16 mono 24 kHz):
 * - lossless, exactly invertible paths (s16be, f32le, FLAC): the output, converted back to
 *   PCM16 LE where it is not, equals the reference byte for byte;
 * - lossy paths: the output is cut into its responses (byte counts from `--events`), each
 *   response is aligned on the fixture's timeline (lag search of +-3 frames of the emulator's
 *   detector), and its length, lag and signal-to-noise ratio are bounded. A lossy codec can move
 *   a soft onset across the emulator's -45 dBFS voice gate by a 30 ms frame, hence the length and
 *   lag tolerance of 2 frames (measured: 0 or 2, on the third sentence's soft onset). The SNR
 *   bounds are stated at each case with the values measured on this fixture (the inputs and
 *   the code are deterministic); they sit 3 to 7 dB below them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { chmod, copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { planConversion } from '../lib/audio/convert.js';
import { resolveDescription, type AudioDescription } from '../lib/audio/audio-format.js';
import { FfmpegDecoder, findFfmpegOnPath } from '../lib/audio/ffmpeg.js';
import { OggOpusDecoder } from '../lib/audio/ogg-opus.js';
import { SNIFF_BYTES, sniffAudio } from '../lib/audio/sniff.js';
import { IntegrityError, ValidationError } from '../lib/errors.js';
import { runChunked } from './helpers/streams.js';
import { pipeline } from 'node:stream/promises';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { runInProcess, type CliResult } from './helpers/cli.js';
import { collector } from './helpers/streams.js';
import { startConnectionCounter, type ConnectionCounter } from './helpers/cli.js';

const FFMPEG = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
/** PATH with the dev dependency's ffmpeg in front. */
const PATH_WITH_FFMPEG = [dirname(FFMPEG), process.env.PATH ?? ''].join(delimiter);
/** PATH without any directory holding an ffmpeg. */
const PATH_WITHOUT_FFMPEG = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => dir !== '' && findFfmpegOnPath(dir) === undefined)
  .join(delimiter);

const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
/** The first utterance and the silence after it (3.52 s), and the emulator's answer to it. */
const firstPart = fixture.pcm.subarray(0, 84_480 * 2);

/** Samples of one frame of the emulator's detector (30 ms at 24 kHz). */
const FRAME = 720;
/** The emulator answers each utterance's voiced region alone (no padding). */
const PAD = 0;

let dir: string;
const inputs: Record<string, string> = {};

function path(name: string): string {
  return join(dir, name);
}

/** Runs the dev dependency's ffmpeg on the fixture WAV; resolves with the output file's path. */
async function makeWithFfmpeg(name: string, outputArgs: string[], source = path('fixture.wav')): Promise<string> {
  const out = path(name);
  await promisify(execFile)(FFMPEG, ['-hide_banner', '-loglevel', 'error', '-y', '-i', source, ...outputArgs, out]);
  return out;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-formats-'));
  await writeFile(path('fixture.wav'), fixture.wav);
  await writeFile(path('first.pcm'), firstPart);
  // Stereo by duplication (ffmpeg's default upmix lowers each channel by 3 dB).
  const duplicate = ['-af', 'pan=stereo|c0=c0|c1=c0'];
  const made: Record<string, Promise<string>> = {
    s16le48kStereo: makeWithFfmpeg('in-48k-stereo.s16le', [...duplicate, '-f', 's16le', '-ar', '48000']),
    s16be: makeWithFfmpeg('in.s16be', ['-f', 's16be']),
    f32le: makeWithFfmpeg('in.f32le', ['-f', 'f32le']),
    mulaw: makeWithFfmpeg('in.mulaw', ['-f', 'mulaw', '-ar', '8000']),
    alaw: makeWithFfmpeg('in.alaw', ['-f', 'alaw', '-ar', '8000']),
    wav16kStereo: makeWithFfmpeg('in-16k-stereo.wav', [...duplicate, '-ar', '16000', '-c:a', 'pcm_s16le']),
    // Encoded at 48 kHz: for other rates this ffmpeg build writes the pre-skip in the input's
    // rate instead of 48 kHz units, which shifts the decoded audio (its own decoder's too).
    opus: makeWithFfmpeg('in.opus', [...duplicate, '-ar', '48000', '-c:a', 'libopus', '-b:a', '64k']),
    flac: makeWithFfmpeg('in.flac', ['-c:a', 'flac']),
    flac32k: makeWithFfmpeg('in-32k.flac', ['-ar', '32000', '-c:a', 'flac']),
    wav24bit: makeWithFfmpeg('in-24bit.wav', ['-c:a', 'pcm_s24le']),
    mp3: makeWithFfmpeg('in.mp3', ['-c:a', 'libmp3lame', '-b:a', '128k']),
    mp3Bare: makeWithFfmpeg('in-bare.mp3', ['-c:a', 'libmp3lame', '-b:a', '64k', '-id3v2_version', '0', '-write_xing', '0']),
    m4a: makeWithFfmpeg('in.m4a', ['-c:a', 'aac', '-b:a', '128k']),
    vorbis: makeWithFfmpeg('in.ogg', ['-c:a', 'libvorbis']),
  };
  Object.assign(inputs, Object.fromEntries(await Promise.all(Object.entries(made).map(async ([name, file]) => [name, await file] as const))));
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Converts `data` between two layouts with the library's conversion chain. */
function convert(data: Buffer, from: AudioDescription, to: AudioDescription): Buffer {
  const { processor } = planConversion(resolveDescription(from, 'from'), resolveDescription(to, 'to'));
  const head = processor.process(data);
  return Buffer.concat([head, processor.flush()]);
}

const SERVICE = { format: 's16le', rate: 24_000, channels: 1 } as const;

/** The fixture band-limited by a trip through `rate` (what a narrow-band input can carry). */
function bandLimited(rate: number): Buffer {
  return convert(convert(fixture.pcm, SERVICE, { rate, channels: 1 }), { rate, channels: 1 }, SERVICE);
}

let runs = 0;

/** Runs a translation en-us -> fr-fr with `--events`; returns the result and the events file. */
async function translate(args: string[], options: { stdin?: Buffer; env?: Record<string, string>; cwd?: string } = {}) {
  const events = path(`events-${++runs}.jsonl`);
  const result = await runInProcess(['--from', 'en-us', '--to', 'fr-fr', '--quiet-ms', '500', '--events', events, ...args], {
    ...options,
  });
  return { result, events };
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** Asserts a successful run: status 0, the emulator notice, the six text lines and the summary. */
function expectDone(result: CliResult): void {
  expect(result.stderr).not.toMatch(/error|warning/i);
  expect(result.code).toBe(0);
  const text = lines(result.stderr).slice(1, -1);
  expect(lines(result.stderr).at(-1)).toMatch(/^rt-translate: sent \d+\.\d s of audio, received \d+\.\d s in 3 responses\.$/);
  expect(text).toHaveLength(6);
  text.forEach((line, i) => expect(line).toMatch(i % 2 === 0 ? /^transcript \(en-us\): \[en-us utterance \d/ : /^translation \(fr-fr\): \[fr-fr/));
}

/** Bytes of service-format audio per response, from an events file. */
async function responseBytes(events: string): Promise<number[]> {
  const all = (await readFile(events, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { type: string; bytes?: number });
  const sizes: number[] = [];
  let current = 0;
  for (const event of all) {
    if (event.type === 'audio.delta') current += event.bytes!;
    if (event.type === 'audio.done') {
      sizes.push(current);
      current = 0;
    }
  }
  return sizes;
}

function samples(pcm: Buffer): Int16Array {
  return new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + pcm.length));
}

interface SegmentMatch {
  /** Output length minus the reference segment's length, in samples. */
  lengthDiff: number;
  /** Where the output segment sits on the fixture's timeline relative to the reference, in samples. */
  lag: number;
  /** Signal-to-noise ratio of the output segment against the reference at that lag, in dB. */
  snrDb: number;
}

/**
 * Aligns each response of `output` (PCM16 mono 24 kHz) on the timeline of `reference` (the
 * fixture, or a band-limited copy) and measures it. Reference segments are the fixture's
 * utterances' voiced regions.
 */
function matchSegments(output: Buffer, sizes: number[], reference: Buffer): SegmentMatch[] {
  const out = samples(output);
  const ref = samples(reference);
  const at = (i: number) => (i >= 0 && i < ref.length ? ref[i]! : 0);
  const matches: SegmentMatch[] = [];
  let offset = 0;
  let previousEnd = 0;
  fixture.utterances.forEach(({ emulator: u }, index) => {
    const length = (sizes[index] ?? 0) / 2;
    const start = Math.max(previousEnd, u.startSample - PAD);
    const end = Math.min(fixture.pcm.length / 2, u.endSample + PAD);
    previousEnd = end;
    const seg = out.subarray(offset, offset + length);
    offset += length;
    // Lag: the best normalized correlation over a 200 ms window of speech in the middle.
    const w0 = Math.floor(length / 2) - 2400;
    let bestLag = 0;
    let best = -Infinity;
    for (let lag = -3 * FRAME; lag <= 3 * FRAME; lag++) {
      let dot = 0;
      let energy = 0;
      for (let i = w0; i < w0 + 4800; i++) {
        const r = at(start + lag + i);
        dot += seg[i]! * r;
        energy += r * r;
      }
      const score = energy > 0 ? dot / Math.sqrt(energy) : -Infinity;
      if (score > best) {
        best = score;
        bestLag = lag;
      }
    }
    let signal = 0;
    let noise = 0;
    for (let i = 0; i < length; i++) {
      const r = at(start + bestLag + i);
      signal += r * r;
      noise += (seg[i]! - r) ** 2;
    }
    matches.push({ lengthDiff: length - (end - start), lag: bestLag, snrDb: 10 * Math.log10(signal / Math.max(noise, 1e-9)) });
  });
  expect(offset).toBe(out.length);
  return matches;
}

/** Asserts three responses, each within 2 frames in length and position, above `minSnrDb`. */
async function expectSpeech(output: Buffer, events: string, reference: Buffer, minSnrDb: number): Promise<SegmentMatch[]> {
  const sizes = await responseBytes(events);
  expect(sizes).toHaveLength(3);
  const matches = matchSegments(output, sizes, reference);
  for (const m of matches) {
    expect(Math.abs(m.lengthDiff)).toBeLessThanOrEqual(2 * FRAME);
    expect(Math.abs(m.lag)).toBeLessThanOrEqual(2 * FRAME);
    // Every converter compensates its delay: only the VAD's frame grid may shift a response.
    expect(Math.abs(m.lag % FRAME)).toBe(0);
    expect(m.snrDb).toBeGreaterThanOrEqual(minSnrDb);
  }
  return matches;
}

describe.concurrent('rt-translate input formats', () => {
  it("raw s16le 48 kHz stereo on stdin (-f s16le --ar 48000 --ac 2, and ffmpeg's -ar/-ac spelling)", async () => {
    const stdin = await readFile(inputs.s16le48kStereo!);
    const [long, short] = await Promise.all([
      translate(['-f', 's16le', '--ar', '48000', '--ac', '2'], { stdin }),
      translate(['-f', 's16le', '-ar', '48000', '-ac', '2'], { stdin }),
    ]);
    expectDone(long.result);
    expectDone(short.result);
    expect(short.result.stdout.equals(long.result.stdout)).toBe(true);
    // Resampled twice (ffmpeg up, the library down): measured 77.0, 78.3, 79.5 dB.
    await expectSpeech(long.result.stdout, long.events, fixture.pcm, 70);
  });

  it('raw s16be and f32le at 24 kHz: the output in the same format converts back to the reference exactly', async () => {
    const [be, f32] = await Promise.all([
      translate(['-i', inputs.s16be!, '-f', 's16be', '--out-format', 's16be']),
      translate(['-i', inputs.f32le!, '-f', 'f32le', '--out-format', 'f32le']),
    ]);
    expectDone(be.result);
    expect(be.result.stdout.length).toBe(expected.length);
    expect(Buffer.from(be.result.stdout).swap16().equals(expected)).toBe(true);
    expectDone(f32.result);
    expect(f32.result.stdout.length).toBe(expected.length * 2);
    expect(convert(f32.result.stdout, { format: 'f32le', rate: 24_000, channels: 1 }, SERVICE).equals(expected)).toBe(true);
  });

  it('G.711 mu-law and A-law at 8 kHz (-f mulaw; -f alaw --ar 8000)', async () => {
    const [mulaw, alaw] = await Promise.all([
      translate(['-f', 'mulaw'], { stdin: await readFile(inputs.mulaw!) }),
      translate(['-i', inputs.alaw!, '-f', 'alaw', '--ar', '8000']),
    ]);
    expectDone(mulaw.result);
    expectDone(alaw.result);
    // Against the fixture band-limited to 4 kHz by the library's resampler. What remains is
    // mostly the difference between ffmpeg's anti-aliasing filter (which made the input) and
    // the library's near 4 kHz, plus the G.711 coding: measured 34.4, 33.9, 35.3 dB for both.
    const narrow = bandLimited(8000);
    await expectSpeech(mulaw.result.stdout, mulaw.events, narrow, 30);
    await expectSpeech(alaw.result.stdout, alaw.events, narrow, 30);
  });

  it('a 16 kHz stereo WAV is recognised by its header and converted', async () => {
    const { result, events } = await translate(['-i', inputs.wav16kStereo!]);
    expectDone(result);
    // Against the fixture band-limited to 8 kHz (ffmpeg's and the library's filters differ near
    // 8 kHz): measured 41.1, 47.2, 43.5 dB.
    await expectSpeech(result.stdout, events, bandLimited(16_000), 38);
  });

  it('Ogg/Opus (48 kHz stereo) is recognised by its header (OggS + OpusHead) and decoded, pre-skip and end trimmed', async () => {
    const opus = await readFile(inputs.opus!);
    const [file, stdin] = await Promise.all([translate(['-i', inputs.opus!]), translate([], { stdin: opus })]);
    expectDone(file.result);
    expect(stdin.result.code).toBe(0);
    expect(stdin.result.stdout.equals(file.result.stdout)).toBe(true);
    // A perceptual codec at 64 kbit/s: measured 22.5, 25.7, 25.7 dB, lag 0 (a wrong pre-skip
    // shows as a lag; missing end trimming as a length difference).
    await expectSpeech(file.result.stdout, file.events, fixture.pcm, 18);
  });

  it('FLAC is recognised by its header and decoded losslessly: the output equals the reference', async () => {
    const { result } = await translate(['-i', inputs.flac!, '-o', path('flac-out.pcm')]);
    expectDone(result);
    const out = await readFile(path('flac-out.pcm'));
    expect(out.length).toBe(expected.length);
    expect(out.equals(expected)).toBe(true);
  });

  it('MP3 and MP4 (AAC) files are decoded through ffmpeg found on PATH', async () => {
    const env = { PATH: PATH_WITH_FFMPEG };
    const [mp3, m4a] = await Promise.all([translate(['-i', inputs.mp3!], { env }), translate(['-i', inputs.m4a!], { env })]);
    expectDone(mp3.result);
    expectDone(m4a.result);
    // Measured 25.6, 25.9, 26.0 dB (MP3, 128 kbit/s) and 45.6, 49.1, 46.0 dB (AAC, 128 kbit/s).
    await expectSpeech(mp3.result.stdout, mp3.events, fixture.pcm, 22);
    await expectSpeech(m4a.result.stdout, m4a.events, fixture.pcm, 40);
  });

  it('a file named like an ffmpeg protocol (concat:..., http:...) is read as the file it is', async () => {
    const env = { PATH: PATH_WITH_FFMPEG };
    await copyFile(inputs.mp3!, path('concat:in.mp3'));
    await copyFile(inputs.mp3!, path('http:in.mp3'));
    const [plain, concat, http] = await Promise.all([
      translate(['-i', 'in.mp3'], { env, cwd: dir }),
      translate(['-i', 'concat:in.mp3'], { env, cwd: dir }),
      translate(['-i', 'http:in.mp3'], { env, cwd: dir }),
    ]);
    expectDone(plain.result);
    expectDone(concat.result);
    expectDone(http.result);
    await expectSpeech(plain.result.stdout, plain.events, fixture.pcm, 22);
    expect(concat.result.stdout.equals(plain.result.stdout)).toBe(true);
    expect(http.result.stdout.equals(plain.result.stdout)).toBe(true);
  });

  it('a WAV or FLAC file the library cannot convert (24-bit, 32 kHz) is decoded through ffmpeg on PATH', async () => {
    const env = { PATH: PATH_WITH_FFMPEG };
    const [wav24, flac32k] = await Promise.all([translate(['-i', inputs.wav24bit!], { env }), translate(['-i', inputs.flac32k!], { env })]);
    // 24-bit samples made from 16-bit ones, at the service rate: back to the same 16 bits.
    expectDone(wav24.result);
    expect(wav24.result.stdout.equals(expected)).toBe(true);
    // Resampled twice (ffmpeg to 32 kHz and back): measured 79.7, 80.3, 80.7 dB.
    expectDone(flac32k.result);
    await expectSpeech(flac32k.result.stdout, flac32k.events, fixture.pcm, 74);
  });
});

describe.concurrent('rt-translate: an input that fails midway', () => {
  /** Offsets of the Ogg pages of `data`. */
  function oggPages(data: Buffer): number[] {
    const pages: number[] = [];
    for (let at = 0; at + 27 <= data.length;) {
      expect(data.toString('latin1', at, at + 4)).toBe('OggS');
      pages.push(at);
      const segments = data[at + 26]!;
      let length = 27 + segments;
      for (let k = 0; k < segments; k++) length += data[at + 27 + k]!;
      at += length;
    }
    return pages;
  }

  it('a corrupt Ogg page: everything before it is translated and written (as for the file cut there), then exit 2 naming the input error', async () => {
    const opus = await readFile(inputs.opus!);
    const pages = oggPages(opus);
    // After the first utterance and its pause (the first 3.2 s of 8.3 s).
    const bad = pages.find((offset) => offset >= opus.length * 0.45)!;
    const corrupt = Buffer.from(opus);
    corrupt[bad + 40]! ^= 0x10;
    await writeFile(path('corrupt.opus'), corrupt);
    await writeFile(path('cut.opus'), opus.subarray(0, bad));
    const [cut, failed, failedStdin] = await Promise.all([
      translate(['-i', path('cut.opus')]),
      translate(['-i', path('corrupt.opus')]),
      translate([], { stdin: corrupt }),
    ]);
    expect(cut.result.code).toBe(0);
    const translated = lines(cut.result.stderr).filter((line) => line.startsWith('translation'));
    expect(translated.length).toBeGreaterThanOrEqual(1);
    expect(cut.result.stdout.length).toBeGreaterThan(0);
    for (const { result } of [failed, failedStdin]) {
      expect(result.code).toBe(2);
      // The same audio and text as the cut file: nothing sent was lost.
      expect(result.stdout.equals(cut.result.stdout)).toBe(true);
      expect(lines(result.stderr).filter((line) => line.startsWith('translation'))).toEqual(translated);
      const last = lines(result.stderr).at(-1)!;
      expect(last).toMatch(
        new RegExp(
          `^rt-translate: input error: Cannot decode .+ as Ogg/Opus: Ogg page at byte ${bad} fails its CRC check: the data is corrupt ` +
            `\\[RTT_INTEGRITY\\]; (\\d+\\.\\d) s of audio before the failure were translated\\.$`,
        ),
      );
    }
    // How much was used: the decoded audio before the bad page.
    const seconds = /; (\d+\.\d) s of audio/.exec(lines(failed.result.stderr).at(-1)!)![1]!;
    const decoded = await runChunked(new OggOpusDecoder({ rate: 24_000, channels: 1 }), opus.subarray(0, bad), 65_536);
    expect(seconds).toBe((decoded.length / 48_000).toFixed(1));
  });
});

describe.concurrent('the library parts behind the inputs', () => {
  it('OggOpusDecoder: the encoded duration exactly, the same output for any chunking; a corrupt page fails its CRC', async () => {
    const opus = await readFile(inputs.opus!);
    const whole = await runChunked(new OggOpusDecoder({ rate: 24_000, channels: 1 }), opus, opus.length);
    expect(whole.length).toBe(fixture.pcm.length);
    for (const size of [777, 65_536]) {
      expect((await runChunked(new OggOpusDecoder({ rate: 24_000, channels: 1 }), opus, size)).equals(whole)).toBe(true);
    }
    // Byte by byte on the first pages (headers and the first audio pages) against the same bytes at once.
    const start = opus.subarray(0, 20_480);
    const startWhole = await runChunked(new OggOpusDecoder({ rate: 24_000, channels: 1 }), start, start.length);
    expect(startWhole.length).toBeGreaterThan(0);
    expect((await runChunked(new OggOpusDecoder({ rate: 24_000, channels: 1 }), start, 1)).equals(startWhole)).toBe(true);
    const stereo = await runChunked(new OggOpusDecoder(), opus, 4096);
    expect(stereo.length).toBe(fixture.pcm.length * 4); // 48 kHz, 2 channels
    const corrupt = Buffer.from(opus);
    corrupt[corrupt.length - 100]! ^= 0x40;
    const failure = await runChunked(new OggOpusDecoder({ rate: 24_000, channels: 1 }), corrupt, 4096).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(IntegrityError);
    expect((failure as Error).message).toMatch(/fails its CRC check/);
  });

  it('FfmpegDecoder runs exactly the ffmpeg it is given, the input named file:<absolute path>; destroy() kills and reaps it', async () => {
    // A wrapper that records its arguments, then becomes the real ffmpeg.
    const log = path('ffmpeg-args.txt');
    const wrapper = path('ffmpeg-wrapper.sh');
    await writeFile(wrapper, `#!/bin/sh\nprintf '%s\\n' "$@" > '${log}'\nexec '${FFMPEG}' "$@"\n`);
    await chmod(wrapper, 0o755);
    const inputPath = relative(process.cwd(), inputs.mp3!);
    const out: Buffer[] = [];
    await pipeline(new FfmpegDecoder({ ffmpegPath: wrapper, inputPath }), collector(out));
    const args = (await readFile(log, 'utf8')).split('\n');
    expect(args).toContain(`file:${inputs.mp3!}`);
    expect(args.slice(args.indexOf('-f'), args.indexOf('-f') + 6)).toEqual(['-f', 's16le', '-ar', '24000', '-ac', '1']);
    const direct = execFileSync(FFMPEG, ['-hide_banner', '-loglevel', 'error', '-i', inputs.mp3!, '-f', 's16le', '-ar', '24000', '-ac', '1', '-']);
    expect(Buffer.concat(out).equals(direct)).toBe(true);

    // Fed through stdin, which stays open: destroy() ends the process and waits for its exit.
    const waiting = new FfmpegDecoder({ ffmpegPath: FFMPEG });
    waiting.write((await readFile(inputs.mp3!)).subarray(0, 4096));
    const pid = waiting.pid!;
    expect(pid).toBeGreaterThan(0);
    expect(process.kill(pid, 0)).toBe(true);
    waiting.destroy();
    await once(waiting, 'close');
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));

    expect(() => new FfmpegDecoder({ ffmpegPath: '' })).toThrow(ValidationError);
  });

  it('sniffAudio: containers by header; an MP3 frame header counts only when the next frame confirms it', async () => {
    const head = async (file: string) => (await readFile(file)).subarray(0, 4096);
    const sniff = (bytes: Buffer) => {
      const first = sniffAudio(bytes.subarray(0, SNIFF_BYTES));
      return 'needBytes' in first ? sniffAudio(bytes.subarray(0, first.needBytes), bytes.length < first.needBytes) : first;
    };
    expect(sniff(fixture.wav)).toEqual({ kind: 'wav', name: 'WAV' });
    expect(sniff(await head(inputs.opus!))).toEqual({ kind: 'ogg-opus', name: 'Ogg/Opus' });
    expect(sniff(await head(inputs.vorbis!))).toEqual({ kind: 'foreign', name: 'Ogg/Vorbis' });
    expect(sniff(await head(inputs.flac!))).toEqual({ kind: 'flac', name: 'FLAC' });
    expect(sniff(await head(inputs.mp3!))).toEqual({ kind: 'foreign', name: 'MP3' });
    expect(sniff(await head(inputs.m4a!))).toEqual({ kind: 'foreign', name: 'MP4/M4A/MOV' });
    const bare = await head(inputs.mp3Bare!);
    expect(bare[0]).toBe(0xff); // no ID3 tag: the frame header itself
    expect(sniff(bare)).toEqual({ kind: 'foreign', name: 'MP3' });
    // The same first frame header followed by anything else is not MP3: raw PCM can start so.
    const lone = Buffer.concat([bare.subarray(0, 4), Buffer.alloc(4092, 0x11)]);
    expect(sniff(lone)).toEqual({ kind: 'unknown', name: 'unknown' });
    expect(sniffAudio(bare.subarray(0, SNIFF_BYTES), true)).toEqual({ kind: 'unknown', name: 'unknown' });
    expect(sniff(fixture.pcm)).toEqual({ kind: 'unknown', name: 'unknown' });
    expect(sniff(Buffer.from(new Int16Array(2048).fill(-1).buffer))).toEqual({ kind: 'unknown', name: 'unknown' });
  });
});

describe.concurrent('rt-translate output formats', () => {
  it('--out-format mulaw --out-ar 8000 writes G.711 at 8 kHz', async () => {
    const { result, events } = await translate(['-i', path('fixture.wav'), '--out-format', 'mulaw', '--out-ar', '8000']);
    expectDone(result);
    // One byte per sample at a third of the rate.
    expect(Math.abs(result.stdout.length - expected.length / 2 / 3)).toBeLessThanOrEqual(3);
    const back = convert(result.stdout, { format: 'mulaw', rate: 8000, channels: 1 }, SERVICE);
    // Against the fixture band-limited to 4 kHz by the same resampler, so this is the G.711
    // coding: measured 38.2, 38.0, 37.8 dB.
    await expectSpeech(back.subarray(0, expected.length), events, bandLimited(8000), 34);
  });

  it('-o x.wav --out-ar 48000 --out-ac 2 writes a WAV whose header has those values and exact sizes', async () => {
    const out = path('out-48k-stereo.wav');
    const { result, events } = await translate(['-i', path('fixture.wav'), '-o', out, '--out-ar', '48000', '--out-ac', '2']);
    expectDone(result);
    expect(result.stdout.length).toBe(0);
    const wav = await readFile(out);
    expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
    expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
    expect(wav.toString('latin1', 8, 16)).toBe('WAVEfmt ');
    expect(wav.readUInt16LE(20)).toBe(1); // integer PCM
    expect(wav.readUInt16LE(22)).toBe(2); // channels
    expect(wav.readUInt32LE(24)).toBe(48_000); // rate
    expect(wav.readUInt32LE(28)).toBe(48_000 * 4); // bytes per second
    expect(wav.readUInt16LE(32)).toBe(4); // block align
    expect(wav.readUInt16LE(34)).toBe(16);
    expect(wav.toString('latin1', 36, 40)).toBe('data');
    expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
    const data = wav.subarray(44);
    expect(Math.abs(data.length - expected.length * 4)).toBeLessThanOrEqual(8);
    // Both channels carry the same signal.
    const s = samples(data);
    for (let i = 0; i < s.length; i += 2) if (s[i] !== s[i + 1]) throw new Error(`channels differ at frame ${i / 2}`);
    const back = convert(data, { rate: 48_000, channels: 2 }, SERVICE);
    // Up and down again through the library's resampler: measured 73.1, 74.9, 78.5 dB.
    await expectSpeech(back.subarray(0, expected.length), events, fixture.pcm, 68);
  });

  it('-o x.wav --out-format mulaw writes a mu-law WAV; --out-format wav on stdout a WAV with placeholder sizes', async () => {
    const out = path('out-mulaw.wav');
    const [file, piped] = await Promise.all([
      translate(['-i', path('fixture.wav'), '-o', out, '--out-format', 'mulaw', '--out-ar', '8000']),
      translate(['-i', path('fixture.wav'), '--out-format', 'wav']),
    ]);
    expectDone(file.result);
    const wav = await readFile(out);
    expect(wav.readUInt16LE(20)).toBe(7); // WAVE_FORMAT_MULAW
    expect(wav.readUInt16LE(22)).toBe(1);
    expect(wav.readUInt32LE(24)).toBe(8000);
    expect(wav.readUInt16LE(34)).toBe(8);
    const dataBytes = wav.readUInt32LE(40);
    expect(wav.length).toBe(44 + dataBytes + (dataBytes % 2));
    expect(Math.abs(dataBytes - expected.length / 6)).toBeLessThanOrEqual(3);

    expectDone(piped.result);
    const header = piped.result.stdout.subarray(0, 44);
    expect(header.toString('latin1', 0, 4)).toBe('RIFF');
    expect(header.readUInt32LE(40)).toBe(4294967195); // unknown length on a pipe
    expect(piped.result.stdout.subarray(44).equals(expected)).toBe(true);
  });
});

describe.concurrent('rt-translate --realtime', () => {
  it('sends a file at real-time speed: the run lasts at least the audio, the answer is unchanged', async () => {
    // 1.25 s from the second sentence's start: the translator's end padding closes the utterance.
    const piece = fixture.pcm.subarray(84_480 * 2, (84_480 + 30_000) * 2);
    await writeFile(path('piece.pcm'), piece);
    const started = performance.now();
    const [paced, unpaced] = await Promise.all([translate(['-i', path('piece.pcm'), '--realtime']), translate(['-i', path('piece.pcm')])]);
    const elapsed = (performance.now() - started) / 1000;
    expect(paced.result.code).toBe(0);
    expect(unpaced.result.code).toBe(0);
    expect(unpaced.result.stdout.length).toBeGreaterThan(0);
    expect(paced.result.stdout.equals(unpaced.result.stdout)).toBe(true);
    // A lower bound only (it cannot be flaky in the slow direction): unpaced, it is over in a
    // fraction of that.
    expect(elapsed).toBeGreaterThanOrEqual((piece.length / 48_000) * 0.9);
  });
});

describe.concurrent('rt-translate: audio usage errors exit 2 before any connection', () => {
  /** Counts every TCP connection made to it: the command under test must make none. */
  let counter: ConnectionCounter;
  beforeAll(async () => {
    counter = await startConnectionCounter();
  });
  afterAll(() => counter.close());

  const pcm = fixture.pcm.subarray(0, 48_000);
  const cases: Array<{ name: string; args: () => string[]; stdin?: () => Promise<Buffer>; env?: Record<string, string>; message: RegExp }> = [
    {
      name: 'an unknown -f',
      args: () => ['-f', 'mp3'],
      message: /Invalid -f: expected one of s16le, s16be, f32le, mulaw, alaw, wav, ogg, flac .*\(got "mp3"\)/,
    },
    {
      name: 'an unsupported --ar',
      args: () => ['-f', 's16le', '--ar', '12345'],
      message: /Invalid --ar: expected a sample rate in Hz, one of 8000, 16000, 22050, 24000, 44100, 48000 \(got 12345\)/,
    },
    { name: '--ac 3', args: () => ['--ac', '3'], message: /Invalid --ac: expected a channel count of 1 or 2 \(got 3\)/ },
    { name: 'a non-numeric --out-ar', args: () => ['--out-ar', 'fast'], message: /Invalid --out-ar: .*\(got "fast"\)/ },
    {
      name: 'an unknown --out-format',
      args: () => ['--out-format', 'mp3'],
      message: /Invalid --out-format: expected one of s16le, s16be, f32le, mulaw, alaw, wav \(got "mp3"\)/,
    },
    {
      name: '-f wav with --ar',
      args: () => ['-f', 'wav', '--ar', '48000'],
      message: /Invalid --ar: expected nothing for wav input, whose header gives its rate and channels \(--ar and --ac describe raw input/,
    },
    {
      name: '--ac given for a WAV found by its header',
      args: () => ['--ac', '2'],
      stdin: async () => fixture.wav,
      message:
        /Invalid --ac: expected nothing for standard input, which is WAV \(recognised by its header\): its rate and channels come from the file \(--ar and --ac describe raw input; force raw input with -f\) \(got 2\)/,
    },
    {
      name: 'a .wav output with --out-format s16be',
      args: () => ['-o', path('never.wav'), '--out-format', 's16be'],
      message: /-o .*never\.wav writes a WAV file, which cannot hold --out-format s16be; accepted with a \.wav output: s16le, f32le, mulaw, alaw/,
    },
    { name: '--text-only with --out-format', args: () => ['--text-only', '--out-format', 'mulaw'], message: /--out-format has no effect with --text-only/ },
    {
      name: 'MP3 without ffmpeg on PATH',
      args: () => ['-i', inputs.mp3!],
      env: { PATH: PATH_WITHOUT_FFMPEG },
      message: /in\.mp3 is MP3 \(recognised by its header\), which the library does not decode itself: install ffmpeg \(on PATH, or set FFMPEG_PATH\)/,
    },
    {
      name: 'Ogg/Vorbis on stdin without ffmpeg on PATH',
      args: () => [],
      stdin: () => readFile(inputs.vorbis!),
      env: { PATH: PATH_WITHOUT_FFMPEG },
      message: /standard input is Ogg\/Vorbis \(recognised by its header\).*install ffmpeg/,
    },
    {
      name: 'Ogg/Vorbis forced with -f ogg',
      args: () => ['-f', 'ogg', '-i', inputs.vorbis!],
      message: /Cannot decode .*in\.ogg as Ogg\/Opus: Not an Ogg\/Opus stream: found Ogg streams of Vorbis/,
    },
    {
      name: 'a 24-bit WAV without ffmpeg on PATH',
      args: () => ['-i', inputs.wav24bit!],
      env: { PATH: PATH_WITHOUT_FFMPEG },
      message:
        /Cannot decode .*in-24bit\.wav as WAV: Cannot convert this WAV stream: found format 65534\/1, 24-bit, 1 channel\(s\), 24000 Hz, LE; accepted: PCM 16-bit/,
    },
    {
      name: 'a 24-bit WAV on stdin, even with ffmpeg on PATH (it decodes files only)',
      args: () => [],
      stdin: () => readFile(inputs.wav24bit!),
      env: { PATH: PATH_WITH_FFMPEG },
      message: /Cannot decode standard input as WAV: Cannot convert this WAV stream: found format 65534\/1, 24-bit/,
    },
    {
      name: 'a FLAC at 32 kHz without ffmpeg on PATH',
      args: () => ['-i', inputs.flac32k!],
      env: { PATH: PATH_WITHOUT_FFMPEG },
      message:
        /Cannot decode .*in-32k\.flac as FLAC: Cannot convert this FLAC stream: found 16-bit, 1 channel\(s\), 32000 Hz; accepted: 1 or 2 channels at one of 8000, .*48000 Hz/,
    },
  ];

  it.each(cases)('$name', async ({ args, stdin, env, message }) => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', counter.url, '--api-key', 'test-key', ...args()], {
      stdin: stdin ? await stdin() : pcm,
      ...(env ? { env } : {}),
    });
    expect(result.code).toBe(2);
    expect(result.stdout.length).toBe(0);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr).toMatch(/^rt-translate: /);
    expect(result.stderr).toMatch(message);
    expect(counter.connections).toBe(0);
  });
});
