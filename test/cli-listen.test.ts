/**
 * `rt-translate listen`, in process against the embedded emulator: a line per sentence (or
 * JSON), any input the realtime command reads, an event log, and usage errors naming the flag.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromServiceFormat } from '../lib/audio/convert.js';
import { runInProcess } from './helpers/cli.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { runChunked } from './helpers/streams.js';

const fixture = loadSpeechFixture();
const FIXTURE_PATH = new URL('./fixtures/speech-en-24k.wav', import.meta.url).pathname;
/** The emulator knows the fixture's sentences: what `listen` prints for it. */
const LINES = ['[0.32-2.62] Hello, this is a test of live translation.', '[3.82-5.04] The weather is nice today.', '[6.26-7.34] Thank you for listening.'];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-listen-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const lines = (text: string): string[] => text.split('\n').filter((line) => line !== '');

describe.concurrent('rt-translate listen', () => {
  it('prints one line per sentence with its times; says it used the embedded emulator', async () => {
    const result = await runInProcess(['listen', '-i', FIXTURE_PATH]);
    expect(result.code).toBe(0);
    expect(lines(result.stdout.toString())).toEqual(LINES);
    expect(result.stderr).toMatch(/^rt-translate: using the embedded emulator: set RT_TRANSLATE_BASE_URL \/ RT_TRANSLATE_REALTIME_URL for the service$/m);
  });

  it('--json: one object per final result with word timings; --interim adds the interim results on stderr', async () => {
    const result = await runInProcess(['listen', '--json', '--interim'], { stdin: fixture.wav });
    expect(result.code).toBe(0);
    const results = lines(result.stdout.toString()).map(
      (line) => JSON.parse(line) as { start: number; end: number; transcript: string; words: Array<{ start: number; end: number }> },
    );
    expect(results.map((r) => r.transcript)).toEqual(LINES.map((l) => l.replace(/^\[[^\]]+\] /, '')));
    for (const r of results) {
      expect(r.words[0]!.start).toBeCloseTo(r.start, 2);
      expect(r.words.at(-1)!.end).toBeCloseTo(r.end, 2);
    }
    expect(lines(result.stderr).filter((l) => l.startsWith('(interim) '))).toHaveLength(3);
  });

  it("reads a phone call's raw mu-law at 8 kHz (-f mulaw)", async () => {
    const mulaw = await runChunked(fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), fixture.pcm, 65_536);
    const result = await runInProcess(['listen', '-f', 'mulaw'], { stdin: mulaw });
    expect(result.code).toBe(0);
    // Through mu-law the emulator no longer recognises the recording: placeholder text, the same times.
    const got = lines(result.stdout.toString()).map((l) => /^\[(\d+\.\d\d)-(\d+\.\d\d)\] (.*)$/.exec(l)!);
    expect(got.map((m) => m[3])).toEqual(['Speech segment 1.', 'Speech segment 2.', 'Speech segment 3.']);
    got.forEach((m, i) => {
      expect(Number(m[1])).toBeCloseTo(fixture.utterances[i]!.startSample / 24_000, 1);
      expect(Number(m[2])).toBeCloseTo(fixture.utterances[i]!.endSample / 24_000, 1);
    });
  });

  it('--events writes every event, finals and the end, as JSON lines; -o writes the transcript to a file', async () => {
    const events = join(dir, 'events.jsonl');
    const out = join(dir, 'transcript.txt');
    const result = await runInProcess(['listen', '-i', FIXTURE_PATH, '--events', events, '-o', out]);
    expect(result.code).toBe(0);
    expect(lines(await readFile(out, 'utf8'))).toEqual(LINES);
    const log = lines(await readFile(events, 'utf8')).map((line) => JSON.parse(line) as { type: string });
    expect(log[0]!.type).toBe('ready');
    expect(log.filter((e) => e.type === 'final')).toHaveLength(3);
    expect(log.at(-1)).toEqual({ type: 'ended', complete: true, unansweredSpeechMs: 0 });
  });

  it.each([
    [['--language', '!!'], /^rt-translate: Invalid --language: expected a locale tag/m],
    [['--bogus'], /--help/],
    [['--events', '-'], /--events - and the transcript would both go to standard output/],
  ])('%s is a usage error (exit 2) before any connection', async (args, message) => {
    const result = await runInProcess(['listen', '-i', FIXTURE_PATH, ...args]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stdout.length).toBe(0);
  });

  it('--help describes the command', async () => {
    const result = await runInProcess(['listen', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout.toString()).toMatch(/^Usage: rt-translate listen \[options\]/);
  });
});
