/**
 * The `rt-translate` command, spawned as a real process with pipes: audio bytes in and out,
 * stderr lines, the events file and exit statuses, against the embedded emulator, the
 * `rt-translate emulator` command and in-process servers on loopback.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { EventLog } from '../bin/commands/translate.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { REALTIME_LANGUAGES } from '../lib/realtime/languages.js';
import { expectedTranslation, loadSpeechFixture, type FixtureUtterance } from './helpers/speech.js';
import { collect, killAllChildren, runCli, spawnCli, startCliEmulator, type CliResult } from './helpers/cli.js';
import { startConnectionCounter, type ConnectionCounter } from './helpers/cli.js';

/** A key distinctive enough that finding it anywhere in the output means it leaked. */
const KEY = 'sk-cli-test-5f1c2a9e77d04b1c';
const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
const firstUtteranceOnly = expectedTranslation(fixture.pcm, fixture.utterances.slice(0, 1));
const packageVersion = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let dir: string;
const servers: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-cli-'));
});

afterEach(async () => {
  await killAllChildren();
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function path(name: string): string {
  return join(dir, name);
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** The emulator's placeholder duration of an utterance: its voiced region, in seconds. */
function duration(u: FixtureUtterance): string {
  return ((u.endSample - u.startSample) / 24_000).toFixed(2);
}

/** The transcript and translation lines the command prints for the fixture's utterances. */
function textLines(from: string, to: string, utterances = fixture.utterances): string[] {
  return utterances.flatMap((u, i) => [
    `transcript (${from}): [${from} utterance ${i + 1}, ${duration(u)} s]`,
    `translation (${to}): [${to} translation of utterance ${i + 1}, ${duration(u)} s]`,
  ]);
}

const EMBEDDED_NOTICE =
  /^rt-translate: no realtime URL configured \(--realtime-url or RT_TRANSLATE_REALTIME_URL\); using the embedded emulator at ws:\/\/127\.0\.0\.1:\d+$/;

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

describe('rt-translate: translation through the embedded emulator', () => {
  it('translates raw PCM from stdin to stdout, bit for bit, with the text on stderr', async () => {
    const result = await runCli(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'], { stdin: fixture.pcm });
    expect(result.stderr).not.toMatch(/error|warning/i);
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBe(expected.length);
    expect(result.stdout.equals(expected)).toBe(true);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(EMBEDDED_NOTICE);
    expect(stderr.slice(1)).toEqual(textLines('en-us', 'es-es'));
  });

  it('reads a WAV file (-i) and writes a WAV with exact header sizes (-o .wav), raw PCM otherwise', async () => {
    const wavIn = path('speech.wav');
    await writeFile(wavIn, fixture.wav);
    const common = ['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500'];
    const [toWav, toPcm, wavOnStdin] = await Promise.all([
      runCli([...common, '-i', wavIn, '-o', path('out.wav')]),
      runCli([...common, '--input', wavIn, '--output', path('out.pcm')]),
      runCli(common, { stdin: fixture.wav }),
    ]);

    expect(toWav.code).toBe(0);
    expect(toWav.stdout.length).toBe(0);
    expect(lines(toWav.stderr).slice(1)).toEqual(textLines('en-us', 'es-es'));
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
    const result = await runCli(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '--events', events], {
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
    const child = spawnCli(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500']);
    let seenTranslation: () => void = () => undefined;
    const translated = new Promise<void>((resolve) => (seenTranslation = resolve));
    const ended = collect(child, 10_000, (text) => {
      if (text.includes('translation (es-es)')) seenTranslation();
    });
    // stdin stays open and quiet after this, as a paused producer's would.
    child.stdin!.write(sent);
    await translated;
    child.kill('SIGINT');
    const result = await ended;
    expect(result.signal).toBeNull();
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expectedTranslation(sent, fixture.utterances.slice(0, 1)))).toBe(true);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(EMBEDDED_NOTICE);
    expect(stderr.slice(1)).toEqual(textLines('en-us', 'es-es', fixture.utterances.slice(0, 1)));
  });

  it('--text-only writes no audio and prints the translations', async () => {
    const result = await runCli(['--from', 'en-us', '--to', 'de-de', '--text-only', '--quiet-ms', '500'], {
      stdin: fixture.pcm,
    });
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBe(0);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(EMBEDDED_NOTICE);
    expect(stderr.slice(1)).toEqual(textLines('en-us', 'de-de'));
  });
});

describe('--events log (EventLog)', () => {
  /** A file that holds every write's callback until `release()`; counts writes made while it asked for drain. */
  function slowFile() {
    const held: Array<() => void> = [];
    const state = { written: [] as string[], writesWhileFull: 0, held };
    const file = new Writable({
      highWaterMark: 1024,
      write(chunk: Buffer, _encoding, callback) {
        state.written.push(chunk.toString());
        held.push(() => callback());
      },
    });
    const write = file.write.bind(file) as (chunk: unknown) => boolean;
    file.write = ((chunk: unknown) => {
      if (file.writableNeedDrain) state.writesWhileFull += 1;
      return write(chunk);
    }) as typeof file.write;
    return { file, state, release: () => held.shift()?.() };
  }
  const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('writes every line in order, never writes while the file asks for drain, and reports when it is over its bound', async () => {
    const { file, state, release } = slowFile();
    const log = new EventLog(file);
    const lineOf = (n: number) => `{"type":"response.audio.delta","n":${n},"pad":"${'x'.repeat(100)}"}\n`;
    const all: string[] = [];
    let n = 0;
    const add = (count: number) => {
      for (let k = 0; k < count; k++) {
        const line = lineOf(n++);
        all.push(line);
        log.add(line);
      }
    };
    add(3000); // about 370 KB: over the 256 KiB bound
    let below = false;
    const waiting = log.belowHighWater().then(() => (below = true));
    await tick();
    expect(below).toBe(false);
    // The file takes its time: events keep coming meanwhile, and are queued, not written.
    for (let round = 0; round < 5; round++) {
      add(10);
      await tick();
      expect(state.writesWhileFull).toBe(0);
    }
    while (!below) {
      release();
      await tick();
    }
    await waiting;
    const closing = log.close();
    let closed = false;
    void closing.then(() => (closed = true));
    while (!closed) {
      release();
      await tick();
    }
    await closing;
    expect(state.writesWhileFull).toBe(0);
    expect(state.written.join('')).toBe(all.join(''));
    expect(state.written.length).toBeLessThan(20); // batched, not one write per line
  });

  it('a failing file: close() reports the error, later lines are dropped, nobody waits forever', async () => {
    const failure = Object.assign(new Error('no space left'), { code: 'ENOSPC' });
    const file = new Writable({ write: (_chunk, _encoding, callback) => callback(failure) });
    file.on('error', () => undefined);
    const log = new EventLog(file);
    log.add(`{"type":"session.created"}\n`.repeat(30_000));
    await log.belowHighWater();
    log.add('{"type":"later"}\n');
    await expect(log.close()).rejects.toBe(failure);
  });
});

describe('rt-translate emulator', () => {
  it('prints one JSON line, serves a second process, keeps running and stops on SIGTERM with status 0', async () => {
    const emulator = await startCliEmulator(['--port', '0', '--api-key', KEY]);
    const match = /^\{"baseUrl":"http:\/\/127\.0\.0\.1:(\d+)","realtimeUrl":"ws:\/\/127\.0\.0\.1:(\d+)"\}$/.exec(emulator.line);
    expect(match).not.toBeNull();
    expect(match![1]).toBe(match![2]);
    expect(Number(match![1])).toBeGreaterThan(0);

    const result = await runCli(
      ['--from', 'en-us', '--to', 'fr-fr', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500'],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
    // A configured URL: no notice about the embedded emulator, only the text.
    expect(lines(result.stderr)).toEqual(textLines('en-us', 'fr-fr'));

    expect(emulator.child.exitCode).toBeNull();
    const ended = await emulator.stop('SIGTERM');
    expect(ended.signal).toBeNull();
    expect(ended.code).toBe(0);
    expect(ended.stdout.toString()).toBe(`${emulator.line}\n`);
    expect(ended.stderr).toBe('');
  });

  it('stops on SIGINT with status 0 while a session is open; the client reports the lost connection', async () => {
    const emulator = await startCliEmulator(['--port', '0', '--api-key', KEY]);
    const client = spawnCli(['--from', 'en-us', '--to', 'fr-fr', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--no-reconnect']);
    let seenTranslation: () => void = () => undefined;
    const translated = new Promise<void>((resolve) => (seenTranslation = resolve));
    const clientEnded = collect(client, 8_000, (text) => {
      if (text.includes('translation (fr-fr)')) seenTranslation();
    });
    // The first utterance and the silence after it; stdin stays open, so the session does too.
    client.stdin!.write(fixture.pcm.subarray(0, 84_480 * 2));
    await translated;

    const ended = await emulator.stop('SIGINT');
    expect(ended.signal).toBeNull();
    expect(ended.code).toBe(0);
    expect(ended.stderr).toBe('');

    const result = await clientEnded;
    expect(result.code).toBe(1);
    expect(lines(result.stderr).at(-1)).toMatch(/^rt-translate: .*\[RTT_CONNECTION\]$/);
    // What arrived before the stop was written, in order, and nothing else.
    expect(result.stdout.length).toBeLessThanOrEqual(firstUtteranceOnly.length);
    expect(result.stdout.equals(firstUtteranceOnly.subarray(0, result.stdout.length))).toBe(true);
    await expectKeyNotLeaked(result);
  });

  it('--audio-frames binary gives the same audio, logged as {"type":"audio.delta","wireType":"binary","bytes":N}; --cold-start-ms sends session.starting', async () => {
    const emulator = await startCliEmulator(['--api-key', KEY, '--audio-frames', 'binary', '--cold-start-ms', '200']);
    const events = path('binary-events.jsonl');
    const result = await runCli(
      ['--from', 'en-us', '--to', 'ja-jp', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500', '--events', events],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(0);
    expect(result.stdout.equals(expected)).toBe(true);
    expect(lines(result.stderr)).toEqual(textLines('en-us', 'ja-jp'));

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
    const latencyMs = 1500;
    const emulator = await startCliEmulator(['--api-key', KEY, '--latency-ms', String(latencyMs)]);
    const started = performance.now();
    let firstTranscriptAfter: number | undefined;
    const result = await runCli(
      ['--from', 'en-us', '--to', 'ko-kr', '--realtime-url', emulator.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500'],
      {
        stdin: fixture.pcm,
        onStderr: (text) => {
          if (text.includes('transcript (')) firstTranscriptAfter ??= performance.now() - started;
        },
      },
    );
    expect(result.code).toBe(0);
    // The wait after the input ends is bounded by inactivity once a response has completed:
    // a server slower than the quiet period must not lose the translation.
    expect(result.stdout.length).toBe(expected.length);
    expect(result.stdout.equals(expected)).toBe(true);
    expect(lines(result.stderr)).toEqual(textLines('en-us', 'ko-kr'));
    // A lower bound only: the delay was applied (without it the first line comes well before).
    expect(firstTranscriptAfter).toBeGreaterThanOrEqual(latencyMs);
    expect((await emulator.stop()).code).toBe(0);
  });
});

describe('rt-translate: exit status 1 after writing what was received, the cause named', () => {
  it('billing stop (--credit-seconds 4): stdout holds exactly the first utterance, stderr the reason', async () => {
    const emulator = await startCliEmulator(['--api-key', KEY, '--credit-seconds', '4']);
    const events = path('billing-events.jsonl');
    const result = await runCli(
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
    const last = (await readEvents(events)).at(-1)!;
    expect(last).toMatchObject({ type: 'server.error', wireType: 'error', code: 402 });
    expect(JSON.stringify(last)).toContain('no credits left');
    await expectKeyNotLeaked(result, events);
    expect((await emulator.stop()).code).toBe(0);
  });

  it('a rejected voice (--voice 999) is named', async () => {
    const events = path('voice-events.jsonl');
    const result = await runCli(['--from', 'en-us', '--to', 'es-es', '--voice', '999', '--api-key', KEY, '--events', events], {
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
      runCli([...common, '--api-key', KEY, '--events', eventsFlag], { stdin: fixture.pcm }),
      runCli([...common, '--events', eventsEnv], { stdin: fixture.pcm, env: { RT_TRANSLATE_API_KEY: KEY } }),
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
    const result = await runCli(
      ['--from', 'en-us', '--to', 'es-es', '--realtime-url', `ws://127.0.0.1:${port}`, '--api-key', KEY, '--events', events],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(0);
    expect(result.stderr).toMatch(/^rt-translate: .*ECONNREFUSED 127\.0\.0\.1:\d+.*\[RTT_CONNECTION\]\n$/);
    expect(await readFile(events, 'utf8')).toBe('');
    await expectKeyNotLeaked(result, events);
  });
});

describe('rt-translate: exit status 2 before any connection', () => {
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
    { name: 'an unreadable input', args: ['--from', 'en-us', '--to', 'es-es', '-i', '/nonexistent'], message: /cannot read input \/nonexistent: ENOENT/ },
    {
      name: 'a WAV of a format the library cannot read (ADPCM)',
      args: ['--from', 'en-us', '--to', 'es-es'],
      stdin: adpcm,
      message: /cannot decode standard input as WAV: .*found format 17, 4-bit, 1 channel\(s\), 8000 Hz, LE; accepted: PCM 16-bit .*convert it first/,
    },
    { name: 'a non-numeric voice', args: ['--from', 'en-us', '--to', 'es-es', '--voice', 'abc'], stdin: fixture.pcm, message: /--voice expects an integer >= 1 \(got "abc"\)/ },
    { name: 'a missing --from', args: ['--to', 'es-es'], stdin: fixture.pcm, message: /--from TAG is required/ },
    { name: 'an empty stdin', args: ['--from', 'en-us', '--to', 'es-es'], stdin: Buffer.alloc(0), message: /no audio on standard input/ },
  ];

  it.each(cases)('$name', async ({ args, stdin, message }) => {
    const result = await runCli([...args, '--realtime-url', counter.url, '--api-key', KEY], stdin ? { stdin } : {});
    expect(result.code).toBe(2);
    expect(result.stdout.length).toBe(0);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr).toMatch(/^rt-translate: /);
    expect(result.stderr).toMatch(message);
    expect(counter.connections).toBe(0);
    await expectKeyNotLeaked(result);
  });

  it('a configured URL without an API key', async () => {
    const result = await runCli(['--from', 'en-us', '--to', 'es-es', '--realtime-url', counter.url], { stdin: fixture.pcm });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('rt-translate: no API key: pass --api-key or set RT_TRANSLATE_API_KEY.\n');
    expect(counter.connections).toBe(0);
  });

  it('plain ws:// to a host that is not loopback, leaving the output and events files untouched', async () => {
    const output = path('untouched.pcm');
    const events = path('untouched-events.jsonl');
    await writeFile(output, 'earlier output');
    await writeFile(events, 'earlier events\n');
    const result = await runCli(
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

describe('rt-translate: help, version and usage', () => {
  it('--help, -h, --version and emulator --help exit 0; no arguments prints usage on stderr with status 2', async () => {
    const [help, short, version, none, emulatorHelp, emulatorBadFlag] = await Promise.all([
      runCli(['--help']),
      runCli(['-h']),
      runCli(['--version']),
      runCli([]),
      runCli(['emulator', '--help']),
      runCli(['emulator', '--audio-frames', 'xml']),
    ]);
    expect(help.code).toBe(0);
    expect(help.stderr).toBe('');
    expect(help.stdout.toString()).toMatch(/^Usage: rt-translate --from TAG --to TAG \[options\]/);
    expect(help.stdout.toString()).toContain('--realtime-url URL');
    expect(help.stdout.toString()).toMatch(/\n {2}--quiet-ms MS {9}after the input ends, wait for the last translation/);
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

    expect(emulatorBadFlag.code).toBe(2);
    expect(emulatorBadFlag.stdout.length).toBe(0);
    expect(emulatorBadFlag.stderr).toBe('rt-translate: --audio-frames expects json or binary (got "xml").\n');
  });

  it('--version anywhere on the command line prints the version and exits 0', async () => {
    const result = await runCli(['--from', 'en-us', '--to', 'es-es', '--version']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout.toString()).toBe(`${packageVersion}\n`);
  });
});
