import { describe, expect, it } from 'vitest';
import { SharedFrameLevels, dbfsToMeanSquare, frameMeanSquares, meanSquare } from '../lib/audio/level.js';
import { firKernel } from '../lib/audio/wasm/fir.js';
import { SpeechSegmentCounter, VoiceActivityDetector, type VoiceSegment } from '../lib/audio/vad.js';
import { loadSpeechFixture } from './helpers/speech.js';

/** The mean square computed the plain way, for comparison. */
function reference(buf: Buffer, start: number, end: number): number {
  let sum = 0;
  for (let i = start; i < end; i += 2) sum += buf.readInt16LE(i) ** 2;
  return sum / ((end - start) / 2);
}

describe('meanSquare', () => {
  const samples = Buffer.alloc(2 * 1001);
  for (let i = 0; i < 1001; i++) samples.writeInt16LE(Math.round(Math.sin(i / 7) * 20_000) - (i % 3), i * 2);

  it.each([
    ['a byte offset divisible by 4 (two samples per read)', 0],
    ['an odd byte offset (per-sample reads)', 1],
    ['an even byte offset not divisible by 4 (one sample, then two per read)', 2],
    ['an odd byte offset, 3 mod 4', 3],
  ])('gives the exact mean square at %s', (_name, shift) => {
    // Copy the samples so they start at `shift` within a larger buffer.
    const host = Buffer.alloc(samples.length + 4);
    samples.copy(host, shift);
    const view = host.subarray(shift, shift + samples.length);
    expect((view.byteOffset + 0) % 2).toBe(shift % 2);
    expect(meanSquare(view, 0, view.length)).toBe(reference(samples, 0, samples.length));
    expect(meanSquare(view, 10, 970)).toBe(reference(samples, 10, 970));
    expect(meanSquare(view, 12, 970)).toBe(reference(samples, 12, 970));
    expect(meanSquare(view, 12, 14)).toBe(reference(samples, 12, 14));
    expect(meanSquare(view, 10, 16)).toBe(reference(samples, 10, 16));
  });

  it('is exact at the extremes of PCM16: -32768 and 32767, both halves of a 32-bit read', () => {
    const extremes = Buffer.alloc(8 * 2);
    for (const [i, v] of [-32768, 32767, -32768, -32768, 32767, 32767, -1, 1].entries()) extremes.writeInt16LE(v, i * 2);
    const aligned = Buffer.alloc(extremes.length);
    extremes.copy(aligned);
    expect(meanSquare(aligned, 0, aligned.length)).toBe(reference(extremes, 0, extremes.length));
    expect(meanSquare(aligned, 2, aligned.length - 2)).toBe(reference(extremes, 2, extremes.length - 2));
  });

  it.each([
    ['one frame (JavaScript)', 1, 960],
    ['a run of frames (the SIMD kernel)', 300, 960],
    ['frames of an odd sample count', 40, 322],
  ])('frameMeanSquares over %s equals meanSquare frame by frame, at any byte offset, the extremes included', (_name, frames, frameBytes) => {
    if (frames > 1) expect(firKernel()).toBeDefined(); // Node 20 on x64 and arm64 runs the kernel
    const data = Buffer.alloc(frames * frameBytes + 3);
    let seed = 7;
    for (let i = 0; i + 2 <= data.length; i += 2) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      const kind = seed % 7;
      data.writeInt16LE(kind === 0 ? -32768 : kind === 1 ? 32767 : ((seed >>> 8) & 0xffff) - 32768, i);
    }
    for (const offset of [0, 1, 2, 3]) {
      const out = new Float64Array(frames);
      frameMeanSquares(data, offset, frames, frameBytes, out);
      for (let f = 0; f < frames; f++) {
        const at = offset + f * frameBytes;
        expect(out[f]).toBe(reference(data, at, at + frameBytes));
      }
    }
    // Full scale negative throughout: 2^30 per sample, the largest a pair of lanes can sum to.
    const loudest = Buffer.alloc(frames * frameBytes);
    for (let i = 0; i < loudest.length; i += 2) loudest.writeInt16LE(-32768, i);
    const out = new Float64Array(frames);
    frameMeanSquares(loudest, 0, frames, frameBytes, out);
    expect([...out].every((v) => v === 32768 ** 2)).toBe(true);
  });

  it('dbfsToMeanSquare: full scale is 32768², -20 dBFS a hundredth of it', () => {
    expect(dbfsToMeanSquare(0)).toBe(32768 ** 2);
    expect(dbfsToMeanSquare(-20)).toBeCloseTo(32768 ** 2 / 100, 3);
  });
});

describe('VoiceActivityDetector and SpeechSegmentCounter', () => {
  const fixture = loadSpeechFixture();

  it('finds the speech fixture’s three utterances at their measured places, whatever the chunking', () => {
    for (const size of [1, 959, 4800, fixture.pcm.length]) {
      const detector = new VoiceActivityDetector();
      const ended: VoiceSegment[] = [];
      for (let o = 0; o < fixture.pcm.length; o += size) detector.push(fixture.pcm.subarray(o, o + size), (s) => ended.push(s));
      expect(ended.map((s) => [s.voicedStart / 2, s.voicedEnd / 2])).toEqual(fixture.utterances.map((u) => [u.startSample, u.endSample]));
    }
  });

  it('counts the segments of speech sent, the one in progress included', () => {
    const counter = new SpeechSegmentCounter();
    const firstUtteranceEnd = fixture.utterances[0]!.endSample * 2;
    counter.push(fixture.pcm.subarray(0, firstUtteranceEnd - 4800));
    expect(counter.segments).toBe(1); // still speaking
    counter.push(fixture.pcm.subarray(firstUtteranceEnd - 4800));
    expect(counter.segments).toBe(3);
  });

  it('does not count a click shorter than minSpeechMs as speech', () => {
    const counter = new SpeechSegmentCounter({ minSpeechMs: 100 });
    const click = Buffer.alloc(960 * 3);
    for (let i = 0; i < 480 * 2; i++) click.writeInt16LE(i % 2 ? 20_000 : -20_000, i * 2); // 40 ms loud
    counter.push(Buffer.concat([click, Buffer.alloc(48_000)]));
    expect(counter.segments).toBe(0);
    const speechLike = Buffer.alloc(48 * 300);
    for (let i = 0; i < speechLike.length / 2; i++) speechLike.writeInt16LE(i % 2 ? 20_000 : -20_000, i * 2); // 300 ms loud
    counter.push(Buffer.concat([speechLike, Buffer.alloc(48_000)]));
    expect(counter.segments).toBe(1);
  });
});

describe("SharedFrameLevels: a fan-out's detectors measure one piece once", () => {
  const fixture = loadSpeechFixture();

  it('detectors fed the same pieces in one pass find exactly what lone detectors find', () => {
    const shared = new SharedFrameLevels();
    const alone = new VoiceActivityDetector();
    const together = [new VoiceActivityDetector(), new VoiceActivityDetector(), new VoiceActivityDetector()];
    for (const d of together) d.shareLevels(shared);
    const found = { alone: [] as VoiceSegment[], together: together.map(() => [] as VoiceSegment[]) };
    for (let o = 0; o < fixture.pcm.length; o += 4800) {
      const piece = fixture.pcm.subarray(o, o + 4800);
      alone.push(piece, (s) => found.alone.push(s));
      shared.open();
      together.forEach((d, i) => d.push(piece, (s) => found.together[i]!.push(s)));
      shared.close();
    }
    expect(found.alone).toHaveLength(fixture.utterances.length);
    for (const segments of found.together) expect(segments).toEqual(found.alone);
    // Two of the three copied each piece's levels.
    expect(shared.reused).toBe(2 * Math.ceil(fixture.pcm.length / 4800));
  });

  it('keeps a measurement only within a pass: the same memory with other bytes is measured again', () => {
    const shared = new SharedFrameLevels();
    const piece = Buffer.alloc(960 * 5, 0);
    const out = new Float64Array(5);
    shared.open();
    shared.measure(piece, 0, 5, 960, out);
    expect(out[0]).toBe(0);
    shared.close();
    // The writer reuses its buffer for the next piece (loud now): a new pass measures it afresh.
    for (let i = 0; i < piece.length; i += 2) piece.writeInt16LE(10_000, i);
    shared.open();
    shared.measure(piece, 0, 5, 960, out);
    shared.close();
    expect(out[0]).toBe(10_000 * 10_000);
    // Outside a pass nothing is kept at all.
    piece.fill(0);
    shared.measure(piece, 0, 5, 960, out);
    expect(out[0]).toBe(0);
  });

  it('within a pass, a second reader of the same frames copies them; other offsets or lengths are measured', () => {
    const shared = new SharedFrameLevels();
    const piece = Buffer.alloc(960 * 4);
    for (let i = 0; i < piece.length; i += 2) piece.writeInt16LE(i % 4 ? 1000 : -3000, i);
    const out = new Float64Array(4);
    const expected = new Float64Array(4);
    frameMeanSquares(piece, 0, 4, 960, expected);
    shared.open();
    shared.measure(piece, 0, 4, 960, out);
    expect(Array.from(out)).toEqual(Array.from(expected));
    expect(shared.reused).toBe(0);
    out.fill(-1);
    // A view of the same memory (each session cuts its own view of the piece) is the same run.
    shared.measure(piece.subarray(0), 0, 4, 960, out);
    expect(Array.from(out)).toEqual(Array.from(expected));
    expect(shared.reused).toBe(1);
    shared.measure(piece, 960, 3, 960, out);
    expect(Array.from(out.subarray(0, 3))).toEqual(Array.from(expected.subarray(1)));
    shared.measure(piece, 0, 2, 960, out);
    shared.close();
    expect(shared.reused).toBe(1);
  });
});
