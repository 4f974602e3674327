/**
 * Transcripts: the segments a transcription, dubbing or story result carries (`start`, `end`,
 * `text`, `speaker`, and with word-level timestamps `words`), read tolerantly, and rendered as
 * SubRip (SRT), WebVTT or plain text. Pure functions, shared by the client and the emulator.
 *
 * Times: the service's documentation shows milliseconds (`"end": 5000` for a sentence) while
 * its SDK only says "number". `parseTranscript` reads `timeUnit: 'auto'` (the default) as
 * seconds when any time has a fraction and as milliseconds otherwise; `'ms'` or `'s'` forces
 * one. The library's segments always carry milliseconds.
 */
import { ProtocolError, ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';
import type { TranscriptFormat } from './schemas.js';
import { isPlainObject } from './wire.js';

export interface TranscriptWord {
  word: string;
  startMs: number;
  endMs: number;
  /** 0 to 1, when the service gives it. */
  confidence: number | undefined;
}

export interface TranscriptSegment {
  startMs: number;
  endMs: number;
  text: string;
  /** The speaker's label, when the service gives one. */
  speaker: string | undefined;
  /** Word timings (`word_level_timestamps`), when the service gives them. */
  words: TranscriptWord[] | undefined;
}

export type TimeUnit = 'ms' | 's' | 'auto';

export interface ParseTranscriptOptions {
  /** Unit of the answer's times. Default `auto` (see the module doc). */
  timeUnit?: TimeUnit;
}

function numberOf(value: unknown): number | undefined {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) ? n : undefined;
}

/** The segment list of an answer: a list, or `{transcript: [...]}` (also `segments`). */
function segmentList(raw: unknown): unknown[] {
  if (Array.isArray(raw)) return raw;
  if (isPlainObject(raw)) {
    for (const field of ['transcript', 'segments', 'data']) {
      const value = raw[field];
      if (Array.isArray(value)) return value;
    }
  }
  throw new ProtocolError('The transcript answer has no list of segments (transcript, segments).');
}

/** Whether the times of `items` (and their words) are seconds, by `unit` or by their look. */
function inSeconds(items: unknown[], unit: TimeUnit): boolean {
  if (unit !== 'auto') return unit === 's';
  for (const item of items) {
    if (!isPlainObject(item)) continue;
    const times = [item.start, item.end];
    if (Array.isArray(item.words)) for (const w of item.words) if (isPlainObject(w)) times.push(w.start, w.end);
    if (times.some((t) => numberOf(t) !== undefined && !Number.isInteger(numberOf(t)))) return true;
  }
  return false;
}

/** Reads a transcript answer into segments with millisecond times; entries without times or text are skipped. */
export function parseTranscript(raw: unknown, options: ParseTranscriptOptions = {}): TranscriptSegment[] {
  const items = segmentList(raw);
  const scale = inSeconds(items, options.timeUnit ?? 'auto') ? 1000 : 1;
  const ms = (value: unknown): number | undefined => {
    const n = numberOf(value);
    return n === undefined ? undefined : Math.round(n * scale);
  };
  const segments: TranscriptSegment[] = [];
  for (const item of items) {
    if (!isPlainObject(item)) continue;
    const startMs = ms(item.start);
    const endMs = ms(item.end);
    const text = typeof item.text === 'string' ? item.text : undefined;
    if (startMs === undefined || endMs === undefined || text === undefined) continue;
    let words: TranscriptWord[] | undefined;
    if (Array.isArray(item.words)) {
      words = [];
      for (const w of item.words) {
        if (!isPlainObject(w)) continue;
        const word = typeof w.word === 'string' ? w.word : typeof w.text === 'string' ? w.text : undefined;
        const start = ms(w.start);
        const end = ms(w.end);
        if (word === undefined || start === undefined || end === undefined) continue;
        words.push({ word, startMs: start, endMs: end, confidence: numberOf(w.confidence) });
      }
    }
    segments.push({
      startMs,
      endMs: Math.max(startMs, endMs),
      text,
      speaker: typeof item.speaker === 'string' && item.speaker !== '' ? item.speaker : undefined,
      words,
    });
  }
  return segments;
}

/* ----------------------------------------------------------------------------------------- */
/* Rendering                                                                                 */

export interface RenderOptions {
  /** Put each segment's speaker before its text (`Speaker 1: ...`; WebVTT: a `<v>` tag). Default false. */
  speakers?: boolean;
  /** Plain text only: put `[start --> end]` before each line. Default false. */
  timestamps?: boolean;
}

/** `HH:MM:SS,mmm` (SRT) or `HH:MM:SS.mmm` (WebVTT, plain text). */
export function formatTimestamp(ms: number, separator: ',' | '.'): string {
  const total = Math.max(0, Math.round(ms));
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const seconds = Math.floor((total % 60_000) / 1000);
  const millis = total % 1000;
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(hours)}:${two(minutes)}:${two(seconds)}${separator}${String(millis).padStart(3, '0')}`;
}

/** A cue's text on one line: line breaks and runs of blanks become one space (a blank line would end the cue). */
function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function escapeVtt(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Renders segments as SRT, WebVTT or plain text. Segments without text are left out. */
export function renderTranscript(segments: readonly TranscriptSegment[], format: TranscriptFormat, options: RenderOptions = {}): string {
  const cues = segments.filter((s) => oneLine(s.text) !== '');
  const label = (s: TranscriptSegment): string => (options.speakers && s.speaker ? `${oneLine(s.speaker)}: ` : '');
  switch (format) {
    case 'srt':
      return cues
        .map((s, i) => `${i + 1}\n${formatTimestamp(s.startMs, ',')} --> ${formatTimestamp(s.endMs, ',')}\n${label(s)}${oneLine(s.text)}\n`)
        .join('\n');
    case 'vtt': {
      const body = cues.map((s) => {
        const text = escapeVtt(oneLine(s.text));
        const voiced = options.speakers && s.speaker ? `<v ${escapeVtt(oneLine(s.speaker))}>${text}` : text;
        return `${formatTimestamp(s.startMs, '.')} --> ${formatTimestamp(s.endMs, '.')}\n${voiced}\n`;
      });
      return ['WEBVTT\n', ...body].join('\n');
    }
    case 'txt':
      return cues
        .map((s) => {
          const time = options.timestamps ? `[${formatTimestamp(s.startMs, '.')} --> ${formatTimestamp(s.endMs, '.')}] ` : '';
          return `${time}${label(s)}${oneLine(s.text)}\n`;
        })
        .join('');
    default:
      throw new ValidationError('format', "'srt', 'vtt' or 'txt'", describeReceived(format));
  }
}
