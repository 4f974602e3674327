/**
 * The realtime command (`rt-translate --from .. --to ..`) and `rt-translate emulator`, run in
 * this process with injected standard streams, signals and environment: audio bytes in and out,
 * stderr lines, the events file and exit statuses, against the embedded emulator, the emulator
 * command and servers on loopback. What only a real process shows is in cli-smoke.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { once } from 'node:events';
import { WebSocket } from 'ws';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { runSession } from './helpers/realtime-session.js';
import { fitToWidth, progressText, summaryText, type SessionPhase, type SessionProgress } from '../bin/status-line.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { REALTIME_LANGUAGES } from '../lib/realtime/languages.js';
import { answerVariants, answersIn, emulatorUtterances, expectedTranslation, loadSpeechFixture, type FixtureUtterance } from './helpers/speech.js';
import {
  permanentLines,
  runInProcess,
  runSpoken,
  startConnectionCounter,
  startInProcess,
  startInProcessEmulator,
  statusTexts,
  type CliResult,
  type ConnectionCounter,
} from './helpers/cli.js';

/** A key distinctive enough that finding it anywhere in the output means it leaked. */
const KEY = 'sk-cli-test-5f1c2a9e77d04b1c';
const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
const firstUtteranceOnly = expectedTranslation(fixture.pcm, fixture.utterances.slice(0, 1));
/**
 * After a drop, the new session counts its frames from the replay's start, so the answers it
 * gives may move by up to a frame (`answerVariants`): each answer once, in order, the first as
 * the unbroken stream's.
 */
const VARIANTS = answerVariants(fixture.pcm);
const EVERY_ANSWER_ONCE = [0, expect.any(Number), expect.any(Number)];
const packageVersion = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let dir: string;
const servers: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-cli-'));
});

afterAll(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await rm(dir, { recursive: true, force: true });
});

function path(name: string): string {
  return join(dir, name);
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** The emulator's placeholder duration of an utterance: its voiced region (by the emulator's measurement), in seconds. */
function duration({ emulator: u }: FixtureUtterance): string {
  return ((u.endSample - u.startSample) / 24_000).toFixed(2);
}

/** The transcript and translation lines the command prints for the fixture's utterances. */
function textLines(from: string, to: string, utterances = fixture.utterances): string[] {
  return utterances.flatMap((u, i) => [
    `transcript (${from}): [${from} utterance ${i + 1}, ${duration(u)} s]`,
    `translation (${to}): [${to} translation of utterance ${i + 1}, ${duration(u)} s]`,
  ]);
}

/** The command's last line on stderr after a session: what was sent and received. */
function summary(sent: Buffer, received: number | 'text', responses: number): string {
  const plural = responses === 1 ? 'response' : 'responses';
  const sentText = `sent ${(sent.length / 48_000).toFixed(1)} s of audio`;
  return received === 'text'
    ? `rt-translate: ${sentText}, ${responses} ${plural} (text only).`
    : `rt-translate: ${sentText}, received ${(received / 48_000).toFixed(1)} s in ${responses} ${plural}.`;
}

const EMBEDDED_NOTICE = /^rt-translate: using the embedded emulator: set RT_TRANSLATE_BASE_URL \/ RT_TRANSLATE_REALTIME_URL for the service$/;

/** Every line of an events file, parsed. */
async function readEvents(file: string): Promise<Array<Record<string, unknown>>> {
  const text = await readFile(file, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Every string anywhere in a JSON value. */
function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(strings);
  return [];
}

/** The key appears neither in stderr nor in the events file (when there is one). */
async function expectKeyNotLeaked(result: CliResult, eventsFile?: string): Promise<void> {
  expect(result.stderr).not.toContain(KEY);
  expect(result.stdout.includes(KEY)).toBe(false);
  if (eventsFile !== undefined) expect(await readFile(eventsFile, 'utf8')).not.toContain(KEY);
}

/** A port on 127.0.0.1 that nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A WAV header + data of the given format (format code 1: integer PCM). */
function wavFile(sampleRate: number, channels: number, bitDepth: number, data: Buffer, audioFormat = 1): Buffer {
  const header = Buffer.alloc(44);
  const blockAlign = (channels * bitDepth) / 8;
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8, 'latin1');
  header.write('fmt ', 12, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(audioFormat, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * blockAlign, 28);
  header.writeUInt16LE(blockAlign, 32);
  header.writeUInt16LE(bitDepth, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

describe.concurrent('rt-translate: inputs shorter than a container header', () => {
  /** A WAV header announcing no data at all (44 bytes). */
  const emptyWav = wavFile(24_000, 1, 16, Buffer.alloc(0));

  it.each([
    { name: '10 bytes of raw PCM', bytes: fixture.pcm.subarray(20_000, 20_010) },
    { name: '3 bytes', bytes: Buffer.from([1, 2, 3]) },
    { name: '63 bytes (one short of a full sniff)', bytes: fixture.pcm.subarray(0, 63) },
  ])('$name on stdin are translated as raw PCM (exit 0)', async ({ bytes }) => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '100'], { stdin: bytes });
    expect(result.stderr).not.toMatch(/unshift|error/i);
    expect(result.code).toBe(0);
    // Whatever the emulator heard in them comes back as whole samples.
    expect(result.stdout.length % 2).toBe(0);
  });

  it('a WAV header with no data, on stdin or as a file, is "no audio" (exit 2), with nothing written', async () => {
    const file = path('empty.wav');
    await writeFile(file, emptyWav);
    const [stdin, named] = await Promise.all([
      runInProcess(['--from', 'en-us', '--to', 'es-es'], { stdin: emptyWav }),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '-i', file]),
    ]);
    expect(stdin.code).toBe(2);
    expect(stdin.stderr).toBe('rt-translate: No audio in standard input. [RTT_INPUT]\n');
    expect(named.code).toBe(2);
    expect(named.stderr).toBe(`rt-translate: No audio in ${file}. [RTT_INPUT]\n`);
    expect(stdin.stdout.length + named.stdout.length).toBe(0);
  });

  it('a WAV cut inside its header is an input error naming WAV (exit 2)', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es'], { stdin: emptyWav.subarray(0, 20) });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^rt-translate: Cannot decode standard input as WAV: .+ \[RTT_INPUT\]\n$/);
    expect(result.stderr).not.toMatch(/unshift/);
  });
});

describe.concurrent('rt-translate: translation through the embedded emulator', () => {
  it('translates raw PCM from stdin to stdout, bit for bit, with the text on stderr', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'], { stdin: fixture.pcm });
    expect(result.stderr).not.toMatch(/error|warning/i);
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBe(expected.length);
    expect(result.stdout.equals(expected)).toBe(true);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(EMBEDDED_NOTICE);
    expect(stderr.slice(1)).toEqual([...textLines('en-us', 'es-es'), summary(fixture.pcm, expected.length, 3)]);
  });

  it('reads a WAV file (-i) and writes a WAV with exact header sizes (-o .wav), raw PCM otherwise', async () => {
    const wavIn = path('speech.wav');
    await writeFile(wavIn, fixture.wav);
    const common = ['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'];
    const [toWav, toPcm, wavOnStdin] = await Promise.all([
      runInProcess([...common, '-i', wavIn, '-o', path('out.wav')]),
      runInProcess([...common, '--input', wavIn, '--output', path('out.pcm')]),
      runInProcess(common, { stdin: fixture.wav }),
    ]);

    expect(toWav.code).toBe(0);
    expect(toWav.stdout.length).toBe(0);
    expect(lines(toWav.stderr).slice(1)).toEqual([...textLines('en-us', 'es-es'), summary(fixture.pcm, expected.length, 3)]);
    const wav = await readFile(path('out.wav'));
    expect(wav.length).toBe(44 + expected.length);
    expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
    expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
    expect(wav.toString('latin1', 8, 16)).toBe('WAVEfmt ');
    expect(wav.readUInt32LE(16)).toBe(16);
    expect(wav.readUInt16LE(20)).toBe(1); // integer PCM
    expect(wav.readUInt16LE(22)).toBe(1); // mono
    expect(wav.readUInt32LE(24)).toBe(24_000);
    expect(wav.readUInt32LE(28)).toBe(48_000);
    expect(wav.readUInt16LE(32)).toBe(2);
    expect(wav.readUInt16LE(34)).toBe(16);
    expect(wav.toString('latin1', 36, 40)).toBe('data');
    expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
    expect(wav.subarray(44).equals(expected)).toBe(true);

    expect(toPcm.code).toBe(0);
    expect(toPcm.stdout.length).toBe(0);
    const pcm = await readFile(path('out.pcm'));
    expect(pcm.length).toBe(expected.length);
    expect(pcm.equals(expected)).toBe(true);

    // A WAV on stdin is recognised by its RIFF header: its 44 header bytes are not audio.
    expect(wavOnStdin.code).toBe(0);
    expect(wavOnStdin.stdout.equals(expected)).toBe(true);
  });

  it('--events writes one JSON object per line, audio as decoded byte counts that add up to the output', async () => {
    const events = path('events.jsonl');
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--events', events], {
      stdin: fixture.pcm,
    });
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);

    const all = await readEvents(events);
    expect(all[0]!.type).toBe('session.created');
    expect((all[0]!.session as { id: unknown }).id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(all[1]!.type).toBe('session.updated');
    const count = (type: string) => all.filter((e) => e.type === type).length;
    expect(count('transcript.done')).toBe(3);
    expect(count('text.done')).toBe(3);
    expect(count('audio.done')).toBe(3);
    expect(count('response')).toBe(3);
    expect(all.filter((e) => e.type === 'audio.done').every((e) => e.wireType === 'response.audio.done')).toBe(true);
    expect(all.at(-1)).toMatchObject({ type: 'ended', complete: true });

    const deltas = all.filter((e) => e.type === 'audio.delta');
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.every((e) => e.wireType === 'response.audio.delta')).toBe(true);
    for (const delta of deltas) expect(typeof delta.bytes).toBe('number');
    expect(deltas.reduce((sum, e) => sum + (e.bytes as number), 0)).toBe(result.stdout.length);
    // No base64 audio anywhere: every string in the file is short.
    const longest = Math.max(...all.flatMap(strings).map((s) => s.length));
    expect(longest).toBeLessThanOrEqual(100);
  });

  it('a first Ctrl-C while the input is idle (an open, quiet pipe) stops reading at once; the session finishes, exit 0', async () => {
    const sent = fixture.pcm.subarray(0, 84_480 * 2); // the first utterance and the silence after it
    let seenTranslation: () => void = () => undefined;
    const translated = new Promise<void>((resolve) => (seenTranslation = resolve));
    const run = startInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'], {
      onStderr: (text) => {
        if (text.includes('translation (es-es)')) seenTranslation();
      },
    });
    // stdin stays open and quiet after this, as a paused producer's would.
    run.stdin.write(sent);
    await translated;
    run.signal('SIGINT');
    const result = await run.result;
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expectedTranslation(sent, fixture.utterances.slice(0, 1)))).toBe(true);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(EMBEDDED_NOTICE);
    // The first Ctrl-C is acknowledged at once; the translation of what was sent still comes.
    expect(stderr.slice(1)).toEqual([
      ...textLines('en-us', 'es-es', fixture.utterances.slice(0, 1)),
      'rt-translate: stopping: the input is closed; waiting for the translation of what was sent (Ctrl-C again to abort).',
      summary(sent, expectedTranslation(sent, fixture.utterances.slice(0, 1)).length, 1),
    ]);
  });

  it('--text-only writes no audio and prints the translations', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'de-de', '--text-only', '--quiet-ms', '500'], {
      stdin: fixture.pcm,
    });
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBe(0);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(EMBEDDED_NOTICE);
    expect(stderr.slice(1)).toEqual([...textLines('en-us', 'de-de'), summary(fixture.pcm, 'text', 3)]);
  });
});

describe.concurrent('--events, --stats and a network that drops', () => {
  /** A reader that takes each write a turn of the event loop later: slower than the session. */
  function slowReader() {
    const chunks: Buffer[] = [];
    const stream = new Writable({
      highWaterMark: 256,
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        setImmediate(callback);
      },
    });
    return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
  }

  it('--events - to a slow reader gets every event in order, the last one ended; the audio is all there', async () => {
    const reader = slowReader();
    const out = path('events-slow.pcm');
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--events', '-', '-o', out, '--stats'], {
      stdin: fixture.pcm,
      stdout: reader.stream,
    });
    expect(result.code).toBe(0);
    expect((await readFile(out)).equals(expected)).toBe(true);
    const events = lines(reader.text()).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(events[0]!.type).toBe('session.created');
    expect(events.filter((e) => e.type === 'response')).toHaveLength(3);
    expect(events.at(-2)).toMatchObject({ type: 'ended', complete: true });
    // --stats: the summary on stderr, and the same figures as the last line of the log.
    expect(events.at(-1)).toMatchObject({ type: 'stats', responses: 3, reconnects: 0, ending: { complete: true } });
    const stats = events.at(-1)! as { latency: { firstAudioMs: { count: number } } };
    expect(stats.latency.firstAudioMs.count).toBe(3);
    const outSeconds = (expected.length / 48_000).toFixed(1).replace('.', '\\.');
    expect(result.stderr).toMatch(new RegExp(`^rt-translate: 3 responses; 8\\.3 s of audio in, ${outSeconds} s of translated audio out$`, 'm'));
    expect(result.stderr).toMatch(
      /^rt-translate: latency from the end of a sentence: transcript p50 \d+\.\d\d s, p95 .*; first translated text (p50 .*|n\/a); first translated audio p50 .*; whole answer p50 \d+\.\d\d s, /m,
    );
  });

  it('an --events file that cannot be written (/dev/full): exit 1 naming the error, the translation still written', async () => {
    const out = path('events-full.pcm');
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--events', '/dev/full', '-o', out], { stdin: fixture.pcm });
    expect(result.code).toBe(1);
    expect(lines(result.stderr).at(-1)).toMatch(/ENOSPC/);
    expect((await readFile(out)).equals(expected)).toBe(true);
  });

  it('a service that drops after every answer: reconnects said on stderr, every answer written once', async () => {
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--drop-after-responses', '1']);
    servers.push({ close: async () => void (await emulator.stop()) });
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl, '--quiet-ms', '500', '--stats'], {
      stdin: fixture.pcm,
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
    expect(result.code).toBe(0);
    expect(answersIn(result.stdout, VARIANTS)).toEqual(EVERY_ANSWER_ONCE);
    const said = lines(result.stderr);
    expect(said.filter((l) => /^rt-translate: connection lost \(.*code 1006.*\); reconnecting in \d+\.\d s \(attempt 1\)$/.test(l))).toHaveLength(2);
    expect(said.filter((l) => /^rt-translate: reconnected after \d+\.\d s; sent \d+\.\d s of unanswered audio again$/.test(l))).toHaveLength(2);
    expect(said).toContainEqual(expect.stringMatching(/^rt-translate: 2 reconnects, \d+\.\d s without a session/));
  });

  it('--no-reconnect fails at the first drop: exit 1, the first answer written, what may be unprocessed said', async () => {
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--drop-after-responses', '1']);
    servers.push({ close: async () => void (await emulator.stop()) });
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl, '--no-reconnect'], {
      stdin: fixture.pcm,
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
    expect(result.code).toBe(1);
    expect(result.stdout.equals(firstUtteranceOnly)).toBe(true);
    expect(lines(result.stderr).at(-1)).toMatch(
      /closed the connection \(code 1006\)\. Up to \d+\.\d s of input audio may not have been processed\. \[RTT_CONNECTION\]$/,
    );
  });

  it('exit 3 when the service closes before answering speech sent after its last answer began: what arrived is written, the summary says it', async () => {
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--drop-after-responses', '2', '--drop-code', '1000']);
    servers.push({ close: async () => void (await emulator.stop()) });
    // The third sentence is spoken once the second answer has begun (its transcript is printed).
    const third = 140_000 * 2;
    const secondAnswer = (stderr: string) => (stderr.match(/^transcript \(/gm) ?? []).length >= 2;
    const result = await runSpoken(
      ['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl, '--stats'],
      [{ audio: fixture.pcm.subarray(0, third) }, { audio: fixture.pcm.subarray(third), when: secondAnswer }],
      { env: { RT_TRANSLATE_API_KEY: KEY } },
    );
    expect(result.code).toBe(3);
    expect(result.stdout.equals(expectedTranslation(fixture.pcm, fixture.utterances.slice(0, 2)))).toBe(true);
    expect(result.stderr).toMatch(/warning: The realtime service closed the session after end\(\) while an answer was still owed/);
    expect(result.stderr).toMatch(/^rt-translate: ended incomplete \(closed-by-service\): 1\.1 s of speech unanswered$/m);
  });

  it('a service that echoes the key: the key is in no event line, no message', async () => {
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--echo-key']);
    servers.push({ close: async () => void (await emulator.stop()) });
    const events = path('echo-events.jsonl');
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl, '--quiet-ms', '500', '--events', events], {
      stdin: fixture.pcm,
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
    expect(result.code).toBe(0);
    const text = await readFile(events, 'utf8');
    expect(text).toContain('"api_key":"[redacted]"');
    await expectKeyNotLeaked(result, events);
  });
});

describe.concurrent('rt-translate emulator', () => {
  it('prints one JSON line, serves a second process, keeps running and stops on SIGTERM with status 0', async () => {
    const emulator = await startInProcessEmulator(['--port', '0', '--api-key', KEY]);
    const match = /^\{"baseUrl":"http:\/\/127\.0\.0\.1:(\d+)","realtimeUrl":"ws:\/\/127\.0\.0\.1:(\d+)","apiKeys":\["[^"]+"\]\}$/.exec(emulator.line);
    expect(match).not.toBeNull();
    expect(match![1]).toBe(match![2]);
    expect(Number(match![1])).toBeGreaterThan(0);

    const result = await runInProcess(['--from', 'en-us', '--to', 'fr-fr', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500'], {
      stdin: fixture.pcm,
    });
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
    // A configured URL: no notice about the embedded emulator, only the text.
    expect(lines(result.stderr)).toEqual([...textLines('en-us', 'fr-fr'), summary(fixture.pcm, expected.length, 3)]);

    const ended = await emulator.stop('SIGTERM');
    expect(ended.code).toBe(0);
    expect(ended.stdout.toString()).toBe(`${emulator.line}\n`);
    expect(ended.stderr).toMatch(/^rt-translate emulator: listening; it accepts the API key .*\n {2}export .*\n$/);
  });

  it('stops on SIGINT with status 0 while a session is open; the client reports the lost connection', async () => {
    const emulator = await startInProcessEmulator(['--port', '0', '--api-key', KEY]);
    let seenTranslation: () => void = () => undefined;
    const translated = new Promise<void>((resolve) => (seenTranslation = resolve));
    const client = startInProcess(['--from', 'en-us', '--to', 'fr-fr', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--no-reconnect'], {
      onStderr: (text) => {
        if (text.includes('translation (fr-fr)')) seenTranslation();
      },
    });
    // The first utterance and the silence after it; stdin stays open, so the session does too.
    client.stdin.write(fixture.pcm.subarray(0, 84_480 * 2));
    await translated;

    const ended = await emulator.stop('SIGINT');
    expect(ended.code).toBe(0);
    expect(lines(ended.stderr)).toHaveLength(2);

    const result = await client.result;
    expect(result.code).toBe(1);
    expect(lines(result.stderr).at(-1)).toMatch(/^rt-translate: .*\[RTT_CONNECTION\]$/);
    // What arrived before the stop was written, in order, and nothing else.
    expect(result.stdout.length).toBeLessThanOrEqual(firstUtteranceOnly.length);
    expect(result.stdout.equals(firstUtteranceOnly.subarray(0, result.stdout.length))).toBe(true);
    await expectKeyNotLeaked(result);
  });

  it('--audio-frames binary gives the same audio, logged as {"type":"audio.delta","wireType":"binary","bytes":N}; --cold-start-ms sends session.starting', async () => {
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--audio-frames', 'binary', '--cold-start-ms', '200']);
    const events = path('binary-events.jsonl');
    const result = await runInProcess(
      ['--from', 'en-us', '--to', 'ja-jp', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500', '--events', events],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
    expect(lines(result.stderr)).toEqual([
      'rt-translate: the service is starting (a cold start can take 30 to 90 s)...',
      ...textLines('en-us', 'ja-jp'),
      summary(fixture.pcm, expected.length, 3),
    ]);

    const text = await readFile(events, 'utf8');
    const all = await readEvents(events);
    expect(all[0]).toEqual({ type: 'session.starting', wireType: 'session.starting' });
    expect(all[1]!.type).toBe('session.created');
    expect(all.filter((e) => e.type === 'audio.delta' && e.wireType !== 'binary')).toHaveLength(0);
    const binaryLines = text.split('\n').filter((line) => line.includes('"binary"'));
    expect(binaryLines.length).toBeGreaterThan(3);
    for (const line of binaryLines) expect(line).toMatch(/^\{"type":"audio\.delta","wireType":"binary","bytes":[1-9]\d*\}$/);
    const total = all.filter((e) => e.type === 'audio.delta').reduce((sum, e) => sum + (e.bytes as number), 0);
    expect(total).toBe(result.stdout.length);
    expect((await emulator.stop()).code).toBe(0);
  });

  it('--latency-ms delays each response; a client with a shorter quiet period still receives all of it', async () => {
    const latencyMs = 800;
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--latency-ms', String(latencyMs)]);
    const started = performance.now();
    let firstTranscriptAfter: number | undefined;
    const result = await runInProcess(['--from', 'en-us', '--to', 'ko-kr', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '300'], {
      stdin: fixture.pcm,
      onStderr: (text) => {
        if (text.includes('transcript (')) firstTranscriptAfter ??= performance.now() - started;
      },
    });
    expect(result.code).toBe(0);
    // The wait after the input ends is bounded by inactivity once a response has completed:
    // a server slower than the quiet period must not lose the translation.
    expect(result.stdout.length).toBe(expected.length);
    expect(result.stdout.equals(expected)).toBe(true);
    expect(lines(result.stderr)).toEqual([...textLines('en-us', 'ko-kr'), summary(fixture.pcm, expected.length, 3)]);
    // A lower bound only: the delay was applied (without it the first line comes well before).
    expect(firstTranscriptAfter).toBeGreaterThanOrEqual(latencyMs);
    expect((await emulator.stop()).code).toBe(0);
  });
});

describe.concurrent('rt-translate emulator: handshakes refused or stalled after a drop, and the realtime-faults switch', () => {
  async function emulatorWith(args: string[]) {
    const emulator = await startInProcessEmulator(['--api-key', KEY, ...args]);
    servers.push({ close: async () => void (await emulator.stop()) });
    return emulator;
  }

  function translate(realtimeUrl: string) {
    return runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', realtimeUrl, '--quiet-ms', '500'], {
      stdin: fixture.pcm,
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
  }

  it('--refuse-after-drop 1:503:0: each reconnect is refused once, the next attempt succeeds, every answer written once', async () => {
    const emulator = await emulatorWith(['--drop-after-responses', '1', '--refuse-after-drop', '1:503:0']);
    const result = await translate(emulator.realtimeUrl);
    expect(result.code).toBe(0);
    expect(answersIn(result.stdout, VARIANTS)).toEqual(EVERY_ANSWER_ONCE);
    const said = lines(result.stderr);
    // Two drops; after each, attempt 1 meets the refusal and attempt 2 gets through.
    expect(said.filter((l) => /^rt-translate: connection lost \(.*code 1006.*\); reconnecting in \d+\.\d s \(attempt 1\)$/.test(l))).toHaveLength(2);
    expect(said.filter((l) => /^rt-translate: connection lost \(.*HTTP 503.*\); reconnecting in \d+\.\d s \(attempt 2\)$/.test(l))).toHaveLength(2);
    expect(said.filter((l) => l.includes('(attempt 3)'))).toEqual([]);
  });

  it('--refuse-after-drop 1:401: the reconnect is refused as a key, never retried: exit 1, the first answer written', async () => {
    const emulator = await emulatorWith(['--drop-after-responses', '1', '--refuse-after-drop', '1:401']);
    const result = await translate(emulator.realtimeUrl);
    expect(result.code).toBe(1);
    expect(result.stdout.equals(firstUtteranceOnly)).toBe(true);
    expect(lines(result.stderr).filter((l) => l.includes('reconnecting in'))).toHaveLength(1);
    expect(lines(result.stderr).at(-1)).toMatch(/refused the API key \(HTTP 401\).* while reconnecting.*\[RTT_AUTH\]$/);
    expect(result.stderr).not.toContain(KEY);
  });

  it('--stall-after-drop 1: the reconnect after a drop gets no answer; the next attempt, after the ready timeout, succeeds', async () => {
    const emulator = await emulatorWith(['--drop-after-responses', '1', '--stall-after-drop', '1']);
    const stream = new RealtimeTranslateStream({
      from: 'en-us',
      to: 'es-es',
      apiKey: KEY,
      realtimeUrl: emulator.realtimeUrl,
      quietPeriodMs: 300,
      readyTimeoutMs: 400,
      reconnect: { initialDelayMs: 10, maxDelayMs: 40 },
    });
    const outcome = await runSession(stream, [fixture.pcm]);
    expect(outcome.error).toBeUndefined();
    expect(answersIn(outcome.output, VARIANTS)).toEqual(EVERY_ANSWER_ONCE);
    const reconnecting = outcome.events.flatMap((e) => (e.type === 'reconnecting' ? [[e.attempt, e.cause.code]] : []));
    // Per drop: attempt 1 (the drop), attempt 2 (the stalled handshake timed out).
    expect(reconnecting).toEqual([
      [1, 'RTT_CONNECTION'],
      [2, 'RTT_TIMEOUT'],
      [1, 'RTT_CONNECTION'],
      [2, 'RTT_TIMEOUT'],
    ]);
  });

  it('POST /_emulator/realtime-faults refuses or stalls the next handshakes now, and names what is wrong with a bad body', async () => {
    const emulator = await emulatorWith([]);
    const control = async (body: unknown) => {
      const response = await fetch(`${emulator.baseUrl}/_emulator/realtime-faults`, { method: 'POST', body: JSON.stringify(body) });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    expect(await control({ refuse: 1, status: 401 })).toEqual({ status: 200, body: { ok: true } });
    const refused = await translate(emulator.realtimeUrl);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/refused the API key \(HTTP 401\).*\[RTT_AUTH\]\n$/);
    // One handshake only: the next session is served.
    const served = await translate(emulator.realtimeUrl);
    expect(served.code).toBe(0);
    expect(served.stdout.equals(expected)).toBe(true);

    expect(await control({ stall: 1 })).toEqual({ status: 200, body: { ok: true } });
    const url = `${emulator.realtimeUrl}/v1/realtime`;
    const stalled = new WebSocket(url, { headers: { 'x-api-key': KEY }, handshakeTimeout: 300 });
    const [error] = (await once(stalled, 'error')) as [Error];
    expect(error.message).toMatch(/handshake has timed out/);
    const next = new WebSocket(url, { headers: { 'x-api-key': KEY } });
    await once(next, 'open');
    next.terminate();

    for (const [body, message] of [
      [{ refuse: 0 }, 'refuse must be a number of handshakes, 1 or more'],
      [{ refuse: 1, status: 200 }, 'status must be an HTTP status, 300 to 599'],
      [{ refuse: 1, stall: 1 }, 'give exactly one of refuse, stall, drop, halfOpen'],
      [{ stall: 1, status: 503 }, 'unknown field(s) status with stall'],
      [{ drop: true, code: 1012, reset: true }, 'a drop closes with code or resets, not both'],
      [[{ refuse: 1 }], 'a realtime fault is a JSON object'],
    ] as const) {
      expect(await control(body)).toEqual({ status: 400, body: { status: 400, error: `Invalid realtime fault: ${message}.` } });
    }
  });

  it('refusal flags that are malformed or disagree are usage errors (exit 2) before anything listens', async () => {
    const [malformed, zero, disagree] = await Promise.all([
      runInProcess(['emulator', '--refuse-after-drop', '1:x']),
      runInProcess(['emulator', '--stall-after-drop', '0']),
      runInProcess(['emulator', '--refuse-handshakes', '1:401', '--refuse-after-drop', '1:503']),
    ]);
    expect([malformed, zero, disagree].map((r) => [r.code, r.stdout.length])).toEqual([
      [2, 0],
      [2, 0],
      [2, 0],
    ]);
    expect(malformed.stderr).toBe('rt-translate: --refuse-after-drop expects N[:STATUS[:RETRY_AFTER_S]] (got "1:x").\n');
    expect(zero.stderr).toBe('rt-translate: --stall-after-drop expects an integer >= 1 (got "0").\n');
    expect(disagree.stderr).toBe('rt-translate: --refuse-handshakes and --refuse-after-drop refuse with one status: give it once, or the same.\n');
  });
});

describe.concurrent('rt-translate emulator: how the service cuts the audio and when it answers', () => {
  /** A bare realtime session (no client library: nothing of its own judgement) on an emulator command. */
  async function bareSession(realtimeUrl: string) {
    const ws = new WebSocket(`${realtimeUrl}/v1/realtime`, { headers: { 'x-api-key': KEY } });
    const events: Array<Record<string, unknown>> = [];
    const checks = new Set<() => void>();
    ws.on('message', (data) => {
      events.push(JSON.parse(String(data)) as Record<string, unknown>);
      for (const check of checks) check();
    });
    await once(ws, 'open');
    const count = (type: string) => events.filter((e) => e.type === type).length;
    const until = (done: () => boolean) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!done()) return;
          checks.delete(check);
          resolve();
        };
        checks.add(check);
        check();
      });
    const transcripts = () => events.flatMap((e) => (e.type === 'conversation.item.input_audio_transcription.completed' ? [e.transcript as string] : []));
    const update = JSON.stringify({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } });
    ws.send(update);
    await until(() => count('session.updated') === 1);
    return {
      transcripts,
      send(pcm: Buffer): void {
        for (let at = 0; at < pcm.length; at += 4800) {
          ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm.subarray(at, at + 4800).toString('base64') }));
        }
      },
      /** Resolves once everything the emulator sent before answering a `session.update` has arrived. */
      async roundTrip(): Promise<void> {
        const before = count('session.updated');
        ws.send(update);
        await until(() => count('session.updated') > before);
      },
      untilTranscripts: (n: number) => until(() => transcripts().length >= n),
      close: () => ws.terminate(),
    };
  }

  async function emulatorWith(args: string[]) {
    const emulator = await startInProcessEmulator(['--api-key', KEY, ...args]);
    servers.push({ close: async () => void (await emulator.stop()) });
    return emulator;
  }

  /** The transcripts of `utterances` as the emulator labels them: index (and part) and voiced seconds. */
  function labels(utterances: Array<{ index: number; part: string; durationSeconds: number }>): string[] {
    return utterances.map(
      (u) => `[en-us utterance ${u.index}${u.part === 'whole' ? '' : ` part ${u.part === 'first' ? 1 : 2}`}, ${u.durationSeconds.toFixed(2)} s]`,
    );
  }

  it('--segmentation idle: the whole fixture, sent at once, is one answer', async () => {
    const emulator = await emulatorWith(['--segmentation', 'idle']);
    const client = await bareSession(emulator.realtimeUrl);
    client.send(fixture.pcm);
    await client.untilTranscripts(1);
    const seconds = emulatorUtterances(fixture.pcm).reduce((sum, u) => sum + u.durationSeconds, 0);
    expect(client.transcripts()).toEqual([`[en-us utterances 1-3, ${seconds.toFixed(2)} s]`]);
    client.close();
  });

  it.each([
    ['--segmentation split --split-ms 300', ['--segmentation', 'split', '--split-ms', '300'], { splitMs: 300 }],
    ['--vad-silence-ms 60', ['--vad-silence-ms', '60'], { silenceMs: 60 }],
    ['--vad-threshold-dbfs=-20', ['--vad-threshold-dbfs=-20'], { thresholdDbfs: -20 }],
  ])('%s reaches the detector: the answers are those its settings give', async (_name, args, settings) => {
    const expectedLabels = labels(emulatorUtterances(fixture.pcm, settings));
    // Each case cuts the fixture otherwise than the defaults do.
    expect(expectedLabels).not.toEqual(labels(emulatorUtterances(fixture.pcm)));
    const emulator = await emulatorWith(args);
    const client = await bareSession(emulator.realtimeUrl);
    client.send(fixture.pcm);
    await client.untilTranscripts(expectedLabels.length);
    await client.roundTrip();
    expect(client.transcripts()).toEqual(expectedLabels);
    client.close();
  });

  it('--idle-ms 1500: an utterance left open by the end of the audio is answered that long after the last append', async () => {
    const emulator = await emulatorWith(['--idle-ms', '1500']);
    const client = await bareSession(emulator.realtimeUrl);
    // The first sentence and 880 ms of silence after its voiced region: under the 900 ms that end it.
    const sentAt = performance.now();
    client.send(fixture.pcm.subarray(0, 84_480 * 2));
    await client.roundTrip();
    expect(client.transcripts()).toEqual([]);
    await client.untilTranscripts(1);
    // A lower bound only (timers have a grain of a millisecond): the wait was applied; the
    // default 300 ms would answer well before.
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(1500 - 2);
    expect(client.transcripts()).toEqual(labels(emulatorUtterances(fixture.pcm.subarray(0, 84_480 * 2))));
    client.close();
  });

  it.each([
    ['--never-answer-last', ['--never-answer-last']],
    ['--late-last 800', ['--late-last', '800']],
  ])('%s: an answer waits until speech is heard again', async (_name, args) => {
    // An idle time well above a busy machine's pauses between the sends below.
    const emulator = await emulatorWith([...args, '--idle-ms', '1500']);
    const client = await bareSession(emulator.realtimeUrl);
    // The first sentence and the silence that ends it (more than 900 ms): answered at once by default.
    const secondStarts = fixture.utterances[1]!.emulator.startSample * 2;
    client.send(fixture.pcm.subarray(0, secondStarts));
    await client.roundTrip();
    expect(client.transcripts()).toEqual([]);
    // The second sentence's first frame: the first answer goes out.
    client.send(fixture.pcm.subarray(secondStarts, secondStarts + 1440));
    await client.roundTrip();
    expect(client.transcripts()).toEqual(labels(emulatorUtterances(fixture.pcm)).slice(0, 1));
    const sentAt = performance.now();
    client.send(fixture.pcm.subarray(secondStarts + 1440));
    await client.roundTrip();
    expect(client.transcripts()).toEqual(labels(emulatorUtterances(fixture.pcm)).slice(0, 2));
    if (args[0] === '--late-last') {
      await client.untilTranscripts(3);
      // At least the idle time (1500 ms) and the 800 ms asked for, after the last append.
      expect(performance.now() - sentAt).toBeGreaterThanOrEqual(2300 - 2);
      expect(client.transcripts()).toEqual(labels(emulatorUtterances(fixture.pcm)));
    }
    client.close();
  });

  it('bad values are usage errors (exit 2) naming the flag and what it accepts, before anything listens', async () => {
    const cases: Array<[string[], string]> = [
      [['--segmentation', 'words'], '--segmentation expects utterance, idle or split (got "words").'],
      [['--split-ms', '300'], '--split-ms applies to --segmentation split only: give both, or neither.'],
      [['--segmentation', 'split', '--split-ms', '0'], '--split-ms expects an integer >= 1 (got "0").'],
      [['--vad-silence-ms', '0'], '--vad-silence-ms expects an integer >= 1 (got "0").'],
      [['--vad-threshold-dbfs=3'], '--vad-threshold-dbfs expects a number of dBFS, at most 0, e.g. --vad-threshold-dbfs=-50 (got "3").'],
      [['--vad-threshold-dbfs', 'loud'], '--vad-threshold-dbfs expects a number of dBFS, at most 0, e.g. --vad-threshold-dbfs=-50 (got "loud").'],
      [['--idle-ms', '1.5'], '--idle-ms expects an integer >= 1 (got "1.5").'],
      [['--late-last=-1'], '--late-last expects an integer >= 0 (got "-1").'],
      [['--never-answer-last', '--late-last', '100'], '--never-answer-last and --late-last say opposite things of the last answer: give one.'],
      [['--drop-after-input-ms', 'soon'], '--drop-after-input-ms expects MS[:N] (N at least 1) (got "soon").'],
      [['--drop-after-input-ms', '4000:0'], '--drop-after-input-ms expects MS[:N] (N at least 1) (got "4000:0").'],
    ];
    const results = await Promise.all(cases.map(([args]) => runInProcess(['emulator', ...args])));
    expect(results.map((r) => [r.code, r.stdout.length, r.stderr])).toEqual(cases.map(([, message]) => [2, 0, `rt-translate: ${message}\n`]));
    // A negative value needs the = form; parseArgs says so.
    const spaced = await runInProcess(['emulator', '--vad-threshold-dbfs', '-50']);
    expect(spaced.code).toBe(2);
    expect(spaced.stderr).toContain("use '--vad-threshold-dbfs=-XYZ'");
  });
});

describe.concurrent('rt-translate: exit status 1 after writing what was received, the cause named', () => {
  it('billing stop (--credit-seconds 4): stdout holds exactly the first utterance, stderr the reason', async () => {
    const emulator = await startInProcessEmulator(['--api-key', KEY, '--credit-seconds', '4']);
    const events = path('billing-events.jsonl');
    const result = await runInProcess(
      ['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500', '--events', events],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(firstUtteranceOnly.length);
    expect(result.stdout.equals(firstUtteranceOnly)).toBe(true);
    const stderr = lines(result.stderr);
    expect(stderr.slice(0, 2)).toEqual(textLines('en-us', 'es-es', fixture.utterances.slice(0, 1)));
    expect(stderr.at(-1)).toMatch(
      /^rt-translate: .*billing.*no credits left \(used 4\.0 s of 4\.0 s\)\. Up to \d+\.\d s of input audio may not have been processed\. \[RTT_BILLING\]$/,
    );
    const logged = await readEvents(events);
    const last = logged.at(-1)!;
    // On a failure, the whole sequence of event types says what happened.
    expect(last, logged.map((e) => e.type).join(' ')).toMatchObject({ type: 'server.error', wireType: 'error', code: 402 });
    expect(JSON.stringify(last)).toContain('no credits left');
    await expectKeyNotLeaked(result, events);
    expect((await emulator.stop()).code).toBe(0);
  });

  it('a rejected voice (--voice 999) is named', async () => {
    const events = path('voice-events.jsonl');
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--voice', '999', '--api-key', KEY, '--events', events], {
      stdin: fixture.pcm,
    });
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(0);
    expect(lines(result.stderr).at(-1)).toMatch(/^rt-translate: .*rejected the voice.*Voice 999 .*\[RTT_VOICE_REJECTED\]$/);
    await expectKeyNotLeaked(result, events);
  });

  it('a wrong key (flag or environment) is an auth failure that never shows the key', async () => {
    const emulator: RunningEmulator = await startEmulator({ apiKeys: ['the-only-accepted-key'] });
    servers.push(emulator);
    const eventsFlag = path('auth-flag-events.jsonl');
    const eventsEnv = path('auth-env-events.jsonl');
    const common = ['--from', 'en-us', '--to', 'es-es', '--realtime-url', emulator.realtimeUrl];
    const [byFlag, byEnv] = await Promise.all([
      runInProcess([...common, '--api-key', KEY, '--events', eventsFlag], { stdin: fixture.pcm }),
      runInProcess([...common, '--events', eventsEnv], { stdin: fixture.pcm, env: { RT_TRANSLATE_API_KEY: KEY } }),
    ]);
    for (const [result, events] of [
      [byFlag, eventsFlag],
      [byEnv, eventsEnv],
    ] as const) {
      expect(result.code).toBe(1);
      expect(result.stdout.length).toBe(0);
      expect(lines(result.stderr)).toHaveLength(1);
      expect(result.stderr).toMatch(/^rt-translate: .*refused the API key \(HTTP 401\).*\[RTT_AUTH\]\n$/);
      await expectKeyNotLeaked(result, events);
    }
  });

  it('a refused connection names ECONNREFUSED', async () => {
    const port = await closedPort();
    const events = path('refused-events.jsonl');
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', `ws://127.0.0.1:${port}`, '--api-key', KEY, '--events', events], {
      stdin: fixture.pcm,
    });
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(0);
    expect(result.stderr).toMatch(/^rt-translate: .*ECONNREFUSED 127\.0\.0\.1:\d+.*\[RTT_CONNECTION\]\n$/);
    expect(await readFile(events, 'utf8')).toBe('');
    await expectKeyNotLeaked(result, events);
  });
});

describe.concurrent('rt-translate: exit status 2 before any connection', () => {
  /** Counts every TCP connection made to it: the command under test must make none. */
  let counter: ConnectionCounter;
  beforeAll(async () => {
    counter = await startConnectionCounter();
  });
  afterAll(() => counter.close());

  // IMA ADPCM (format 0x11), which the library does not decode (a 16 kHz stereo PCM WAV, once
  // refused here, is now converted: see cli-formats.test.ts).
  const adpcm = wavFile(8000, 1, 4, Buffer.alloc(4000), 0x11);
  const cases: Array<{ name: string; args: string[]; stdin?: Buffer; message: RegExp }> = [
    { name: 'an unknown flag', args: ['--from', 'en-us', '--to', 'es-es', '--bogus'], stdin: fixture.pcm, message: /Unknown option '--bogus'/ },
    {
      name: 'an unsupported language',
      args: ['--from', 'en-us', '--to', 'xx'],
      stdin: fixture.pcm,
      message: new RegExp(`--to.*${REALTIME_LANGUAGES.join(', ')}.*"xx"`),
    },
    {
      name: 'an unreadable input',
      args: ['--from', 'en-us', '--to', 'es-es', '-i', '/nonexistent'],
      message: /cannot read -i \/nonexistent: no such file\. \[RTT_FILE\]/,
    },
    {
      name: 'a WAV of a format the library cannot read (ADPCM)',
      args: ['--from', 'en-us', '--to', 'es-es'],
      stdin: adpcm,
      message: /Cannot decode standard input as WAV: .*found format 17, 4-bit, 1 channel\(s\), 8000 Hz, LE; accepted: PCM 16-bit .*convert it to raw PCM first/,
    },
    {
      name: 'a non-numeric voice',
      args: ['--from', 'en-us', '--to', 'es-es', '--voice', 'abc'],
      stdin: fixture.pcm,
      message: /--voice expects an integer >= 1 \(got "abc"\)/,
    },
    {
      name: 'a stall bound of zero',
      args: ['--from', 'en-us', '--to', 'es-es', '--stall-ms', '0'],
      stdin: fixture.pcm,
      message: /--stall-ms expects an integer >= 1 \(got "0"\)/,
    },
    { name: 'a missing --from', args: ['--to', 'es-es'], stdin: fixture.pcm, message: /--from TAG is required/ },
    {
      name: 'an output name it cannot write (-o z.ogg)',
      args: ['--from', 'en-us', '--to', 'es-es', '-o', '/nonexistent/z.ogg'],
      stdin: fixture.pcm,
      message:
        /^rt-translate: -o \/nonexistent\/z\.ogg: rt-translate writes WAV or raw samples \(--out-format\), not \.ogg; -o accepts \.wav \.pcm \.raw .* or a name without extension\.$/m,
    },
    {
      name: 'an empty stdin',
      args: ['--from', 'en-us', '--to', 'es-es'],
      stdin: Buffer.alloc(0),
      message: /No audio in standard input: it holds nothing\. \[RTT_INPUT\]/,
    },
  ];

  it.each(cases)('$name', async ({ args, stdin, message }) => {
    const result = await runInProcess([...args, '--realtime-url', counter.url, '--api-key', KEY], stdin ? { stdin } : {});
    expect(result.code).toBe(2);
    expect(result.stdout.length).toBe(0);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr).toMatch(/^rt-translate: /);
    expect(result.stderr).toMatch(message);
    expect(counter.connections).toBe(0);
    await expectKeyNotLeaked(result);
  });

  it('a configured URL without an API key', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--realtime-url', counter.url], { stdin: fixture.pcm });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('rt-translate: no API key: set RT_TRANSLATE_API_KEY, or pass --api-key-file PATH.\n');
    expect(counter.connections).toBe(0);
  });

  it('plain ws:// to a host that is not loopback, leaving the output and events files untouched', async () => {
    const output = path('untouched.pcm');
    const events = path('untouched-events.jsonl');
    await writeFile(output, 'earlier output');
    await writeFile(events, 'earlier events\n');
    const result = await runInProcess(
      ['--from', 'en-us', '--to', 'es-es', '--realtime-url', 'ws://example.com', '--api-key', KEY, '-o', output, '--events', events],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(2);
    expect(result.stdout.length).toBe(0);
    expect(result.stderr).toMatch(/^rt-translate: Refusing plain-text ws:\/\/ to example\.com, which is not a loopback host: use wss:\/\/.*\n$/);
    await expectKeyNotLeaked(result);
    // A configuration error is found before any file is opened for writing.
    expect(await readFile(output, 'utf8')).toBe('earlier output');
    expect(await readFile(events, 'utf8')).toBe('earlier events\n');
  });
});

describe.concurrent('rt-translate: flags and messages', () => {
  let counter: ConnectionCounter;
  beforeAll(async () => {
    counter = await startConnectionCounter();
  });
  afterAll(() => counter.close());

  /** Every message names what the user typed (a flag or a variable), never a library option. */
  const LIBRARY_NAMES = /allowInsecure|realtimeUrl|apiKey|session\.|source_language|target_language|voiceId|quietPeriodMs/;
  const cases: Array<{ name: string; args: string[]; env?: Record<string, string>; message: RegExp }> = [
    {
      name: 'plain ws:// to a remote host',
      args: ['--realtime-url', 'ws://example.com', '--api-key', KEY],
      message:
        /^rt-translate: Refusing plain-text ws:\/\/ to example\.com, which is not a loopback host: use wss:\/\/, or pass --allow-insecure if you really mean it\. \[RTT_CONFIG\]$/,
    },
    {
      name: 'a --realtime-url that is no URL',
      args: ['--realtime-url', 'not a url', '--api-key', KEY],
      message: /^rt-translate: Invalid --realtime-url: expected an absolute wss:\/\/ URL/,
    },
    {
      name: 'an http:// --realtime-url',
      args: ['--realtime-url', 'http://example.com', '--api-key', KEY],
      message: /^rt-translate: Invalid --realtime-url: expected a wss:\/\/ or ws:\/\/ URL \(got http:\/\/\)/,
    },
    {
      name: 'a bad RT_TRANSLATE_REALTIME_URL',
      args: ['--api-key', KEY],
      env: { RT_TRANSLATE_REALTIME_URL: 'nonsense' },
      message: /^rt-translate: Invalid RT_TRANSLATE_REALTIME_URL: expected an absolute wss:\/\/ URL/,
    },
    {
      name: 'credentials in the URL',
      args: ['--realtime-url', 'wss://user:secret@example.com', '--api-key', KEY],
      message:
        /^rt-translate: Invalid --realtime-url: credentials in the URL are not accepted; pass the key with --api-key-file or RT_TRANSLATE_API_KEY instead/,
    },
    {
      name: 'an empty --api-key',
      args: ['--realtime-url', 'wss://example.com', '--api-key', ''],
      message: /^rt-translate: Invalid --api-key: expected a non-empty string/,
    },
    {
      name: 'a misspelt --from',
      args: ['--from', 'EN_US', '--realtime-url', 'wss://example.com', '--api-key', KEY],
      message: /^rt-translate: Invalid --from: expected one of/,
    },
    {
      name: 'an empty --to',
      args: ['--to', '', '--realtime-url', 'wss://example.com', '--api-key', KEY],
      message: /^rt-translate: Invalid --to: expected one of/,
    },
    {
      name: 'a bad -f',
      args: ['-f', 'mp3', '--realtime-url', 'wss://example.com', '--api-key', KEY],
      message: /^rt-translate: Invalid -f: expected one of .* leave -f out/,
    },
  ];

  it.each(cases)('$name: the message names the flag or variable', async ({ args, env, message }) => {
    // A flag given twice takes its last value: the case's.
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', ...args], { stdin: fixture.pcm, ...(env ? { env } : {}) });
    expect(result.code).toBe(2);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr.trimEnd()).toMatch(message);
    expect(result.stderr).not.toMatch(LIBRARY_NAMES);
    expect(result.stderr).not.toContain('secret');
    expect(counter.connections).toBe(0);
  });

  it('an unknown option or an unexpected argument points to --help', async () => {
    const [option, argument, subcommand] = await Promise.all([
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--bogus']),
      runInProcess(['--from', 'en-us', '--to', 'es-es', 'talk.wav']),
      runInProcess(['emulator', '--bogus']),
    ]);
    expect(option.code).toBe(2);
    expect(option.stderr).toBe("rt-translate: Unknown option '--bogus'. See rt-translate --help.\n");
    expect(argument.code).toBe(2);
    expect(argument.stderr).toMatch(/^rt-translate: Unexpected argument 'talk\.wav'\. .*See rt-translate --help\.\n$/);
    expect(subcommand.code).toBe(2);
    expect(subcommand.stderr).toBe("rt-translate: Unknown option '--bogus'. See rt-translate emulator --help.\n");
  });

  it('rt-translate translate ... is the realtime command, named', async () => {
    const result = await runInProcess(['translate', '--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'], { stdin: fixture.pcm });
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
    const help = await runInProcess(['translate', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout.toString()).toMatch(/^Usage: rt-translate \[translate\] --from TAG --to TAG/);
  });

  it('--events - writes the events on standard output (with -o or --text-only), and never a file named "-"', async () => {
    const out = path('events-dash.pcm');
    const [withOutput, textOnly, clash] = await Promise.all([
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '-o', out, '--events', '-'], { stdin: fixture.pcm, cwd: dir }),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--text-only', '--events', '-'], { stdin: fixture.pcm, cwd: dir }),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--events', '-'], { stdin: fixture.pcm, cwd: dir }),
    ]);
    for (const result of [withOutput, textOnly]) {
      expect(result.code).toBe(0);
      const events = result.stdout
        .toString()
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as { type: string });
      expect(events[0]!.type).toBe('session.created');
      expect(events.filter((e) => e.type === 'text.done')).toHaveLength(3);
    }
    expect((await readFile(out)).equals(expected)).toBe(true);
    expect(clash.code).toBe(2);
    expect(clash.stderr).toBe(
      'rt-translate: --events - and the translated audio would both go to standard output: pass -o PATH for the audio, or --text-only.\n',
    );
    await expect(readFile(join(dir, '-'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a reader that goes away (EPIPE on standard output) ends the command quietly, status 0', async () => {
    let taken = 0;
    const reader = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        taken += chunk.length;
        if (taken > 20_000) callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE', syscall: 'write' }));
        else callback();
      },
    });
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'], { stdin: fixture.pcm, stdout: reader });
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(/EPIPE|error/i);
  });
});

describe.concurrent('the status texts (pure)', () => {
  const at = (phase: SessionPhase, extra: Partial<SessionProgress> = {}): SessionProgress => ({
    phase,
    phaseMs: 12_400,
    sentBytes: 48_000 * 3.5,
    receivedBytes: 48_000 * 1.25,
    responses: 1,
    textOnly: false,
    ...extra,
  });

  it('say where the session is, with the counts and the time waited in the phase', () => {
    expect(progressText(at('connecting'))).toBe('connecting: 12 s');
    expect(progressText(at('starting'))).toBe('the service is starting: 12 s');
    expect(progressText(at('translating'))).toBe('sent 3.5 s, received 1.3 s, 1 response');
    expect(progressText(at('translating', { responses: 2, textOnly: true }))).toBe('sent 3.5 s, 2 responses');
    expect(progressText(at('finishing', { responses: 0 }))).toBe(
      'input done: sent 3.5 s; waiting for the last translations: received 1.3 s, 0 responses, 12 s',
    );
    expect(progressText(at('stopping'))).toMatch(/^stopping \(Ctrl-C again to abort\): sent 3\.5 s; waiting/);
    expect(summaryText(at('finishing'))).toBe('sent 3.5 s of audio, received 1.3 s in 1 response.');
    expect(summaryText(at('finishing', { responses: 3, textOnly: true }))).toBe('sent 3.5 s of audio, 3 responses (text only).');
  });

  it('are cut to the terminal width, the last column left free', () => {
    expect(fitToWidth('abcdef', 7)).toBe('abcdef');
    expect(fitToWidth('abcdefg', 7)).toBe('abcde…');
    expect(fitToWidth('abcdefg', 1)).toBe('…');
  });
});

describe.concurrent('rt-translate on a terminal', () => {
  it('refuses to write audio to a terminal without -o, before any connection', async () => {
    const counter = await startConnectionCounter();
    servers.push(counter);
    const common = ['--from', 'en-us', '--to', 'es-es', '--realtime-url', counter.url, '--api-key', KEY];
    const [raw, dash, wav, textOnly] = await Promise.all([
      runInProcess(common, { stdin: fixture.pcm, stdoutTTY: true }),
      runInProcess([...common, '-o', '-'], { stdin: fixture.pcm, stdoutTTY: true }),
      runInProcess([...common, '--out-format', 'wav'], { stdin: fixture.pcm, stdoutTTY: true }),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--text-only', '--quiet-ms', '500'], { stdin: fixture.pcm, stdoutTTY: true }),
    ]);
    for (const result of [raw, dash, wav]) {
      expect(result.code).toBe(2);
      expect(result.stdout.length).toBe(0);
      expect(result.stderr).toBe('rt-translate: refusing to write audio to a terminal: pass -o PATH, redirect standard output, or use --text-only.\n');
    }
    expect(counter.connections).toBe(0);
    expect(textOnly.code).toBe(0);
  });

  it('refuses to read audio from a terminal without -i, rather than wait for it', async () => {
    await writeFile(path('tty-in.pcm'), fixture.pcm.subarray(0, 48_000));
    const [bare, dash, file] = await Promise.all([
      runInProcess(['--from', 'en-us', '--to', 'es-es', '-o', path('never.pcm')], { stdinTTY: true }),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '-i', '-', '-o', path('never.pcm')], { stdinTTY: true }),
      runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '-i', path('tty-in.pcm'), '-o', path('tty-file.pcm')], { stdinTTY: true }),
    ]);
    for (const result of [bare, dash]) {
      expect(result.code).toBe(2);
      expect(result.stderr).toBe('rt-translate: no audio to read: standard input is a terminal; pass -i PATH, or pipe the audio in.\n');
    }
    expect(file.code).toBe(0);
  });

  it('a status line within the terminal width: connecting, sending, then waiting for the last answers; a summary at the end', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '-o', path('tty-out.pcm')], {
      stdin: fixture.pcm,
      stderrTTY: true,
      columns: 40,
    });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(39);
    expect(texts.some((text) => text.startsWith('connecting'))).toBe(true);
    expect(texts.some((text) => text.startsWith('input done'))).toBe(true);
    // Permanent lines are whole, and the last one is the summary, on a cleared line.
    const permanent = permanentLines(result.stderr);
    expect(permanent.slice(1)).toEqual([...textLines('en-us', 'es-es'), summary(fixture.pcm, expected.length, 3)]);
    expect(result.stderr.endsWith(`${summary(fixture.pcm, expected.length, 3)}\n`)).toBe(true);
  });

  it('a terminal that reports 0 columns gets the line cut to 80, not to "…"', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '-o', path('zero-columns.pcm')], {
      stdin: fixture.pcm.subarray(0, 24_000),
      stderrTTY: true,
      columns: 0,
    });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    expect(texts.some((text) => text.startsWith('connecting'))).toBe(true);
    for (const text of texts) {
      expect(text).not.toBe('…');
      expect(text.length).toBeLessThanOrEqual(79);
    }
  });

  it('counts what was sent, not the padding added at the end, and says "1 response"', async () => {
    const first = fixture.pcm.subarray(0, 84_480 * 2);
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '-o', path('one.pcm')], {
      stdin: first,
      stderrTTY: true,
      columns: 200,
    });
    expect(result.code).toBe(0);
    const texts = statusTexts(result.stderr);
    // 3.52 s of input; the 0.8 s of padding the translator adds after it is not "sent" audio.
    expect(texts.filter((text) => /^sent /.test(text)).every((text) => /^sent [0-3]\.\d s/.test(text))).toBe(true);
    expect(texts.some((text) => /^input done: sent 3\.5 s; waiting for the last translations/.test(text))).toBe(true);
    expect(texts.join('\n')).not.toMatch(/\b1 responses/);
    expect(permanentLines(result.stderr).at(-1)).toBe(summary(first, expectedTranslation(first, fixture.utterances.slice(0, 1)).length, 1));
  });

  it('a cold start is announced (a line, and on a terminal the time waited)', async () => {
    const emulator = await startEmulator({ apiKeys: [KEY], coldStartMs: 400 });
    servers.push(emulator);
    const args = ['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '300', '--text-only', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY];
    const [plain, tty] = await Promise.all([
      runInProcess(args, { stdin: fixture.pcm.subarray(0, 24_000) }),
      runInProcess(args, { stdin: fixture.pcm.subarray(0, 24_000), stderrTTY: true }),
    ]);
    expect(plain.code).toBe(0);
    expect(lines(plain.stderr)[0]).toBe('rt-translate: the service is starting (a cold start can take 30 to 90 s)...');
    expect(tty.code).toBe(0);
    expect(statusTexts(tty.stderr).some((text) => /^the service is starting: \d+ s$/.test(text))).toBe(true);
  });
});

describe.concurrent('rt-translate: the API key off the command line', () => {
  let emulator: RunningEmulator;
  beforeAll(async () => {
    emulator = await startEmulator({ apiKeys: [KEY] });
  });
  afterAll(() => emulator.close());
  const common = () => ['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--realtime-url', emulator.realtimeUrl];

  it('--api-key-file PATH reads the key (its trailing newline dropped); a wrong one fails as auth, unshown', async () => {
    await writeFile(path('key.txt'), `${KEY}\n`);
    await writeFile(path('wrong-key.txt'), 'sk-not-the-key-0123456789\n');
    const [good, wrong] = await Promise.all([
      runInProcess([...common(), '--api-key-file', path('key.txt')], { stdin: fixture.pcm }),
      runInProcess([...common(), '--api-key-file', 'wrong-key.txt'], { stdin: fixture.pcm, cwd: dir }),
    ]);
    expect(good.code).toBe(0);
    expect(good.stdout.equals(expected)).toBe(true);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/refused the API key \(HTTP 401\).* Check the key in RT_TRANSLATE_API_KEY or --api-key-file\. \[RTT_AUTH\]\n$/);
    expect(wrong.stderr).not.toContain('sk-not-the-key');
  });

  it('--api-key-file - reads the key from standard input, the audio then comes from -i', async () => {
    await writeFile(path('speech.pcm'), fixture.pcm);
    const result = await runInProcess([...common(), '--api-key-file', '-', '-i', path('speech.pcm')], { stdin: Buffer.from(`${KEY}\n`) });
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
  });

  it.each([
    {
      name: 'a missing file',
      args: ['--api-key-file', '/nonexistent/key'],
      message: 'rt-translate: cannot read --api-key-file /nonexistent/key: no such file. [RTT_FILE]',
    },
    {
      name: 'an empty file',
      args: ['--api-key-file', 'empty-key.txt'],
      message: 'rt-translate: --api-key-file empty-key.txt holds no key (the file is empty).',
    },
    {
      name: 'both ways at once',
      args: ['--api-key', KEY, '--api-key-file', 'key.txt'],
      message: 'rt-translate: give the key once: --api-key or --api-key-file, not both.',
    },
    {
      name: 'the key and the audio both on standard input',
      args: ['--api-key-file', '-'],
      message: 'rt-translate: --api-key-file - reads the key from standard input, so the audio must come from a file: pass -i PATH.',
    },
  ])('$name is a usage error (exit 2)', async ({ args, message }) => {
    await writeFile(path('empty-key.txt'), '\n');
    const result = await runInProcess([...common(), ...args], { stdin: Buffer.from(`${KEY}\n`), cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`${message}\n`);
  });

  it('--help says to prefer the environment or a file to --api-key', async () => {
    const help = (await runInProcess(['--help'])).stdout.toString();
    expect(help).toMatch(/--api-key-file PATH {3}the API key from a file \('-': standard input\)\n {24}with '-', the audio must come from -i PATH\n/);
    expect(help).toMatch(/--api-key KEY {9}the API key; other users can see it in 'ps': prefer\n {24}RT_TRANSLATE_API_KEY or --api-key-file/);
  });

  it('rt-translate emulator says which key it accepts, and how to point the command at it', async () => {
    const started = await startInProcessEmulator(['--api-key', KEY]);
    try {
      expect(JSON.parse(started.line)).toEqual({ baseUrl: started.baseUrl, realtimeUrl: started.realtimeUrl, apiKeys: [KEY] });
    } finally {
      const ended = await started.stop();
      expect(ended.code).toBe(0);
      expect(ended.stderr).toBe(
        `rt-translate emulator: listening; it accepts the API key ${KEY}. To use it:\n` +
          `  export RT_TRANSLATE_REALTIME_URL=${started.realtimeUrl} RT_TRANSLATE_BASE_URL=${started.baseUrl} RT_TRANSLATE_API_KEY=${KEY}\n`,
      );
    }
  });
});

describe.concurrent('rt-translate: help, version and usage', () => {
  it('--help, -h, --version and emulator --help exit 0; no arguments prints usage on stderr with status 2', async () => {
    const [help, short, version, none, emulatorHelp, emulatorBadFlag] = await Promise.all([
      runInProcess(['--help']),
      runInProcess(['-h']),
      runInProcess(['--version']),
      runInProcess([]),
      runInProcess(['emulator', '--help']),
      runInProcess(['emulator', '--audio-frames', 'xml']),
    ]);
    expect(help.code).toBe(0);
    expect(help.stderr).toBe('');
    expect(help.stdout.toString()).toMatch(/^Usage: rt-translate \[translate\] --from TAG --to TAG \[options\]/);
    expect(help.stdout.toString()).toContain('--realtime-url URL');
    expect(help.stdout.toString()).toMatch(/\n {2}--quiet-ms MS {9}after the input ends, wait for more translations until the service\n/);
    expect(help.stdout.toString()).toMatch(/\n {2}--stall-ms MS {9}after the input ends, how long an answer still owed/);
    expect(help.stdout.toString()).toMatch(/\n {2}2 {4}usage or configuration error \(before any connection\), or an input that cannot be read\n/);
    expect(short.code).toBe(0);
    expect(short.stdout.equals(help.stdout)).toBe(true);

    expect(version.code).toBe(0);
    expect(version.stdout.toString()).toBe(`${packageVersion}\n`);
    expect(version.stderr).toBe('');

    expect(none.code).toBe(2);
    expect(none.stdout.length).toBe(0);
    expect(none.stderr).toBe(help.stdout.toString());

    expect(emulatorHelp.code).toBe(0);
    expect(emulatorHelp.stdout.toString()).toMatch(/^Usage: rt-translate emulator \[options\]/);
    expect(emulatorHelp.stdout.toString()).toContain('--credit-seconds S');
    expect(emulatorHelp.stdout.toString()).toMatch(
      /\n {2}--refuse-after-drop N\[:STATUS\[:RETRY_AFTER_S\]\]\n {28}after each drop, refuse the next N handshakes/,
    );
    expect(emulatorHelp.stdout.toString()).toMatch(/\n {2}--stall-after-drop N {6}after each drop, leave the next N handshakes unanswered/);
    expect(emulatorHelp.stdout.toString()).toContain(`-d '{"refuse": 1, "status": 401}'`);
    for (const flag of [
      '--segmentation MODE',
      '--split-ms MS',
      '--vad-silence-ms MS',
      '--vad-threshold-dbfs=DB',
      '--idle-ms MS',
      '--never-answer-last',
      '--late-last MS',
    ]) {
      expect(emulatorHelp.stdout.toString()).toMatch(new RegExp(`\\n {2}${flag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} +\\S`));
    }

    expect(emulatorBadFlag.code).toBe(2);
    expect(emulatorBadFlag.stdout.length).toBe(0);
    expect(emulatorBadFlag.stderr).toBe('rt-translate: --audio-frames expects json or binary (got "xml").\n');
  });

  it('--version anywhere on the command line prints the version and exits 0', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es', '--version']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout.toString()).toBe(`${packageVersion}\n`);
  });
});
