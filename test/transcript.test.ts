/**
 * Transcripts without sockets: reading the service's segment shapes (milliseconds or seconds,
 * with or without words) and rendering SRT, WebVTT and plain text exactly.
 */
import { describe, expect, it } from 'vitest';
import { ProtocolError, ValidationError } from '../lib/errors.js';
import { formatTimestamp, parseTranscript, renderTranscript, type TranscriptSegment } from '../lib/http/transcript.js';

const segments: TranscriptSegment[] = [
  { startMs: 320, endMs: 2620, text: 'Hello, this is a test.', speaker: 'SPEAKER_0', words: undefined },
  { startMs: 3_723_004, endMs: 3_725_000, text: 'Late <b>&</b>\nline', speaker: 'Ana', words: undefined },
  { startMs: 4_000_000, endMs: 4_000_500, text: '   ', speaker: undefined, words: undefined },
];

describe('parseTranscript', () => {
  it('reads {transcript: [...]} and a bare list; integers are milliseconds', () => {
    const list = [{ start: 0, end: 5000, text: 'Hello, this is a sample transcript.', speaker: 'Speaker 1' }];
    expect(parseTranscript({ transcript: list })).toEqual([
      { startMs: 0, endMs: 5000, text: 'Hello, this is a sample transcript.', speaker: 'Speaker 1', words: undefined },
    ]);
    expect(parseTranscript(list)).toEqual(parseTranscript({ transcript: list }));
  });

  it('times with a fraction are seconds (auto), words included; timeUnit forces either', () => {
    const raw = {
      transcript: [
        {
          start: 0.32,
          end: 2.62,
          text: 'Hi there',
          speaker: 'S',
          words: [
            { word: 'Hi', start: 0.32, end: 1, confidence: 0.97 },
            { text: 'there', start: 1, end: 2.62 },
          ],
        },
      ],
    };
    expect(parseTranscript(raw)).toEqual([
      {
        startMs: 320,
        endMs: 2620,
        text: 'Hi there',
        speaker: 'S',
        words: [
          { word: 'Hi', startMs: 320, endMs: 1000, confidence: 0.97 },
          { word: 'there', startMs: 1000, endMs: 2620, confidence: undefined },
        ],
      },
    ]);
    expect(parseTranscript({ transcript: [{ start: 1, end: 2, text: 'x' }] }, { timeUnit: 's' })[0]).toMatchObject({ startMs: 1000, endMs: 2000 });
    expect(parseTranscript({ transcript: [{ start: 1.5, end: 2.5, text: 'x' }] }, { timeUnit: 'ms' })[0]).toMatchObject({ startMs: 2, endMs: 3 });
  });

  it('skips entries without times or text, keeps end >= start, reads numeric strings', () => {
    const parsed = parseTranscript([{ start: 5, text: 'no end' }, 'junk', { start: '10', end: '4', text: 'backwards' }, { start: 1, end: 2 }]);
    expect(parsed).toEqual([{ startMs: 10, endMs: 10, text: 'backwards', speaker: undefined, words: undefined }]);
  });

  it('an answer with no segment list is a ProtocolError', () => {
    expect(() => parseTranscript({ texts: [] })).toThrow(ProtocolError);
  });
});

describe('renderTranscript', () => {
  it('SubRip: numbered cues, comma milliseconds, hours, one line per cue, empty cues left out', () => {
    expect(renderTranscript(segments, 'srt')).toBe(
      '1\n00:00:00,320 --> 00:00:02,620\nHello, this is a test.\n\n' + '2\n01:02:03,004 --> 01:02:05,000\nLate <b>&</b> line\n',
    );
  });

  it('WebVTT: header, dot milliseconds, markup escaped, speakers as voice tags', () => {
    expect(renderTranscript(segments, 'vtt', { speakers: true })).toBe(
      'WEBVTT\n\n' +
        '00:00:00.320 --> 00:00:02.620\n<v SPEAKER_0>Hello, this is a test.\n\n' +
        '01:02:03.004 --> 01:02:05.000\n<v Ana>Late &lt;b&gt;&amp;&lt;/b&gt; line\n',
    );
  });

  it('plain text: a line per segment, with speakers and timestamps on request', () => {
    expect(renderTranscript(segments, 'txt')).toBe('Hello, this is a test.\nLate <b>&</b> line\n');
    expect(renderTranscript(segments, 'txt', { speakers: true, timestamps: true })).toBe(
      '[00:00:00.320 --> 00:00:02.620] SPEAKER_0: Hello, this is a test.\n[01:02:03.004 --> 01:02:05.000] Ana: Late <b>&</b> line\n',
    );
  });

  it('timestamps round and never go below zero', () => {
    expect(formatTimestamp(-5, ',')).toBe('00:00:00,000');
    expect(formatTimestamp(59_999.6, '.')).toBe('00:01:00.000');
    expect(formatTimestamp(100 * 3_600_000, ',')).toBe('100:00:00,000');
  });

  it('an unknown format is a ValidationError naming the formats', () => {
    expect(() => renderTranscript(segments, 'ass' as 'srt')).toThrow(ValidationError);
    expect(() => renderTranscript(segments, 'ass' as 'srt')).toThrow(`Invalid format: expected 'srt', 'vtt' or 'txt' (got "ass").`);
  });
});
