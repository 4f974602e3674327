import { describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { UtteranceSegmenter, VAD_FRAME_BYTES, type SegmentedUtterance } from '../lib/emulator/vad.js';

/** Bytes per millisecond of PCM16 mono 24 kHz. */
const MS = 48;

/** A 440 Hz tone whose peak is `dbfs` relative to full scale. */
function tone(ms: number, dbfs = -12): Buffer {
  const samples = ms * 24;
  const amplitude = 32767 * 10 ** (dbfs / 20);
  const out = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return out;
}

function zeros(ms: number): Buffer {
  return Buffer.alloc(ms * MS);
}

/** Feeds `input` in pieces of `piece` bytes and collects every utterance. */
function run(segmenter: UtteranceSegmenter, input: Buffer, piece = 4800): SegmentedUtterance[] {
  const out: SegmentedUtterance[] = [];
  for (let at = 0; at < input.length; at += piece) out.push(...segmenter.push(input.subarray(at, at + piece)));
  return out;
}

function summary(u: SegmentedUtterance): [number, number, number, number, number] {
  return [u.index, u.voicedStart / MS, u.voicedEnd / MS, u.audioStart / MS, u.audioEnd / MS];
}

/** The padding these cases were written for (the default is none). */
const PAD_300 = { paddingMs: 300 };

describe('UtteranceSegmenter', () => {
  it('by default returns each voiced region alone: a translation as long as the speech', () => {
    const input = Buffer.concat([zeros(500), tone(800), zeros(1000), tone(1200), zeros(700)]);
    const utterances = run(new UtteranceSegmenter(), input);
    expect(utterances.map(summary)).toEqual([
      [1, 500, 1300, 500, 1300],
      [2, 2300, 3500, 2300, 3500],
    ]);
    for (const u of utterances) expect(u.audio.length).toBe((u.voicedEnd - u.voicedStart));
  });

  it('finds each burst, pads 300 ms each side and returns the exact input bytes', () => {
    const input = Buffer.concat([zeros(500), tone(800), zeros(1000), tone(1200), zeros(700)]);
    const utterances = run(new UtteranceSegmenter(PAD_300), input);
    expect(utterances.map(summary)).toEqual([
      [1, 500, 1300, 200, 1600],
      [2, 2300, 3500, 2000, 3800],
    ]);
    expect(utterances.map((u) => u.durationSeconds)).toEqual([0.8, 1.2]);
    for (const u of utterances) expect(u.audio.equals(input.subarray(u.audioStart, u.audioEnd))).toBe(true);
  });

  it('ends an utterance only after the configured silence', () => {
    const input = Buffer.concat([tone(400), zeros(580), tone(400), zeros(600)]);
    // 580 ms of silence is under the default 600 ms: one utterance spanning both bursts.
    expect(run(new UtteranceSegmenter(PAD_300), input).map(summary)).toEqual([[1, 0, 1380, 0, 1680]]);
    // With 500 ms, the gap ends the first one.
    expect(run(new UtteranceSegmenter({ ...PAD_300, silenceMs: 500 }), input).map(summary)).toEqual([
      [1, 0, 400, 0, 700],
      [2, 980, 1380, 700, 1680],
    ]);
  });

  it('never pads into the previous utterance, nor before the first byte', () => {
    const input = Buffer.concat([zeros(100), tone(400), zeros(400), tone(400), zeros(400)]);
    const utterances = run(new UtteranceSegmenter({ ...PAD_300, silenceMs: 200 }), input);
    // End padding is cut to the 200 ms of silence received; the next start padding stops there.
    expect(utterances.map(summary)).toEqual([
      [1, 100, 500, 0, 700],
      [2, 900, 1300, 700, 1500],
    ]);
  });

  it('forces an end after maxUtteranceMs of endless speech, without gaps or overlaps', () => {
    const input = Buffer.concat([zeros(500), tone(1000), zeros(700)]);
    const utterances = run(new UtteranceSegmenter({ ...PAD_300, maxUtteranceMs: 400 }), input);
    expect(utterances.map(summary)).toEqual([
      [1, 500, 900, 200, 900],
      [2, 900, 1300, 900, 1300],
      [3, 1300, 1500, 1300, 1800],
    ]);
    expect(Buffer.concat(utterances.map((u) => u.audio)).equals(input.subarray(200 * MS, 1800 * MS))).toBe(true);
  });

  it('uses the threshold: a -50 dBFS tone is silence by default and voice at -60 dBFS', () => {
    const input = Buffer.concat([zeros(400), tone(600, -50), zeros(700)]);
    expect(run(new UtteranceSegmenter(PAD_300), input)).toEqual([]);
    expect(run(new UtteranceSegmenter({ ...PAD_300, thresholdDbfs: -60 }), input).map(summary)).toEqual([[1, 400, 1000, 100, 1300]]);
  });

  it('honours paddingMs', () => {
    const input = Buffer.concat([zeros(400), tone(600), zeros(700)]);
    expect(run(new UtteranceSegmenter({ paddingMs: 0 }), input).map(summary)).toEqual([[1, 400, 1000, 400, 1000]]);
    expect(run(new UtteranceSegmenter({ paddingMs: 100 }), input).map(summary)).toEqual([[1, 400, 1000, 300, 1100]]);
  });

  it('gives the same result whatever the chunking, odd byte counts included', () => {
    const input = Buffer.concat([zeros(250), tone(730), zeros(900), tone(510), zeros(650)]);
    const reference = run(new UtteranceSegmenter(), input, input.length);
    for (const piece of [1, 7, 959, 961, 4801]) {
      const got = run(new UtteranceSegmenter(), input, piece);
      expect(got.map(summary)).toEqual(reference.map(summary));
      expect(got.map((u) => u.audio.toString('hex'))).toEqual(reference.map((u) => u.audio.toString('hex')));
    }
    expect(reference).toHaveLength(2);
  });

  it('starts an utterance at the first frame whose level is above the threshold', () => {
    // The burst begins 100 samples into a frame: that frame is voiced already.
    const input = Buffer.concat([zeros(200), Buffer.alloc(200), tone(500), zeros(700)]);
    const [u] = run(new UtteranceSegmenter(), input);
    expect(u!.voicedStart).toBe(10 * VAD_FRAME_BYTES);
    expect(u!.voicedEnd).toBe(Math.ceil((200 * MS + 200 + 500 * MS) / VAD_FRAME_BYTES) * VAD_FRAME_BYTES);
  });

  it('keeps bounded memory through long silence and endless speech', () => {
    const segmenter = new UtteranceSegmenter({ maxUtteranceMs: 1000 });
    let peak = 0;
    const silence = zeros(100);
    for (let i = 0; i < 600; i++) {
      segmenter.push(silence);
      peak = Math.max(peak, segmenter.retainedBytes);
    }
    expect(peak).toBeLessThanOrEqual(300 * MS + silence.length);
    const speech = tone(100);
    let count = 0;
    for (let i = 0; i < 600; i++) {
      count += segmenter.push(speech).length;
      peak = Math.max(peak, segmenter.retainedBytes);
    }
    expect(count).toBe(60);
    expect(peak).toBeLessThanOrEqual((300 + 1000) * MS + speech.length);
  });

  it('drops the utterance in progress on request', () => {
    const segmenter = new UtteranceSegmenter();
    expect(segmenter.push(Buffer.concat([zeros(100), tone(500)]))).toEqual([]);
    expect(segmenter.speaking).toBe(true);
    segmenter.dropCurrent();
    expect(segmenter.push(zeros(700))).toEqual([]);
    expect(segmenter.speaking).toBe(false);
  });

  it.each([
    ['paddingMs', { paddingMs: 301 }],
    ['silenceMs', { silenceMs: 0 }],
    ['maxUtteranceMs', { maxUtteranceMs: -1 }],
    ['thresholdDbfs', { thresholdDbfs: 3 }],
  ])('rejects a bad %s', (field, options) => {
    let caught: unknown;
    try {
      new UtteranceSegmenter(options);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).field).toBe(field);
  });
});
