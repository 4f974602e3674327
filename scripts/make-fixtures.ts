/**
 * Rebuilds the speech audio fixtures of rt-translate:
 *
 * - `test/fixtures/speech-en-24k.wav` (+ `speech-en-24k.json`, the measured voiced regions):
 *   three English sentences separated by exactly 1.2 s of digital silence, for the
 *   voice-activity and chunking tests. The regions are measured twice: as the client's detector
 *   sees them (20 ms frames) and as the emulator's does (30 ms frames), by this script's own code.
 * - `examples/assets/sample-en.wav`: the demo's two-sentence sample (shipped in the npm package).
 *
 * Every file is PCM16 little-endian, mono, 24000 Hz, with a 44-byte WAV header.
 *
 * How: each sentence is synthesized separately by eSpeak NG (the `espeak-ng` devDependency, a
 * WebAssembly build, so no system package is needed), which writes a 22050 Hz PCM16 WAV into
 * its in-memory file system. The script parses that WAV, drops the synthesizer's leading and
 * trailing digital silence, resamples 22050 -> 24000 Hz with a Kaiser-windowed sinc
 * interpolator, rounds to PCM16 with clipping, and lays the sentences out between runs of exact
 * zeros. It then re-reads what it wrote and checks it: header sizes, true-zero pauses, and the
 * voiced regions measured with a -40 dBFS RMS gate over 20 ms frames (one region per sentence,
 * no internal unvoiced gap of 500 ms or more) and with the emulator's settings (-45 dBFS over
 * 30 ms frames, 900 ms of silence between regions: the count each fixture expects).
 *
 * The output is deterministic: running the script twice gives byte-identical files.
 *
 * Usage (from the repository root):
 *   npm run build && node dist/scripts/make-fixtures.js           # write the files
 *   npm run build && node dist/scripts/make-fixtures.js --check   # compare with the committed files
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// ---------------------------------------------------------------------------------------------
// What to build
// ---------------------------------------------------------------------------------------------

/** Output sample rate of every fixture, in Hz. */
const OUTPUT_RATE = 24_000;

/** eSpeak NG voice and speaking rate (words per minute) used for every sentence. */
const VOICE = 'en-us';
const WORDS_PER_MINUTE = 185;

/**
 * A voiced-region measurement: frame length (ms), RMS gate (dB relative to full scale 32768), and
 * the unvoiced gap (ms) that separates two regions (shorter gaps stay inside one).
 */
interface Measurement {
  readonly frameMs: number;
  readonly gateDbfs: number;
  readonly silenceMs: number;
}

/** The client's detector (`lib/audio/vad.ts`): where the client finds speech. */
const CLIENT: Measurement = { frameMs: 20, gateDbfs: -40, silenceMs: 600 };
/** The emulator's detector (`lib/emulator/vad.ts`): the audio it answers with. */
const EMULATOR: Measurement = { frameMs: 30, gateDbfs: -45, silenceMs: 900 };
/** Largest unvoiced gap (ms, exclusive) allowed inside one sentence. */
const MAX_INTERNAL_GAP_MS = 500;

/** One output file: sentences laid out between runs of digital silence. */
interface FixtureSpec {
  /** Path of the WAV file, relative to the repository root. */
  readonly wavPath: string;
  /** Path of the JSON metadata file (voiced regions), relative to the repository root. */
  readonly jsonPath?: string;
  readonly sentences: readonly string[];
  /** Silence before the first sentence, in seconds. */
  readonly leadSeconds: number;
  /** Silence between consecutive sentences, in seconds. */
  readonly gapSeconds: number;
  /** Silence after the last sentence, in seconds. */
  readonly tailSeconds: number;
  /** Upper bound on the duration, in seconds (checked). */
  readonly maxSeconds: number;
  /** Regions the emulator's measurement must find (checked): one per sentence, or fewer when pauses are short. */
  readonly emulatorRegions: number;
}

const FIXTURES: readonly FixtureSpec[] = [
  {
    wavPath: 'test/fixtures/speech-en-24k.wav',
    jsonPath: 'test/fixtures/speech-en-24k.json',
    sentences: ['Hello, this is a test of live translation.', 'The weather is nice today.', 'Thank you for listening.'],
    leadSeconds: 0.3,
    gapSeconds: 1.2,
    tailSeconds: 1.0,
    maxSeconds: 8.5,
    emulatorRegions: 3,
  },
  {
    wavPath: 'examples/assets/sample-en.wav',
    sentences: ['Good morning. I would like to book a table for two people tonight.', 'Is there anything available at eight?'],
    leadSeconds: 0.3,
    gapSeconds: 0.8,
    tailSeconds: 0.8,
    maxSeconds: 7,
    // The 0.8 s pause is under the emulator's 900 ms: one answer where the client counts two.
    emulatorRegions: 1,
  },
];

// ---------------------------------------------------------------------------------------------
// Speech synthesis (eSpeak NG, WebAssembly)
// ---------------------------------------------------------------------------------------------

/** The part of the Emscripten module of `espeak-ng` this script uses. */
interface EspeakModule {
  readonly FS: { readFile(filePath: string): Uint8Array };
}

/** `espeak-ng`'s default export: runs the espeak-ng command line once with `arguments`. */
type EspeakFactory = (options: { arguments: string[]; print?: (line: string) => void; printErr?: (line: string) => void }) => Promise<EspeakModule>;

/** Mono PCM16 samples with their rate. */
interface Pcm16 {
  readonly sampleRate: number;
  readonly samples: Int16Array;
}

async function loadEspeak(): Promise<EspeakFactory> {
  // The package ships no type declarations; a non-literal specifier keeps the compiler from
  // looking for them, and the factory is typed by `EspeakFactory` above.
  const specifier: string = 'espeak-ng';
  const mod = (await import(specifier)) as { default: EspeakFactory };
  return mod.default;
}

/**
 * Synthesizes one sentence. Each call runs a fresh synthesizer instance so no state carries
 * over between sentences.
 */
async function synthesize(espeak: EspeakFactory, text: string): Promise<Pcm16> {
  const outFile = '/speech.wav';
  const messages: string[] = [];
  const instance = await espeak({
    arguments: ['-v', VOICE, '-s', String(WORDS_PER_MINUTE), '-w', outFile, text],
    print: (line) => messages.push(line),
    printErr: (line) => messages.push(line),
  });
  let wav: Uint8Array;
  try {
    wav = instance.FS.readFile(outFile);
  } catch {
    throw new Error(`espeak-ng wrote no audio for "${text}": ${messages.join(' | ') || 'no output'}`);
  }
  return parseWav(Buffer.from(wav.buffer, wav.byteOffset, wav.byteLength));
}

// ---------------------------------------------------------------------------------------------
// WAV reading and writing
// ---------------------------------------------------------------------------------------------

/**
 * Parses a RIFF/WAVE file holding PCM16 mono audio. Walks the chunk list to find `fmt ` and
 * `data` (any other chunk is skipped, honouring the pad byte of odd-sized chunks). A `data` size
 * larger than the bytes present (written by a streaming encoder) is clamped to what is there.
 */
function parseWav(buf: Buffer): Pcm16 {
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') {
    throw new Error('not a RIFF/WAVE file');
  }
  let format: { audioFormat: number; channels: number; sampleRate: number; bitsPerSample: number } | undefined;
  let data: Buffer | undefined;
  let offset = 12;
  while (offset + 8 <= buf.length) {
    const id = buf.toString('ascii', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    const body = offset + 8;
    const end = Math.min(body + size, buf.length);
    if (id === 'fmt ') {
      if (end - body < 16) throw new Error('WAV fmt chunk shorter than 16 bytes');
      format = {
        audioFormat: buf.readUInt16LE(body),
        channels: buf.readUInt16LE(body + 2),
        sampleRate: buf.readUInt32LE(body + 4),
        bitsPerSample: buf.readUInt16LE(body + 14),
      };
    } else if (id === 'data') {
      data = buf.subarray(body, end);
    }
    offset = body + size + (size % 2);
  }
  if (format === undefined || data === undefined) throw new Error('WAV has no fmt or data chunk');
  if (format.audioFormat !== 1 || format.channels !== 1 || format.bitsPerSample !== 16) {
    throw new Error(`WAV format ${format.audioFormat}, ${format.channels} channel(s), ${format.bitsPerSample} bits; ` + 'expected PCM (1), mono, 16 bits');
  }
  const samples = new Int16Array(Math.floor(data.length / 2));
  for (let i = 0; i < samples.length; i++) samples[i] = data.readInt16LE(i * 2);
  return { sampleRate: format.sampleRate, samples };
}

/** Encodes PCM16 mono samples as a WAV file with the canonical 44-byte header. */
function encodeWav({ sampleRate, samples }: Pcm16): Buffer {
  const dataBytes = samples.length * 2;
  const out = Buffer.alloc(44 + dataBytes);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + dataBytes, 4);
  out.write('WAVE', 8, 'ascii');
  out.write('fmt ', 12, 'ascii');
  out.writeUInt32LE(16, 16); // fmt chunk size
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(sampleRate, 24);
  out.writeUInt32LE(sampleRate * 2, 28); // byte rate
  out.writeUInt16LE(2, 32); // block align
  out.writeUInt16LE(16, 34); // bits per sample
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(dataBytes, 40);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i] ?? 0, 44 + i * 2);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Resampling: Kaiser-windowed sinc interpolation
// ---------------------------------------------------------------------------------------------

/** Resampler design parameters. */
interface SincDesign {
  /** Filter half-length in input samples (at the lower of the two rates). */
  readonly halfTaps: number;
  /** Kaiser window shape; 8 gives about 80 dB of stopband attenuation. */
  readonly beta: number;
  /** Cut-off as a fraction of the lower Nyquist frequency (below 1 leaves room for the transition band). */
  readonly cutoff: number;
}

const SINC_DESIGN: SincDesign = { halfTaps: 32, beta: 8, cutoff: 0.9 };

/** Zeroth-order modified Bessel function of the first kind (power series). */
function besselI0(x: number): number {
  const q = (x * x) / 4;
  let term = 1;
  let sum = 1;
  for (let k = 1; term > sum * 1e-17; k++) {
    term *= q / (k * k);
    sum += term;
  }
  return sum;
}

/**
 * Resamples by the rational ratio `toRate / fromRate` with a polyphase windowed-sinc filter.
 * Output sample `n` sits at input time `n * fromRate / toRate`; samples outside the input count
 * as zero. Each phase is normalized to unit DC gain. The result is in the input's scale (floats).
 */
function resample(input: Float64Array, fromRate: number, toRate: number, design: SincDesign): Float64Array {
  const divisor = gcd(fromRate, toRate);
  const up = toRate / divisor; // phases per input sample
  const down = fromRate / divisor; // input step, in phases, per output sample
  // Cut-off in cycles per input sample; the filter is stretched when decimating.
  const stretch = Math.max(1, fromRate / toRate);
  const fc = (design.cutoff * 0.5) / stretch;
  const half = Math.ceil(design.halfTaps * stretch);
  const width = 2 * half;
  const norm = besselI0(design.beta);

  // taps[phase * width + j] weights input[i - half + 1 + j] for an output at input time i + phase/up.
  const taps = new Float64Array(up * width);
  for (let phase = 0; phase < up; phase++) {
    const frac = phase / up;
    let sum = 0;
    for (let j = 0; j < width; j++) {
      const t = j - half + 1 - frac; // distance in input samples
      const x = 2 * fc * t;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
      const r = t / half;
      const window = Math.abs(r) >= 1 ? 0 : besselI0(design.beta * Math.sqrt(1 - r * r)) / norm;
      const w = 2 * fc * sinc * window;
      taps[phase * width + j] = w;
      sum += w;
    }
    for (let j = 0; j < width; j++) taps[phase * width + j] = (taps[phase * width + j] ?? 0) / sum;
  }

  const outLength = Math.ceil((input.length * up) / down);
  const out = new Float64Array(outLength);
  for (let n = 0; n < outLength; n++) {
    const pos = n * down; // exact integer position in phases
    const i = Math.floor(pos / up);
    const phase = pos - i * up;
    const base = i - half + 1;
    let acc = 0;
    for (let j = 0; j < width; j++) {
      const k = base + j;
      if (k >= 0 && k < input.length) acc += (input[k] ?? 0) * (taps[phase * width + j] ?? 0);
    }
    out[n] = acc;
  }
  return out;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** Rounds to the nearest integer and clips to the PCM16 range. Returns the samples and the clip count. */
function toPcm16(values: Float64Array): { samples: Int16Array; clipped: number } {
  const samples = new Int16Array(values.length);
  let clipped = 0;
  for (let i = 0; i < values.length; i++) {
    const v = Math.round(values[i] ?? 0);
    if (v > 32767 || v < -32768) clipped++;
    samples[i] = Math.max(-32768, Math.min(32767, v));
  }
  return { samples, clipped };
}

// ---------------------------------------------------------------------------------------------
// Layout and measurement
// ---------------------------------------------------------------------------------------------

/** The span from the first to the last non-zero sample (empty if all are zero). */
function trimZeros(samples: Int16Array): Int16Array {
  let start = 0;
  while (start < samples.length && samples[start] === 0) start++;
  let end = samples.length;
  while (end > start && samples[end - 1] === 0) end--;
  return samples.subarray(start, end);
}

/** Turns one synthesized sentence into a 24 kHz PCM16 clip that starts and ends on a non-zero sample. */
function prepareSentence(speech: Pcm16): { clip: Int16Array; clipped: number } {
  const trimmed = trimZeros(speech.samples);
  if (trimmed.length === 0) throw new Error('the synthesizer produced only silence');
  // Zero padding on both sides keeps the filter's ringing around the clip edges; whatever
  // rounds to zero is trimmed again below, so the silence around each clip stays exact.
  const pad = SINC_DESIGN.halfTaps * 2;
  const padded = new Float64Array(trimmed.length + 2 * pad);
  for (let i = 0; i < trimmed.length; i++) padded[pad + i] = trimmed[i] ?? 0;
  const { samples, clipped } = toPcm16(resample(padded, speech.sampleRate, OUTPUT_RATE, SINC_DESIGN));
  return { clip: trimZeros(samples), clipped };
}

/** Where each clip was placed in the output, in samples (end exclusive). */
interface Placement {
  readonly start: number;
  readonly end: number;
}

/** Lays clips out between exact runs of zeros. */
function layOut(clips: readonly Int16Array[], spec: FixtureSpec): { samples: Int16Array; placements: Placement[] } {
  const lead = Math.round(spec.leadSeconds * OUTPUT_RATE);
  const gap = Math.round(spec.gapSeconds * OUTPUT_RATE);
  const tail = Math.round(spec.tailSeconds * OUTPUT_RATE);
  const total = lead + clips.reduce((n, c) => n + c.length, 0) + gap * (clips.length - 1) + tail;
  const samples = new Int16Array(total); // zero-filled
  const placements: Placement[] = [];
  let at = lead;
  clips.forEach((clip, index) => {
    if (index > 0) at += gap;
    samples.set(clip, at);
    placements.push({ start: at, end: at + clip.length });
    at += clip.length;
  });
  return { samples, placements };
}

/** A run of voiced frames, in samples (end exclusive), with its longest internal unvoiced gap. */
interface VoicedRegion {
  readonly startSample: number;
  readonly endSample: number;
  readonly longestGapSamples: number;
}

/**
 * Splits audio into voiced regions: consecutive frames of `frameMs` (aligned to sample 0, the
 * last one possibly short) whose RMS is at least `gateDbfs` relative to 32768 are voiced;
 * voiced runs separated by less than `silenceMs` of unvoiced frames form one region.
 */
function measureVoicedRegions({ sampleRate, samples }: Pcm16, { frameMs, gateDbfs, silenceMs }: Measurement): VoicedRegion[] {
  const frame = Math.round((frameMs / 1000) * sampleRate);
  const gateRms = 32768 * 10 ** (gateDbfs / 20);
  const mergeGap = Math.round((silenceMs / 1000) * sampleRate);
  const regions: VoicedRegion[] = [];
  let current: { start: number; end: number; longestGap: number } | undefined;
  for (let start = 0; start < samples.length; start += frame) {
    const end = Math.min(start + frame, samples.length);
    let energy = 0;
    for (let i = start; i < end; i++) energy += (samples[i] ?? 0) ** 2;
    if (Math.sqrt(energy / (end - start)) < gateRms) continue;
    if (current !== undefined && start - current.end < mergeGap) {
      current.longestGap = Math.max(current.longestGap, start - current.end);
      current.end = end;
    } else {
      if (current !== undefined) regions.push(toRegion(current));
      current = { start, end, longestGap: 0 };
    }
  }
  if (current !== undefined) regions.push(toRegion(current));
  return regions;
}

function toRegion(run: { start: number; end: number; longestGap: number }): VoicedRegion {
  return { startSample: run.start, endSample: run.end, longestGapSamples: run.longestGap };
}

// ---------------------------------------------------------------------------------------------
// Build, verify, write
// ---------------------------------------------------------------------------------------------

/** A measurement as written in the metadata. */
interface MeasurementMetadata extends Measurement {
  readonly endExclusive: true;
}

/**
 * Metadata written next to a fixture: its format and the measured voiced region of each
 * sentence, as the client's detector finds it (`startSample`, `endSample`) and as the
 * emulator's does (`emulator`).
 */
interface FixtureMetadata {
  readonly sampleRate: number;
  readonly channels: 1;
  readonly bitsPerSample: 16;
  readonly totalSamples: number;
  readonly measurement: MeasurementMetadata;
  readonly emulatorMeasurement: MeasurementMetadata;
  readonly utterances: ReadonlyArray<{
    readonly startSample: number;
    readonly endSample: number;
    readonly emulator: { readonly startSample: number; readonly endSample: number };
    readonly text: string;
  }>;
}

interface BuiltFixture {
  readonly spec: FixtureSpec;
  readonly wav: Buffer;
  readonly json?: string;
  readonly report: string;
}

async function buildFixture(espeak: EspeakFactory, spec: FixtureSpec): Promise<BuiltFixture> {
  const clips: Int16Array[] = [];
  let clipped = 0;
  for (const text of spec.sentences) {
    const prepared = prepareSentence(await synthesize(espeak, text));
    clips.push(prepared.clip);
    clipped += prepared.clipped;
  }
  const { samples, placements } = layOut(clips, spec);
  const wav = encodeWav({ sampleRate: OUTPUT_RATE, samples });

  // Verify the encoded bytes, not the in-memory samples.
  const decoded = parseWav(wav);
  if (wav.length !== 44 + samples.length * 2 || decoded.sampleRate !== OUTPUT_RATE || decoded.samples.length !== samples.length) {
    throw new Error(`${spec.wavPath}: header does not match the data`);
  }
  const seconds = decoded.samples.length / OUTPUT_RATE;
  if (seconds > spec.maxSeconds) throw new Error(`${spec.wavPath}: ${seconds} s is longer than ${spec.maxSeconds} s`);
  const silences: Placement[] = [];
  let previousEnd = 0;
  for (const p of placements) {
    silences.push({ start: previousEnd, end: p.start });
    previousEnd = p.end;
  }
  silences.push({ start: previousEnd, end: decoded.samples.length });
  for (const s of silences) {
    if (decoded.samples.subarray(s.start, s.end).some((v) => v !== 0)) {
      throw new Error(`${spec.wavPath}: samples ${s.start}..${s.end} should be digital silence`);
    }
  }
  const regions = measureVoicedRegions(decoded, CLIENT);
  if (regions.length !== spec.sentences.length) {
    throw new Error(`${spec.wavPath}: measured ${regions.length} voiced regions, expected ${spec.sentences.length}`);
  }
  const emulatorRegions = measureVoicedRegions(decoded, EMULATOR);
  if (emulatorRegions.length !== spec.emulatorRegions) {
    throw new Error(`${spec.wavPath}: the emulator's measurement found ${emulatorRegions.length} voiced regions, expected ${spec.emulatorRegions}`);
  }
  const maxGap = Math.round((MAX_INTERNAL_GAP_MS / 1000) * OUTPUT_RATE);
  const frame = Math.round((CLIENT.frameMs / 1000) * OUTPUT_RATE);
  const lines = [`${spec.wavPath}: ${decoded.samples.length} samples = ${seconds.toFixed(3)} s, ${wav.length} bytes, ` + `${clipped} sample(s) clipped`];
  regions.forEach((region, index) => {
    const placement = placements[index];
    if (placement === undefined) throw new Error('unreachable: one placement per sentence');
    // Frames are aligned to sample 0, so a voiced frame may overlap a clip edge by up to one frame.
    if (region.startSample < placement.start - frame || region.endSample > placement.end + frame) {
      throw new Error(`${spec.wavPath}: voiced region ${index} lies outside sentence ${index}`);
    }
    if (region.longestGapSamples >= maxGap) {
      throw new Error(`${spec.wavPath}: sentence ${index} has an internal gap of ${region.longestGapSamples} samples`);
    }
    lines.push(
      `  sentence ${index + 1}: clip ${placement.start}..${placement.end}, voiced ${region.startSample}..${region.endSample} ` +
        `(${(region.startSample / OUTPUT_RATE).toFixed(3)}..${(region.endSample / OUTPUT_RATE).toFixed(3)} s), ` +
        `longest internal gap ${((region.longestGapSamples / OUTPUT_RATE) * 1000).toFixed(0)} ms`,
    );
  });
  const emulatorFrame = Math.round((EMULATOR.frameMs / 1000) * OUTPUT_RATE);
  emulatorRegions.forEach((region, index) => {
    // Each region covers whole sentences: it starts and ends within a frame of a clip's edges.
    const first = placements.find((p) => region.startSample < p.end);
    const last = [...placements].reverse().find((p) => region.endSample > p.start);
    if (first === undefined || last === undefined || region.startSample < first.start - emulatorFrame || region.endSample > last.end + emulatorFrame) {
      throw new Error(`${spec.wavPath}: the emulator's voiced region ${index} does not cover whole sentences`);
    }
    lines.push(
      `  emulator region ${index + 1}: voiced ${region.startSample}..${region.endSample} ` +
        `(${(region.startSample / OUTPUT_RATE).toFixed(3)}..${(region.endSample / OUTPUT_RATE).toFixed(3)} s)`,
    );
  });

  let json: string | undefined;
  if (spec.jsonPath !== undefined) {
    if (emulatorRegions.length !== regions.length) throw new Error(`${spec.jsonPath}: both measurements must find one region per sentence`);
    const metadata: FixtureMetadata = {
      sampleRate: OUTPUT_RATE,
      channels: 1,
      bitsPerSample: 16,
      totalSamples: decoded.samples.length,
      measurement: { ...CLIENT, endExclusive: true },
      emulatorMeasurement: { ...EMULATOR, endExclusive: true },
      utterances: regions.map((r, i) => ({
        startSample: r.startSample,
        endSample: r.endSample,
        emulator: { startSample: emulatorRegions[i]!.startSample, endSample: emulatorRegions[i]!.endSample },
        text: spec.sentences[i] ?? '',
      })),
    };
    json = `${JSON.stringify(metadata, null, 2)}\n`;
  }
  return { spec, wav, ...(json === undefined ? {} : { json }), report: lines.join('\n') };
}

/** The repository root: the nearest ancestor of this script holding a package.json. */
function repositoryRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('no package.json above the script');
    dir = parent;
  }
  return dir;
}

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  const root = repositoryRoot();
  const espeak = await loadEspeak();
  let stale = 0;
  for (const spec of FIXTURES) {
    const built = await buildFixture(espeak, spec);
    console.log(built.report);
    const outputs: Array<[string, Buffer]> = [[spec.wavPath, built.wav]];
    if (spec.jsonPath !== undefined && built.json !== undefined) outputs.push([spec.jsonPath, Buffer.from(built.json)]);
    for (const [relative, bytes] of outputs) {
      const file = path.join(root, relative);
      if (check) {
        const current = existsSync(file) ? await readFile(file) : undefined;
        if (current === undefined || !current.equals(bytes)) {
          console.error(`  ${relative} is out of date`);
          stale++;
        }
      } else {
        await mkdir(path.dirname(file), { recursive: true });
        await writeFile(file, bytes);
      }
    }
  }
  if (stale > 0) {
    console.error(`${stale} file(s) differ; run the script without --check to rebuild them`);
    process.exitCode = 1;
  }
}

await main();
