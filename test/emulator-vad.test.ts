import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import {
  DEFAULT_MAX_UTTERANCE_MS,
  DEFAULT_VAD_FRAME_MS,
  DEFAULT_VAD_SILENCE_MS,
  DEFAULT_VAD_THRESHOLD_DBFS,
  UtteranceSegmenter,
  type SegmentedUtterance,
  type UtteranceSegmenterOptions,
} from '../lib/emulator/vad.js';
import {
  DEFAULT_VAD_SILENCE_MS as CLIENT_SILENCE_MS,
  DEFAULT_VAD_THRESHOLD_DBFS as CLIENT_THRESHOLD_DBFS,
  SpeechSegmentCounter,
  VAD_FRAME_MS as CLIENT_FRAME_MS,
} from '../lib/audio/vad.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';

/** Bytes per millisecond of PCM16 mono 24 kHz. */
const MS = 48;
/** Bytes of one default frame (30 ms). */
const FRAME = 30 * MS;

/** A 440 Hz tone whose peak is `dbfs` relative to full scale. */
function tone(ms: number, dbfs = -12): Buffer {
  const samples = ms * 24;
  const amplitude = 32767 * 10 ** (dbfs / 20);
  const out = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return out;
}

/** A square wave of amplitude `level`: its RMS is exactly `level`. */
function square(ms: number, level: number): Buffer {
  const out = Buffer.alloc(ms * MS);
  for (let i = 0; i < ms * 24; i++) out.writeInt16LE(i % 2 === 0 ? level : -level, i * 2);
  return out;
}

function zeros(ms: number): Buffer {
  return Buffer.alloc(ms * MS);
}

/** Feeds `input` in pieces of `piece` bytes and collects everything handed out. */
function run(segmenter: UtteranceSegmenter, input: Buffer, piece = 4800): SegmentedUtterance[] {
  const out: SegmentedUtterance[] = [];
  for (let at = 0; at < input.length; at += piece) out.push(...segmenter.push(input.subarray(at, at + piece)));
  return out;
}

/** [index, voiced start, voiced end, audio start, audio end], in ms. */
function summary(u: SegmentedUtterance): [number, number, number, number, number] {
  return [u.index, u.voicedStart / MS, u.voicedEnd / MS, u.audioStart / MS, u.audioEnd / MS];
}

/** Voiced regions in ms. */
function regions(utterances: SegmentedUtterance[]): Array<[number, number]> {
  return utterances.map((u) => [u.voicedStart / MS, u.voicedEnd / MS]);
}

/** The padding these cases were written for (the default is none). */
const PAD_300 = { paddingMs: 300 };

describe('UtteranceSegmenter: its own defaults, none of them the client’s', () => {
  it('30 ms frames, -45 dBFS, 900 ms of silence, 15 s at most', () => {
    expect([DEFAULT_VAD_FRAME_MS, DEFAULT_VAD_THRESHOLD_DBFS, DEFAULT_VAD_SILENCE_MS, DEFAULT_MAX_UTTERANCE_MS]).toEqual([30, -45, 900, 15_000]);
    expect(DEFAULT_VAD_FRAME_MS).not.toBe(CLIENT_FRAME_MS);
    expect(DEFAULT_VAD_THRESHOLD_DBFS).not.toBe(CLIENT_THRESHOLD_DBFS);
    expect(DEFAULT_VAD_SILENCE_MS).not.toBe(CLIENT_SILENCE_MS);
    expect(new UtteranceSegmenter().frameBytes).toBe(720 * 2);
  });
});

describe('UtteranceSegmenter on the recordings', () => {
  const fixture = loadSpeechFixture();

  it.each([[1440], [960], [4801], [fixture.pcm.length]])(
    'finds the speech fixture’s regions as the fixture measured them for the emulator (pieces of %d bytes), not where the client does',
    (piece) => {
      const segmenter = new UtteranceSegmenter();
      const got = [...run(segmenter, fixture.pcm, piece), ...segmenter.end()];
      expect(got.map((u) => [u.voicedStart / 2, u.voicedEnd / 2])).toEqual(fixture.utterances.map((u) => [u.emulator.startSample, u.emulator.endSample]));
      expect(got.map((u) => [u.voicedStart / 2, u.voicedEnd / 2])).not.toEqual(fixture.utterances.map((u) => [u.startSample, u.endSample]));
      expect(Buffer.concat(got.map((u) => u.audio)).equals(expectedTranslation(fixture.pcm, fixture.utterances))).toBe(true);
    },
  );

  it('hears the demo sample’s two sentences, 0.8 s apart, as one utterance where the client counts two', () => {
    const pcm = readFileSync(new URL('../examples/assets/sample-en.wav', import.meta.url)).subarray(44);
    const segmenter = new UtteranceSegmenter();
    const got = [...segmenter.push(pcm), ...segmenter.end()];
    expect(got.map((u) => [u.voicedStart / 2, u.voicedEnd / 2])).toEqual([[7200, 143_280]]);
    const client = new SpeechSegmentCounter();
    client.push(pcm);
    expect(client.segments).toBe(2);
  });
});

describe('UtteranceSegmenter: frame grid', () => {
  it.each([
    ['on the grid', 0, 300, [0, 300]],
    ['starting inside a frame', 100, 500, [90, 600]],
    ['ending 10 ms into a frame', 100, 510, [90, 630]],
    ['shorter than a frame, across two', 15, 30, [0, 60]],
    ['one frame, the shortest utterance', 60, 30, [60, 90]],
    ['a 10 ms click inside one frame', 65, 10, [60, 90]],
  ])('a tone %s (at %d ms, %d ms long) is voiced on whole 30 ms frames', (_name, at, length, expected) => {
    const input = Buffer.concat([zeros(at), tone(length), zeros(1200)]);
    expect(regions(run(new UtteranceSegmenter(), input))).toEqual([expected]);
  });

  it.each([[20], [40], [1]])('frameMs %d moves the grid', (frameMs) => {
    const input = Buffer.concat([zeros(100), tone(500), zeros(1200)]);
    const [u] = run(new UtteranceSegmenter({ frameMs }), input);
    expect([u!.voicedStart / MS, u!.voicedEnd / MS]).toEqual([Math.floor(100 / frameMs) * frameMs, Math.ceil(600 / frameMs) * frameMs]);
  });

  it('gives the same result whatever the chunking, odd byte counts included', () => {
    const input = Buffer.concat([zeros(250), tone(730), zeros(1000), tone(510), zeros(950)]);
    const reference = run(new UtteranceSegmenter(), input, input.length);
    expect(reference).toHaveLength(2);
    for (const piece of [1, 7, 1439, 1441, 4801]) {
      const got = run(new UtteranceSegmenter(), input, piece);
      expect(got.map(summary)).toEqual(reference.map(summary));
      expect(got.map((u) => u.audio.toString('hex'))).toEqual(reference.map((u) => u.audio.toString('hex')));
    }
  });
});

describe('UtteranceSegmenter: threshold', () => {
  // -45 dBFS is an RMS of 32768 * 10^(-45/20) = 184.27; -40 dBFS, 327.68.
  it.each([
    ['an RMS of 185 at the default -45 dBFS', {}, 185, true],
    ['an RMS of 184 at the default -45 dBFS', {}, 184, false],
    ['an RMS of 300 (quiet for a -40 dBFS gate) at the default', {}, 300, true],
    ['an RMS of 328 at -40 dBFS', { thresholdDbfs: -40 }, 328, true],
    ['an RMS of 327 at -40 dBFS', { thresholdDbfs: -40 }, 327, false],
    ['an RMS of 1 at -95 dBFS', { thresholdDbfs: -95 }, 1, true],
    ['an RMS of 1 at -90 dBFS (1.04)', { thresholdDbfs: -90 }, 1, false],
    ['full scale at 0 dBFS', { thresholdDbfs: 0 }, 32767, false],
  ] as Array<[string, UtteranceSegmenterOptions, number, boolean]>)('%s: voiced %s', (_name, options, level, voiced) => {
    const input = Buffer.concat([zeros(300), square(600, level), zeros(1200)]);
    expect(regions(run(new UtteranceSegmenter(options), input))).toEqual(voiced ? [[300, 900]] : []);
  });

  it('a -40 dBFS tone (RMS -43 dBFS), silence to the client’s gate, is voice to the emulator', () => {
    const input = Buffer.concat([zeros(300), tone(600, -40), zeros(1200)]);
    expect(regions(run(new UtteranceSegmenter(), input))).toEqual([[300, 900]]);
    expect(run(new UtteranceSegmenter({ thresholdDbfs: -40 }), input)).toEqual([]);
  });
});

describe('UtteranceSegmenter: hangover', () => {
  it.each([
    ['870 ms: under the default 900', {}, 870, [[0, 1470]], 1470 + 900],
    [
      '900 ms: the default ends the first',
      {},
      900,
      [
        [0, 300],
        [1200, 1500],
      ],
      1200,
    ],
    ['600 ms (the client’s silence) keeps one utterance', {}, 600, [[0, 1200]], 1200 + 900],
    ['570 ms with silenceMs 600', { silenceMs: 600 }, 570, [[0, 1170]], 1170 + 600],
    [
      '600 ms with silenceMs 600',
      { silenceMs: 600 },
      600,
      [
        [0, 300],
        [900, 1200],
      ],
      900,
    ],
    ['600 ms with silenceMs 610, rounded up to 630 ms of frames', { silenceMs: 610 }, 600, [[0, 1200]], 1200 + 630],
    [
      '630 ms with silenceMs 610',
      { silenceMs: 610 },
      630,
      [
        [0, 300],
        [930, 1230],
      ],
      930,
    ],
  ] as Array<[string, UtteranceSegmenterOptions, number, Array<[number, number]>, number]>)('a gap of %s', (_name, options, gap, expected, firstEndedAt) => {
    const input = Buffer.concat([tone(300), zeros(gap), tone(300), zeros(2000)]);
    const got = run(new UtteranceSegmenter(options), input);
    expect(regions(got)).toEqual(expected);
    expect(got[0]!.endedAt / MS).toBe(firstEndedAt);
  });

  it('pads 300 ms each side, never into the previous utterance, never past what was heard', () => {
    const input = Buffer.concat([zeros(120), tone(420), zeros(390), tone(390), zeros(600)]);
    const got = run(new UtteranceSegmenter({ ...PAD_300, silenceMs: 300 }), input);
    expect(got.map(summary)).toEqual([
      [1, 120, 540, 0, 840],
      [2, 930, 1320, 840, 1620],
    ]);
    for (const u of got) expect(u.audio.equals(input.subarray(u.audioStart, u.audioEnd))).toBe(true);
  });

  it('honours paddingMs', () => {
    const input = Buffer.concat([zeros(390), tone(600), zeros(1200)]);
    expect(run(new UtteranceSegmenter({ paddingMs: 0 }), input).map(summary)).toEqual([[1, 390, 990, 390, 990]]);
    expect(run(new UtteranceSegmenter({ paddingMs: 100 }), input).map(summary)).toEqual([[1, 390, 990, 290, 1090]]);
  });
});

describe('UtteranceSegmenter: length', () => {
  it.each([
    [
      'the default 15 s',
      {},
      16_500,
      [
        [0, 15_000],
        [15_000, 16_500],
      ],
    ],
    [
      '600 ms',
      { maxUtteranceMs: 600 },
      1500,
      [
        [0, 600],
        [600, 1200],
        [1200, 1500],
      ],
    ],
    [
      '610 ms, rounded up to 630 ms of frames',
      { maxUtteranceMs: 610 },
      1500,
      [
        [0, 630],
        [630, 1260],
        [1260, 1500],
      ],
    ],
  ] as Array<[string, UtteranceSegmenterOptions, number, Array<[number, number]>]>)(
    'endless speech is ended at %s, without gaps or overlaps',
    (_name, options, length, expected) => {
      const input = Buffer.concat([tone(length), zeros(1200)]);
      const got = run(new UtteranceSegmenter({ ...PAD_300, ...options }), input);
      expect(regions(got)).toEqual(expected);
      expect(Buffer.concat(got.map((u) => u.audio)).equals(input.subarray(0, (length + 300) * MS))).toBe(true);
    },
  );

  it('counts the shortest utterance, one voiced frame, as 0.03 s', () => {
    const [u] = run(new UtteranceSegmenter(), Buffer.concat([zeros(90), tone(30), zeros(1200)]));
    expect(u!.durationSeconds).toBe(0.03);
  });
});

describe('UtteranceSegmenter: end() (the audio stopped arriving)', () => {
  it('ends the utterance in progress at once, with the silence heard as its padding', () => {
    const segmenter = new UtteranceSegmenter(PAD_300);
    const input = Buffer.concat([zeros(60), tone(300), zeros(150)]);
    expect(segmenter.push(input)).toEqual([]);
    expect(segmenter.speaking).toBe(true);
    const ended = segmenter.end();
    expect(ended.map(summary)).toEqual([[1, 60, 360, 0, 510]]);
    expect(ended[0]!.endedAt).toBe(510 * MS);
    expect(ended[0]!.audio.equals(input)).toBe(true);
    expect(segmenter.speaking).toBe(false);
    expect(segmenter.end()).toEqual([]);
  });

  it('hands out nothing when nobody speaks', () => {
    const segmenter = new UtteranceSegmenter();
    expect(segmenter.push(zeros(2000))).toEqual([]);
    expect(segmenter.end()).toEqual([]);
  });

  it('analyses whole frames only: a frame still incomplete waits, and the next utterance starts on the grid', () => {
    const segmenter = new UtteranceSegmenter();
    // 300 ms of tone, then 10 ms of the next frame: not analysed yet.
    segmenter.push(Buffer.concat([tone(300), tone(10)]));
    expect(regions(segmenter.end())).toEqual([[0, 300]]);
    expect(segmenter.push(Buffer.concat([tone(20), tone(300), zeros(1200)])).map(summary)).toEqual([[2, 300, 630, 300, 630]]);
  });
});

describe('UtteranceSegmenter: split', () => {
  it.each([
    [
      'a long utterance: its first part at 720 ms (700 rounded up to frames), the rest when it ends',
      1500,
      [
        ['first', 0, 720],
        ['rest', 720, 1500],
      ],
    ],
    ['an utterance shorter than splitMs: whole', 690, [['whole', 0, 690]]],
    ['an utterance whose last voiced frame reaches splitMs: the first part only', 720, [['first', 0, 720]]],
  ] as Array<[string, number, Array<[string, number, number]>]>)('%s', (_name, length, expected) => {
    const input = Buffer.concat([tone(length), zeros(1200)]);
    const got = run(new UtteranceSegmenter({ splitMs: 700 }), input);
    expect(got.map((u) => [u.part, u.voicedStart / MS, u.voicedEnd / MS])).toEqual(expected);
    expect(new Set(got.map((u) => u.index))).toEqual(new Set([1]));
    expect(Buffer.concat(got.map((u) => u.audio)).equals(input.subarray(0, length * MS))).toBe(true);
  });

  it('hands the first part out while the speech goes on, and the rest at end()', () => {
    const segmenter = new UtteranceSegmenter({ ...PAD_300, splitMs: 300 });
    const input = Buffer.concat([zeros(300), tone(600)]);
    const first = segmenter.push(input);
    expect(first.map((u) => [u.part, ...summary(u)])).toEqual([['first', 1, 300, 600, 0, 600]]);
    expect(segmenter.speaking).toBe(true);
    const rest = segmenter.end();
    expect(rest.map((u) => [u.part, ...summary(u)])).toEqual([['rest', 1, 600, 900, 600, 900]]);
    expect(Buffer.concat([first[0]!.audio, rest[0]!.audio]).equals(input)).toBe(true);
  });

  it('splits each utterance once, and numbers the next one on', () => {
    const input = Buffer.concat([tone(2400), zeros(900), tone(900), zeros(1200)]);
    const got = run(new UtteranceSegmenter({ splitMs: 600 }), input);
    expect(got.map((u) => [u.index, u.part, u.voicedStart / MS, u.voicedEnd / MS])).toEqual([
      [1, 'first', 0, 600],
      [1, 'rest', 600, 2400],
      [2, 'first', 3300, 3900],
      [2, 'rest', 3900, 4200],
    ]);
  });
});

describe('UtteranceSegmenter: memory and dropping', () => {
  it('keeps bounded memory through long silence and endless speech', () => {
    const segmenter = new UtteranceSegmenter({ maxUtteranceMs: 990 });
    let peak = 0;
    const silence = zeros(90);
    for (let i = 0; i < 600; i++) {
      segmenter.push(silence);
      peak = Math.max(peak, segmenter.retainedBytes);
    }
    expect(peak).toBeLessThanOrEqual(FRAME + silence.length);
    const speech = tone(90);
    let count = 0;
    for (let i = 0; i < 660; i++) {
      count += segmenter.push(speech).length;
      peak = Math.max(peak, segmenter.retainedBytes);
    }
    expect(count).toBe(60);
    expect(peak).toBeLessThanOrEqual(990 * MS + speech.length + FRAME);
  });

  it('drops the utterance in progress on request', () => {
    const segmenter = new UtteranceSegmenter();
    expect(segmenter.push(Buffer.concat([zeros(90), tone(510)]))).toEqual([]);
    expect(segmenter.speaking).toBe(true);
    segmenter.dropCurrent();
    expect(segmenter.push(zeros(1200))).toEqual([]);
    expect(segmenter.end()).toEqual([]);
    expect(segmenter.speaking).toBe(false);
  });

  it.each([
    ['paddingMs', { paddingMs: 301 }],
    ['silenceMs', { silenceMs: 0 }],
    ['maxUtteranceMs', { maxUtteranceMs: -1 }],
    ['thresholdDbfs', { thresholdDbfs: 3 }],
    ['frameMs', { frameMs: 2.5 }],
    ['frameMs', { frameMs: 0 }],
    ['splitMs', { splitMs: Number.NaN }],
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
