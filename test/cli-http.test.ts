/**
 * The HTTP subcommands of `rt-translate` (`tts`, `translated-tts`, `separate`, `separate-results`,
 * `voices delete` and its old name `delete-voice`, `task-status`) and the HTTP flags of `rt-translate emulator`, run in-process
 * through their entry points (`test/helpers/cli-io.ts`) against the embedded emulator, an
 * emulator on loopback and servers that misbehave: output bytes, stdout and stderr lines, exit
 * statuses, and the key kept out of every output. One spawned case checks the top-level usage.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, type Server, type Socket } from 'node:net';
import { request } from 'undici';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { separateTracks, synthesizeFlac, synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { Readable, Writable } from 'node:stream';
import { batchesOf } from '../bin/commands/separate-results.js';
import type { CliIo } from '../bin/cli.js';
import { TASK_KINDS } from '../lib/http/task-kinds.js';
import { runCommand, type CommandEntry, type CommandOptions, type CommandResult } from './helpers/cli-io.js';
import { runInProcess } from './helpers/cli.js';
import { runTts } from '../bin/commands/tts.js';
import { runTranslatedTts } from '../bin/commands/translated-tts.js';
import { runSeparateResults } from '../bin/commands/separate-results.js';
import { runSeparate } from '../bin/commands/separate.js';
import { runTaskStatus } from '../bin/commands/task-status.js';
import { runVoices } from '../bin/commands/voices.js';
import { runEmulator } from '../bin/commands/emulator.js';

/** A key distinctive enough that finding it anywhere in the output means it leaked. */
const KEY = 'sk-cli-http-test-8d2e61c4a0b9f357';
const FIXTURE = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const RATE = 24_000;

let dir: string;
let emu: RunningEmulator;
const closers: Array<() => Promise<void>> = [];

const ENTRIES: Record<string, CommandEntry> = {
  tts: runTts,
  'translated-tts': runTranslatedTts,
  separate: runSeparate,
  'separate-results': runSeparateResults,
  voices: runVoices,
  'task-status': runTaskStatus,
  emulator: (args, io) => runEmulator(args, io),
};

/** `rt-translate ARGS`, in-process. */
function cli(args: string[], options: CommandOptions = {}): Promise<CommandResult> {
  const [name, ...rest] = args;
  const entry = ENTRIES[name!];
  if (!entry) throw new Error(`no entry point for ${name}`);
  return runCommand(entry, rest, options);
}

/** `rt-translate emulator ARGS` in-process, once it printed its line; `stop()` ends it. */
async function startCommandEmulator(args: string[]): Promise<{ baseUrl: string; stop: () => Promise<CommandResult> }> {
  const stop = new AbortController();
  let line!: (text: string) => void;
  const printed = new Promise<string>((resolve) => (line = resolve));
  let out = '';
  const io = {
    stdin: Readable.from([]),
    stdout: new Writable({
      write(chunk: Buffer, _e, cb) {
        out += chunk.toString();
        if (out.includes('\n')) line(out.slice(0, out.indexOf('\n')));
        cb();
      },
    }),
    stderr: new Writable({ write: (_c, _e, cb) => cb() }),
    env: {},
  } as CliIo;
  const ended = runEmulator(args, io, stop.signal);
  const first = await Promise.race([printed, ended.then((code) => Promise.reject(new Error(`emulator exited ${code}`)))]);
  const { baseUrl } = JSON.parse(first) as { baseUrl: string };
  return {
    baseUrl,
    stop: async () => {
      stop.abort();
      return { code: await ended, stdout: Buffer.from(out), stderr: '' };
    },
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-cli-http-'));
  emu = await startEmulator({ port: 0, apiKeys: [KEY], taskMs: 0, taskPolls: 1, ttsStreamDelayMs: 0 });
});

afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

afterAll(async () => {
  await emu?.close();
  await rm(dir, { recursive: true, force: true });
});

function path(name: string): string {
  return join(dir, name);
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** The emulator process as the service: base URL and key from the environment. */
function serviceEnv(baseUrl = emu.baseUrl): Record<string, string> {
  return { RT_TRANSLATE_BASE_URL: baseUrl, RT_TRANSLATE_API_KEY: KEY };
}

/** Calls an emulator's control endpoint (no key needed). */
async function control(baseUrl: string, method: 'GET' | 'POST' | 'DELETE', name: string, body?: unknown): Promise<any> {
  const response = await request(`${baseUrl}/_emulator/${name}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`control ${name}: ${response.statusCode} ${text}`);
  return JSON.parse(text);
}

/** The requests the emulator logged whose path starts with `prefix`. */
async function requestsTo(baseUrl: string, prefix = '/'): Promise<Array<{ method: string; path: string; status: number }>> {
  const { requests } = (await control(baseUrl, 'GET', 'requests')) as { requests: Array<{ method: string; path: string; status: number }> };
  return requests.filter((r) => r.path.startsWith(prefix));
}

function expectKeyNotLeaked(result: CommandResult): void {
  expect(result.stderr).not.toContain(KEY);
  expect(result.stdout.includes(KEY)).toBe(false);
}

/** Checks the 44-byte header of a PCM16 mono 24 kHz WAV and returns its data. */
function wavData(wav: Buffer): Buffer {
  expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
  expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
  expect(wav.toString('latin1', 8, 16)).toBe('WAVEfmt ');
  expect(wav.readUInt16LE(20)).toBe(1);
  expect(wav.readUInt16LE(22)).toBe(1);
  expect(wav.readUInt32LE(24)).toBe(RATE);
  expect(wav.readUInt16LE(34)).toBe(16);
  expect(wav.toString('latin1', 36, 40)).toBe('data');
  expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
  return wav.subarray(44);
}

/** The two lines a command that waits for a task writes on stderr: the task, then its run. */
const TASK_LINES = (kind: string): RegExp[] => [
  new RegExp(`^rt-translate: task [0-9a-f-]{36} \\(${kind}\\) created$`),
  /^rt-translate: task [0-9a-f-]{36}: run \d+$/,
];

/** The embedded emulator's line for a command given a key (RT_TRANSLATE_API_KEY) and no state directory. */
const EMBEDDED_NOTICE =
  'rt-translate: warning: the API key from RT_TRANSLATE_API_KEY is not used: no service URL is configured, so the embedded emulator answers ' +
  '(it remembers nothing between commands: neither XDG_STATE_HOME nor HOME is set to an absolute directory); ' +
  'set RT_TRANSLATE_BASE_URL / RT_TRANSLATE_REALTIME_URL for the service';

/** A TCP server on loopback that accepts and at once resets every connection. */
async function resettingServer(): Promise<string> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.resetAndDestroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** An emulator with cloned voices. */
async function inProcessEmulator(clonedVoices: Record<string, number[]>): Promise<RunningEmulator> {
  const server = await startEmulator({ port: 0, apiKeys: [KEY], clonedVoices, taskMs: 0 });
  closers.push(() => server.close());
  return server;
}

describe('rt-translate tts', () => {
  const text = 'Streaming speech from the command line.';
  const pcm = synthesizeSpeechPcm(text, { sampleRate: RATE });

  it('writes a valid WAV (-o x.wav) from the embedded emulator, saying so on stderr', async () => {
    const result = await cli(['tts', '--text', text, '--voice', '20299', '--language', 'en-us', '-o', path('speech.wav')], {
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(lines(result.stderr)[0]).toBe(EMBEDDED_NOTICE);
    expect(result.stdout.length).toBe(0);
    const data = wavData(await readFile(path('speech.wav')));
    expect(data.equals(pcm)).toBe(true);
    expectKeyNotLeaked(result);
  });

  it("--voice defaults to the service's default voice, as translated-tts does", async () => {
    const result = await cli(['tts', '--text', text, '--language', 'en-us', '-o', path('default-voice.wav')], { env: serviceEnv() });
    expect(result.code).toBe(0);
    expect(wavData(await readFile(path('default-voice.wav'))).equals(pcm)).toBe(true);
  });

  it('--format pcm_s16le -o - streams whole samples to stdout; a .flac path gets FLAC', async () => {
    const [toStdout, toFlac] = await Promise.all([
      cli(['tts', '--text', text, '--voice', '20299', '--language', 'en-us', '--format', 'pcm_s16le', '-o', '-'], { env: serviceEnv() }),
      cli(['tts', '--text', text, '--voice', '20299', '--language', 'EN-US', '--output', path('speech.flac')], { env: serviceEnv() }),
    ]);
    expect(toStdout.code).toBe(0);
    expect(toStdout.stderr).toBe('');
    expect(toStdout.stdout.equals(pcm)).toBe(true);
    expect(toFlac.code).toBe(0);
    expect(toFlac.stderr).toBe('');
    const flac = await readFile(path('speech.flac'));
    expect(flac.subarray(0, 4).toString('latin1')).toBe('fLaC');
    expect(flac.length).toBeGreaterThan(1000);
  });

  it('a stream cut by the service exits 1 naming the cause; the bytes received are kept in OUT.partial, OUT is not written', async () => {
    await control(emu.baseUrl, 'POST', 'faults', { dropAfterBytes: 5000, path: '/tts-stream' });
    const result = await cli(['tts', '--text', text, '--voice', '20299', '--language', 'en-us', '--format', 'pcm_s16le', '-o', path('cut.pcm')], {
      env: serviceEnv(),
    });
    expect(result.code).toBe(1);
    expect(lines(result.stderr)).toEqual([
      `rt-translate: ${path('cut.pcm')} was not written: ${path('cut.pcm.partial')} holds the first 5000 bytes received before the failure`,
      expect.stringMatching(/^rt-translate: POST \/tts-stream lost its connection \(.+\)\..* \[RTT_CONNECTION\]$/),
    ]);
    await expect(readFile(path('cut.pcm'))).rejects.toMatchObject({ code: 'ENOENT' });
    const written = await readFile(path('cut.pcm.partial'));
    expect(written.length).toBe(5000);
    expect(written.equals(pcm.subarray(0, 5000))).toBe(true);
    expectKeyNotLeaked(result);
  });

  it('usage and library validation errors exit 2 before any request', async () => {
    await control(emu.baseUrl, 'DELETE', 'requests');
    const base = ['tts', '--voice', '20299', '--language', 'en-us', '-o', path('never.wav')];
    const [short, locale, voice, format, ogg, unknownFlag] = await Promise.all([
      cli([...base, '--text', 'hi'], { env: serviceEnv() }),
      cli(['tts', '--text', text, '--voice', '20299', '--language', 'english', '-o', path('never.wav')], { env: serviceEnv() }),
      cli(['tts', '--text', text, '--voice', 'abc', '--language', 'en-us'], { env: serviceEnv() }),
      cli([...base, '--text', text, '--format', 'ogg'], { env: serviceEnv() }),
      cli(['tts', '--text', text, '--language', 'en-us', '-o', path('speech.ogg')], { env: serviceEnv() }),
      cli([...base, '--text', text, '--speed', '2'], { env: serviceEnv() }),
    ]);
    for (const result of [short, locale, voice, format, ogg, unknownFlag]) {
      expect(result.code).toBe(2);
      expect(result.stdout.length).toBe(0);
      expectKeyNotLeaked(result);
    }
    expect(short.stderr).toBe('rt-translate: --text expects a string of 3 to 3000 characters (got "hi").\n');
    expect(locale.stderr).toMatch(/^rt-translate: --language expects a locale tag .*\(got "english"\)\.\n$/);
    expect(voice.stderr).toBe('rt-translate: --voice expects an integer >= 1 (got "abc").\n');
    expect(format.stderr).toMatch(/^rt-translate: --format expects one of wav, flac, .* \(got "ogg"\)\.\n$/);
    expect(ogg.stderr).toMatch(
      /^rt-translate: -o .*speech\.ogg: tts writes the audio the service streams, not \.ogg; -o accepts \.wav \.flac \.mp3 .* or a name without extension, or pass --format \(wav, flac, /,
    );
    expect(unknownFlag.stderr).toMatch(/^rt-translate: Unknown option '--speed'/);
    expect(await requestsTo(emu.baseUrl)).toEqual([]);
  });
});

describe('rt-translate translated-tts', () => {
  const text = 'Good morning, dear listeners';
  const translated = `[es-es] ${text}`;

  it('waits for the task, prints the translation on stdout and writes the FLAC the service synthesized', async () => {
    const result = await cli([
      'translated-tts',
      '--text',
      text,
      '--from',
      'en-us',
      '--to',
      'es-es',
      '-o',
      path('out.flac'),
      '--poll-ms',
      '10',
      '--base-url',
      emu.baseUrl,
      '--api-key',
      KEY,
    ]);
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toEqual(TASK_LINES('translated-tts').map((re) => expect.stringMatching(re)));
    expect(result.stdout.toString()).toBe(`${translated}\n`);
    expect((await readFile(path('out.flac'))).equals(synthesizeFlac(translated, { sampleRate: RATE }))).toBe(true);
    expectKeyNotLeaked(result);
  });

  it('with -o - the audio goes to stdout and the text to stderr; --decode writes a WAV of the PCM', async () => {
    const [toStdout, decoded] = await Promise.all([
      cli(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'es-es', '-o', '-', '--poll-ms', '10'], { env: serviceEnv() }),
      cli(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'es-es', '-o', path('out.wav'), '--decode', '--poll-ms', '10'], {
        env: serviceEnv(),
      }),
    ]);
    expect(toStdout.code).toBe(0);
    expect(lines(toStdout.stderr)).toEqual([...TASK_LINES('translated-tts').map((re) => expect.stringMatching(re)), translated]);
    expect(toStdout.stdout.equals(synthesizeFlac(translated, { sampleRate: RATE }))).toBe(true);
    expect(decoded.code).toBe(0);
    expect(decoded.stdout.toString()).toBe(`${translated}\n`);
    expect(wavData(await readFile(path('out.wav'))).equals(synthesizeSpeechPcm(translated, { sampleRate: RATE }))).toBe(true);
  });

  it('resumes a result download that was cut, and says so on stderr', async () => {
    await control(emu.baseUrl, 'POST', 'faults', { dropAfterBytes: 3000, path: '/tts-result/' });
    const result = await cli(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'fr-fr', '-o', path('resumed.flac'), '--poll-ms', '10'], {
      env: serviceEnv(),
    });
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toEqual([
      ...TASK_LINES('translated-tts').map((re) => expect.stringMatching(re)),
      expect.stringMatching(/^rt-translate: audio of run \d+: the connection was lost; going on from byte 3000$/),
    ]);
    expect((await readFile(path('resumed.flac'))).equals(synthesizeFlac(`[fr-fr] ${text}`, { sampleRate: RATE }))).toBe(true);
  });

  it('a task that fails exits 1 with its message; a bad locale exits 2 before any request', async () => {
    await control(emu.baseUrl, 'DELETE', 'requests');
    const badLocale = await cli(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'spanish', '-o', path('x.flac')], { env: serviceEnv() });
    expect(badLocale.code).toBe(2);
    expect(badLocale.stderr).toMatch(/^rt-translate: --to expects a locale tag .*\(got "spanish"\)\.\n$/);
    expect(await requestsTo(emu.baseUrl)).toEqual([]);

    const failed = await cli(
      ['translated-tts', '--text', 'please fail [[ERROR]]', '--from', 'en-us', '--to', 'es-es', '-o', path('x.flac'), '--poll-ms', '10'],
      {
        env: serviceEnv(),
      },
    );
    expect(failed.code).toBe(1);
    expect(failed.stdout.length).toBe(0);
    expect(lines(failed.stderr)).toEqual([
      expect.stringMatching(TASK_LINES('translated-tts')[0]!),
      expect.stringMatching(/^rt-translate: Task [0-9a-f-]+ failed: The emulator failed this task because its text asked for it\..* \[RTT_TASK_FAILED\]$/),
    ]);
    expectKeyNotLeaked(failed);
  });
});

describe('rt-translate translated-tts: the output name', () => {
  const text = 'Good morning, dear listeners';
  it.each([
    [
      'y.ogg',
      [],
      /^rt-translate: -o .*y\.ogg: translated-tts writes FLAC, not \.ogg; -o accepts \.flac or a name without extension, or with --decode \.wav \.pcm \.raw\.\n$/,
    ],
    ['y.wav', [], /^rt-translate: -o .*y\.wav: translated-tts writes FLAC, not \.wav; .*or with --decode \.wav \.pcm \.raw\.\n$/],
    [
      'y.flac',
      ['--decode'],
      /^rt-translate: -o .*y\.flac: with --decode, translated-tts writes PCM16 LE, not \.flac; -o accepts \.wav \.pcm \.raw or a name without extension\.\n$/,
    ],
  ])('-o %s %j is refused before any request, naming -o and what it accepts', async (name, extra, message) => {
    await control(emu.baseUrl, 'DELETE', 'requests');
    const result = await runInProcess(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'es-es', '-o', path(name), ...extra], {
      env: serviceEnv(),
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stdout.length).toBe(0);
    expect(await requestsTo(emu.baseUrl)).toEqual([]);
  });
});

describe('rt-translate translated-tts: --no-wait, then --run', () => {
  it('creates the task and prints its id; task-status waits for it; --run fetches the result', async () => {
    const text = 'See you tomorrow';
    const created = await cli(['translated-tts', '--text', text, '--from', 'en-us', '--to', 'de-de', '--no-wait'], { env: serviceEnv() });
    expect(created.code).toBe(0);
    const { task_id: taskId, kind } = JSON.parse(created.stdout.toString()) as { task_id: string; kind: string };
    expect(kind).toBe('translated-tts');
    expect(created.stderr).toBe(
      `rt-translate: task ${taskId} (translated-tts) created; wait for it with \`rt-translate task-status translated-tts ${taskId} --wait\`, then fetch its result with --run RUN_ID\n`,
    );
    const waited = await cli(['task-status', 'translated-tts', taskId, '--wait', '--poll-ms', '10'], { env: serviceEnv() });
    const { run_id: runId } = JSON.parse(waited.stdout.toString()) as { run_id: number };
    const fetched = await cli(['translated-tts', '--run', String(runId), '-o', path('later.flac')], { env: serviceEnv() });
    expect(fetched.code).toBe(0);
    expect(fetched.stderr).toBe('');
    expect(fetched.stdout.toString()).toBe(`[de-de] ${text}\n`);
    expect((await readFile(path('later.flac'))).equals(synthesizeFlac(`[de-de] ${text}`, { sampleRate: RATE }))).toBe(true);
  });

  it('--run with an embedded emulator that remembers nothing, or with --no-wait, is a usage error before anything starts', async () => {
    const [embedded, both] = await Promise.all([
      cli(['translated-tts', '--run', '5', '-o', path('never.flac')], { env: { RT_TRANSLATE_API_KEY: KEY } }),
      cli(['translated-tts', '--run', '5', '--no-wait'], { env: serviceEnv() }),
    ]);
    expect(embedded.code).toBe(2);
    expect(embedded.stderr).toMatch(
      /^rt-translate: --run 5 needs the service that made it, but no base URL is configured, and the embedded emulator remembers nothing between commands here .*`rt-translate emulator`/,
    );
    expect(both.code).toBe(2);
    expect(both.stderr).toBe('rt-translate: --run and --no-wait do not go together: --run fetches a result, --no-wait only creates a task.\n');
  });

  it('the embedded emulator answers an unknown language with 422, as the service does', async () => {
    const result = await cli(['translated-tts', '--text', 'Hello', '--from', 'en-us', '--to', 'xx-yy', '-o', path('never.flac')], {
      env: { RT_TRANSLATE_API_KEY: KEY },
    });
    expect(result.code).toBe(1);
    expect(lines(result.stderr)).toEqual([
      EMBEDDED_NOTICE,
      expect.stringMatching(
        /^rt-translate: POST \/translated-tts was rejected with 422 \(validation\): --to: Value error, unsupported language "xx-yy".*\[RTT_VALIDATION\]$/,
      ),
    ]);
  });
});

describe('rt-translate separate-results', () => {
  async function seeded(): Promise<{ runId: number; tracks: ReturnType<typeof separateTracks> }> {
    const task = (await control(emu.baseUrl, 'POST', 'tasks', { kind: 'audio-separation', apiKey: KEY, taskMs: 0 })) as { task_id: string; run_id: number };
    return { runId: task.run_id, tracks: separateTracks(task.task_id, { sampleRate: RATE }) };
  }

  /** A separation run that ended with ERROR ('unreadable audio'). */
  async function seededFailure(): Promise<{ run_id: number }> {
    return (await control(emu.baseUrl, 'POST', 'tasks', {
      kind: 'audio-separation',
      apiKey: KEY,
      taskMs: 0,
      status: 'ERROR',
      message: 'unreadable audio',
    })) as { run_id: number };
  }

  it("writes both tracks of each run, equal to the service's, resuming a cut download", async () => {
    const out = path('tracks');
    await mkdir(out);
    const [a, b] = [await seeded(), await seeded()];
    await control(emu.baseUrl, 'POST', 'file-faults', { dropAfterBytes: 800, count: 1 });
    const result = await cli(['separate-results', String(a.runId), String(b.runId), '-o', out], { env: serviceEnv() });
    expect(result.code).toBe(0);
    const written = [a, b].flatMap(({ runId }) => [join(out, `foreground-${runId}.flac`), join(out, `background-${runId}.flac`)]);
    expect(lines(result.stdout.toString())).toEqual(written);
    expect(lines(result.stderr)).toEqual([`rt-translate: run ${a.runId} foreground: the connection was lost; going on from byte 800`]);
    expect((await readFile(written[0]!)).equals(a.tracks.foreground)).toBe(true);
    expect((await readFile(written[1]!)).equals(a.tracks.background)).toBe(true);
    expect((await readFile(written[2]!)).equals(b.tracks.foreground)).toBe(true);
    expect((await readFile(written[3]!)).equals(b.tracks.background)).toBe(true);
    expect((await readdir(out)).sort()).toEqual(written.map((p) => p.slice(out.length + 1)).sort());
  });

  it('a track whose download fails keeps what was received in NAME.partial and names it; the other tracks are written', async () => {
    const out = path('partial');
    await mkdir(out);
    const [a, b] = [await seeded(), await seeded()];
    // The first download is cut halfway; resuming it is then refused for good (404).
    const cut = Math.floor(a.tracks.foreground.length / 2);
    await control(emu.baseUrl, 'POST', 'faults', [
      { dropAfterBytes: cut, path: '/_files/' },
      { status: 404, path: '/_files/' },
    ]);
    try {
      const result = await cli(['separate-results', String(a.runId), String(b.runId), '-o', out], { env: serviceEnv() });
      expect(result.code).toBe(1);
      const part = join(out, `foreground-${a.runId}.flac.partial`);
      // Kept up to the end of the last whole frame: where the next frame's sync code starts.
      const kept = await readFile(part);
      expect(kept.length).toBeLessThanOrEqual(cut);
      expect(kept.length).toBeGreaterThan(cut / 2);
      expect(kept.subarray(42).equals(a.tracks.foreground.subarray(42, kept.length))).toBe(true);
      expect(a.tracks.foreground[kept.length]).toBe(0xff);
      expect(a.tracks.foreground[kept.length + 1]! & 0xfe).toBe(0xf8);
      const errors = lines(result.stderr);
      expect(errors[0]).toBe(`rt-translate: run ${a.runId} foreground: the connection was lost; going on from byte ${cut}`);
      expect(errors[1]).toMatch(
        new RegExp(
          `^rt-translate: run ${a.runId}: foreground track failed: .*HTTP 404.*\\[RTT_HTTP\\]; ${part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} holds the first \\d+\\.\\d s of audio received$`,
        ),
      );
      expect(errors.slice(2)).toEqual(['rt-translate: 1 of 2 run(s) failed']);
      expect((await readdir(out)).sort()).toEqual(
        [`background-${a.runId}.flac`, `background-${b.runId}.flac`, `foreground-${a.runId}.flac.partial`, `foreground-${b.runId}.flac`].sort(),
      );
      expect((await readFile(join(out, `background-${a.runId}.flac`))).equals(a.tracks.background)).toBe(true);
      expectKeyNotLeaked(result);
    } finally {
      await control(emu.baseUrl, 'DELETE', 'faults');
    }
  });

  it('reports each run that has no tracks (failed, unknown, of another kind) and exits 1; the other runs are still written', async () => {
    const out = path('mixed');
    await mkdir(out);
    const good = await seeded();
    const failed = await seededFailure();
    const other = (await control(emu.baseUrl, 'POST', 'tasks', { kind: 'translation', apiKey: KEY, taskMs: 0 })) as { run_id: number };
    const result = await cli(['separate-results', String(failed.run_id), String(good.runId), '999999', String(other.run_id), '-o', out], { env: serviceEnv() });
    expect(result.code).toBe(1);
    expect(lines(result.stderr)).toEqual([
      `rt-translate: run ${failed.run_id}: no tracks (ERROR): unreadable audio`,
      'rt-translate: run 999999: no tracks (ERROR): Run 999999 does not exist.',
      `rt-translate: run ${other.run_id}: no tracks (ERROR): Run ${other.run_id} is not an audio-separation run.`,
      'rt-translate: 3 of 4 run(s) failed',
    ]);
    expect((await readdir(out)).sort()).toEqual([`background-${good.runId}.flac`, `foreground-${good.runId}.flac`]);
    expect((await readFile(join(out, `foreground-${good.runId}.flac`))).equals(good.tracks.foreground)).toBe(true);
    expectKeyNotLeaked(result);
  });

  it('one run is looked up on its own (GET /audio-separation-result/RUN) and both tracks written, an expired URL refreshed the same way', async () => {
    const out = path('single');
    await mkdir(out);
    const a = await seeded();
    await control(emu.baseUrl, 'DELETE', 'requests');
    // The first track's first URL is refused as expired: the run is looked up again, alone.
    await control(emu.baseUrl, 'POST', 'faults', { status: 403, count: 1, path: '/_files/' });
    try {
      const result = await cli(['separate-results', String(a.runId), '-o', out], { env: serviceEnv() });
      expect(result.code).toBe(0);
      const written = [join(out, `foreground-${a.runId}.flac`), join(out, `background-${a.runId}.flac`)];
      expect(lines(result.stdout.toString())).toEqual(written);
      expect(result.stderr).toBe('');
      expect((await readFile(written[0]!)).equals(a.tracks.foreground)).toBe(true);
      expect((await readFile(written[1]!)).equals(a.tracks.background)).toBe(true);
      const requests = await requestsTo(emu.baseUrl);
      expect(requests.map((r) => `${r.method} ${r.path.startsWith('/_files/') ? '/_files/' : r.path} ${r.status}`)).toEqual([
        `GET /audio-separation-result/${a.runId} 200`,
        'GET /_files/ 403',
        `GET /audio-separation-result/${a.runId} 200`,
        'GET /_files/ 200',
        'GET /_files/ 200',
      ]);
      expectKeyNotLeaked(result);
    } finally {
      await control(emu.baseUrl, 'DELETE', 'faults');
    }
  });

  it("one run without tracks is reported with the service's answer and exits 1", async () => {
    const out = path('single-failed');
    await mkdir(out);
    const failed = await seededFailure();
    const result = await cli(['separate-results', String(failed.run_id), '-o', out], { env: serviceEnv() });
    expect(result.code).toBe(1);
    expect(lines(result.stderr)).toEqual([
      expect.stringMatching(new RegExp(`^rt-translate: run ${failed.run_id}: lookup failed: .*404.*\\[RTT_`)),
      'rt-translate: 1 of 1 run(s) failed',
    ]);
    expect(await readdir(out)).toEqual([]);
  });

  it('checks run ids and the directory before any request (exit 2)', async () => {
    await control(emu.baseUrl, 'DELETE', 'requests');
    const [none, notNumber, twice, notDir, stdout] = await Promise.all([
      cli(['separate-results'], { env: serviceEnv() }),
      cli(['separate-results', '12', 'abc'], { env: serviceEnv() }),
      cli(['separate-results', '12', '12'], { env: serviceEnv() }),
      cli(['separate-results', '12', '13', '-o', path('no-such-dir')], { env: serviceEnv() }),
      cli(['separate-results', '12', '13', '-o', '-'], { env: serviceEnv() }),
    ]);
    expect(none.stderr).toBe('rt-translate: RUN_ID... is required: one audio separation run or more (see --help).\n');
    expect(notNumber.stderr).toBe('rt-translate: RUN_ID expects a positive integer (got "abc").\n');
    expect(twice.stderr).toBe('rt-translate: run 12 is given twice.\n');
    expect(notDir.stderr).toBe(`rt-translate: cannot write into -o ${path('no-such-dir')}: no such directory; create it, or pass --create-dirs. [RTT_FILE]\n`);
    expect(stdout.stderr).toBe('rt-translate: -o expects a directory: two files are written per run.\n');
    for (const result of [none, notNumber, twice, notDir, stdout]) expect(result.code).toBe(2);
    expect(await requestsTo(emu.baseUrl)).toEqual([]);
  });

  it('splits more than 5 runs into lookups of 2 to 5', () => {
    expect(batchesOf([7])).toEqual([[7]]);
    expect(batchesOf([1, 2])).toEqual([[1, 2]]);
    expect(batchesOf([1, 2, 3, 4, 5])).toEqual([[1, 2, 3, 4, 5]]);
    expect(batchesOf([1, 2, 3, 4, 5, 6])).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(batchesOf([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]).map((b) => b.length)).toEqual([4, 4, 3]);
  });
});

describe('rt-translate separate', () => {
  /** The tracks the emulator makes of an upload named `filename`. */
  const tracksOf = (filename: string): ReturnType<typeof separateTracks> => separateTracks(filename, { sampleRate: RATE });

  it('uploads the recording, waits for its task and writes both tracks, printing their paths (embedded emulator)', async () => {
    const out = path('separated');
    await mkdir(out);
    const result = await runInProcess(['separate', '-i', FIXTURE, '-o', out]);
    expect(result.code).toBe(0);
    const written = [join(out, 'foreground-1001.flac'), join(out, 'background-1001.flac')];
    expect(lines(result.stdout.toString())).toEqual(written);
    const stderr = lines(result.stderr);
    expect(stderr[0]).toMatch(/^rt-translate: using the embedded emulator\b/);
    expect(stderr.slice(1)).toEqual(TASK_LINES('audio-separation').map((line) => expect.stringMatching(line)));
    const expected = tracksOf(basename(FIXTURE));
    expect((await readFile(written[0]!)).equals(expected.foreground)).toBe(true);
    expect((await readFile(written[1]!)).equals(expected.background)).toBe(true);
    expect((await readdir(out)).sort()).toEqual(['background-1001.flac', 'foreground-1001.flac']);
  });

  it('sends the whole file once; --no-wait prints the task, and --run RUN downloads its tracks later', async () => {
    await control(emu.baseUrl, 'DELETE', 'requests');
    const created = await cli(['separate', '-i', FIXTURE, '--no-wait'], { env: serviceEnv() });
    expect(created.code).toBe(0);
    const { task_id: taskId, kind } = JSON.parse(created.stdout.toString()) as { task_id: string; kind: string };
    expect(kind).toBe('audio-separation');
    const [upload] = (await control(emu.baseUrl, 'GET', 'requests')).requests as Array<{
      method: string;
      path: string;
      uploads?: Array<{ filename: string; size: number }>;
    }>;
    expect(upload).toMatchObject({ method: 'POST', path: '/audio-separation' });
    expect(upload!.uploads).toEqual([expect.objectContaining({ filename: basename(FIXTURE), size: (await stat(FIXTURE)).size })]);

    const done = await cli(['task-status', 'audio-separation', taskId, '--wait', '--poll-ms', '10'], { env: serviceEnv() });
    const runId = (JSON.parse(done.stdout.toString()) as { run_id: number }).run_id;
    const out = path('separated-later');
    await mkdir(out);
    const fetched = await cli(['separate', '--run', String(runId), '-o', out], { env: serviceEnv() });
    expect(fetched.code).toBe(0);
    expect(lines(fetched.stdout.toString())).toEqual([join(out, `foreground-${runId}.flac`), join(out, `background-${runId}.flac`)]);
    expect((await readFile(join(out, `background-${runId}.flac`))).equals(tracksOf(basename(FIXTURE)).background)).toBe(true);
    expectKeyNotLeaked(fetched);
  });

  it('refuses, before any request, a missing -i, a file that cannot be read, is empty or is other media, and a bad -o (exit 2)', async () => {
    const ogg = path('song.ogg');
    await writeFile(ogg, Buffer.concat([Buffer.from('OggS'), Buffer.alloc(60)]));
    const empty = path('empty.wav');
    await writeFile(empty, '');
    const notes = path('notes.txt');
    await writeFile(notes, 'Meeting notes: translate the keynote into Spanish.\n');
    await control(emu.baseUrl, 'DELETE', 'requests');
    const cases: Array<[string[], string]> = [
      [[], 'rt-translate: -i PATH is required: the recording to separate (see rt-translate separate --help).\n'],
      [['-i', path('no-such.wav')], `rt-translate: cannot read -i ${path('no-such.wav')}: no such file. [RTT_FILE]\n`],
      [['-i', empty], `rt-translate: -i ${empty} is empty: there is no recording to upload. [RTT_INPUT]\n`],
      [
        ['-i', ogg],
        `rt-translate: -i ${ogg} is Ogg: the service separates WAV, MP3, FLAC or AAC audio; convert it first (for example ffmpeg -i ${ogg} song.wav).\n`,
      ],
      [['-i', FIXTURE, '-o', '-'], 'rt-translate: -o expects a directory: two files are written per run.\n'],
      [['-i', FIXTURE, '--run', '12'], 'rt-translate: give -i PATH (a recording to separate) or --run ID (the tracks of a finished run), not both.\n'],
      [['-i', FIXTURE, '--ouput', 'x'], "rt-translate: Unknown option '--ouput'. Did you mean --output? See rt-translate separate --help.\n"],
      [
        ['-i', notes],
        `rt-translate: -i ${notes} looks like text, not a recording the service can read: it takes WAV, MP3, FLAC or AAC audio. Convert it first, e.g. ffmpeg -i IN OUT.wav. [RTT_INPUT]\n`,
      ],
      [
        ['-i', FIXTURE, '-o', path('no-dir/x')],
        `rt-translate: cannot write into -o ${path('no-dir/x')}: no such directory; create it, or pass --create-dirs. [RTT_FILE]\n`,
      ],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(['separate', ...args], { env: serviceEnv() })));
    for (const [i, result] of results.entries()) {
      expect(result.stderr, cases[i]![0].join(' ')).toBe(cases[i]![1]);
      expect(result.code).toBe(2);
    }
    expect(await requestsTo(emu.baseUrl)).toEqual([]);
  });
});

describe('rt-translate voices delete', () => {
  it('prints "deleted voice ID"; a voice the key does not own exits 1 with the 403 named', async () => {
    const server = await inProcessEmulator({ [KEY]: [4242] });
    const deleted = await cli(['voices', 'delete', '4242'], { env: serviceEnv(server.baseUrl) });
    expect(deleted.code).toBe(0);
    expect(deleted.stdout.toString()).toBe('deleted voice 4242\n');
    expect(deleted.stderr).toBe('');
    const again = await cli(['voices', 'delete', '4242'], { env: serviceEnv(server.baseUrl) });
    expect(again.code).toBe(1);
    expect(again.stdout.length).toBe(0);
    expect(again.stderr).toMatch(/^rt-translate: DELETE \/delete-voice\/4242 was refused with 403: .* \[RTT_FORBIDDEN\]\n$/);
    expectKeyNotLeaked(again);
  });

  it('a connection lost once the request was sent is reported (exit 1), not repeated', async () => {
    const base = await resettingServer();
    const result = await cli(['voices', 'delete', '17', '--base-url', base, '--api-key', KEY]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^rt-translate: DELETE \/delete-voice\/17 lost its connection \(.*\)\. .*\[RTT_CONNECTION\]\n$/);
    expectKeyNotLeaked(result);
  });

  it('an unknown key exits 1 with the 401 named and never echoes the key', async () => {
    const wrong = 'sk-cli-http-wrong-key-77aa19c3e5';
    const result = await cli(['voices', 'delete', '17', '--base-url', emu.baseUrl, '--api-key', wrong]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^rt-translate: DELETE \/delete-voice\/17 was refused with 401: the API key is missing or invalid\..* Check the key in RT_TRANSLATE_API_KEY or --api-key-file\. \[RTT_AUTH\]\n$/,
    );
    expect(result.stderr).not.toContain(wrong);
  });

  it('the old name delete-voice still deletes, and says once, in plain words, that it is deprecated', async () => {
    const server = await inProcessEmulator({ [KEY]: [4343] });
    const result = await runInProcess(['delete-voice', '4343'], { env: serviceEnv(server.baseUrl) });
    expect(result.code).toBe(0);
    expect(result.stdout.toString()).toBe('deleted voice 4343\n');
    expect(result.stderr).toBe('rt-translate: delete-voice is deprecated; use rt-translate voices delete ID (the same command).\n');
    const help = await runInProcess(['delete-voice', '--help']);
    expect(help.stdout.toString()).toMatch(/^Usage: rt-translate voices \[list\|create\|delete\|design\]/);
    const top = (await runInProcess(['--help'])).stdout.toString();
    expect(top).toMatch(/\nDeprecated \(they still work, and say so when used\):\n {2}rt-translate delete-voice ID +now rt-translate voices delete ID\n/);
    expect(top).toMatch(/\n {2}rt-translate voices \[list\|create\|delete\|design\] +voices, cloned voices\n/);
  });

  it('configuration errors exit 2 before any request', async () => {
    const [noKey, plainRemote, badId] = await Promise.all([
      cli(['voices', 'delete', '17', '--base-url', emu.baseUrl]),
      cli(['voices', 'delete', '17', '--base-url', 'http://service.example.com/apis', '--api-key', KEY]),
      cli(['voices', 'delete', 'seventeen'], { env: serviceEnv() }),
    ]);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toBe('rt-translate: no API key: set RT_TRANSLATE_API_KEY, or pass --api-key-file PATH.\n');
    expect(plainRemote.code).toBe(2);
    expect(plainRemote.stderr).toMatch(/^rt-translate: Refusing plain-text http:\/\/ to service\.example\.com.* \[RTT_CONFIG\]\n$/);
    expect(badId.code).toBe(2);
    expect(badId.stderr).toBe('rt-translate: ID expects a positive integer (got "seventeen").\n');
  });
});

describe('rt-translate task-status', () => {
  it('prints the status JSON; --wait polls until SUCCESS and prints the final status', async () => {
    const pending = (await control(emu.baseUrl, 'POST', 'tasks', { kind: 'sub', apiKey: KEY, taskMs: 3_600_000 })) as { task_id: string };
    const now = await cli(['task-status', 'sub', pending.task_id], { env: serviceEnv() });
    expect(now.code).toBe(0);
    expect(now.stderr).toBe('');
    expect(JSON.parse(now.stdout.toString())).toEqual({ status: 'PENDING', run_id: null });
    const task = (await control(emu.baseUrl, 'POST', 'tasks', { kind: 'sub', apiKey: KEY, polls: 2 })) as { task_id: string; run_id: number };
    const waited = await cli(['task-status', 'sub', task.task_id, '--wait', '--poll-ms', '10'], { env: serviceEnv() });
    expect(waited.code).toBe(0);
    expect(waited.stderr).toBe('');
    expect(waited.stdout.toString()).toBe(`${JSON.stringify({ status: 'SUCCESS', run_id: task.run_id })}\n`);
  });

  it('--wait on a task that fails prints its final status and exits 1 with the message', async () => {
    const task = (await control(emu.baseUrl, 'POST', 'tasks', {
      kind: 'audio-separation',
      apiKey: KEY,
      polls: 1,
      status: 'ERROR',
      message: 'the file is silent',
    })) as { task_id: string };
    const result = await cli(['task-status', 'audio-separation', task.task_id, '--wait', '--poll-ms', '10'], { env: serviceEnv() });
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout.toString())).toMatchObject({ status: 'ERROR', message: 'the file is silent' });
    expect(result.stderr).toMatch(new RegExp(`^rt-translate: Task ${task.task_id} failed: the file is silent\\..* \\[RTT_TASK_FAILED\\]\\n$`));
  });

  it('without a base URL nor a state directory it explains why the embedded emulator could only answer 404 (exit 2)', async () => {
    const result = await cli(['task-status', 'dub', 'some-task'], { env: { RT_TRANSLATE_API_KEY: KEY } });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^rt-translate: task some-task needs the service that made it, .*embedded emulator remembers nothing between commands here .*: it could only answer 404\. Set XDG_STATE_HOME or HOME, point --base-url/,
    );
  });

  it('knows every task kind', async () => {
    for (const kind of TASK_KINDS) {
      const task = (await control(emu.baseUrl, 'POST', 'tasks', { kind, apiKey: KEY })) as { task_id: string; run_id: number };
      const result = await cli(['task-status', kind, task.task_id], { env: serviceEnv() });
      expect(JSON.parse(result.stdout.toString())).toEqual({ status: 'SUCCESS', run_id: task.run_id });
    }
  });

  it('an unknown task exits 1 naming the 404; a bad KIND or missing TASK_ID exits 2', async () => {
    const [unknown, badKind, missing] = await Promise.all([
      cli(['task-status', 'translated-tts', 'no-such-task'], { env: serviceEnv() }),
      cli(['task-status', 'dubbing', 'abc'], { env: serviceEnv() }),
      cli(['task-status', 'sub'], { env: serviceEnv() }),
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^rt-translate: GET \/translated-tts\/no-such-task failed with HTTP 404.* \[RTT_HTTP\]\n$/);
    expect(badKind.code).toBe(2);
    expect(badKind.stderr).toBe(`rt-translate: KIND expects one of ${TASK_KINDS.join(', ')} (got "dubbing").\n`);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe('rt-translate: task-status expects KIND and TASK_ID (got 1 argument(s); see --help).\n');
  });
});

describe('rt-translate emulator: HTTP flags', () => {
  it('--rate-limit answers 429 past N requests a second per key; --url-ttl-s sets the URL lifetime', async () => {
    const other = 'sk-cli-http-second-key-41f0';
    const limited = await startCommandEmulator(['--api-key', KEY, '--api-key', other, '--rate-limit', '0.01', '--url-ttl-s', '7']);
    closers.push(async () => void (await limited.stop()));
    const get = () => request(`${limited.baseUrl}/sub/none`, { headers: { 'x-api-key': KEY } });
    const first = await get();
    await first.body.dump();
    const second = await get();
    await second.body.dump();
    expect([first.statusCode, second.statusCode]).toEqual([404, 429]);
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(90);

    // The other key has its own allowance.
    const seed = () => control(limited.baseUrl, 'POST', 'tasks', { kind: 'audio-separation', apiKey: other, taskMs: 0 }) as Promise<{ run_id: number }>;
    const [a, b] = [await seed(), await seed()];
    const before = Date.now();
    const lookup = await request(`${limited.baseUrl}/audio-separation-results`, {
      method: 'POST',
      headers: { 'x-api-key': other, 'content-type': 'application/json' },
      body: JSON.stringify({ run_ids: [a.run_id, b.run_id] }),
    });
    expect(lookup.statusCode).toBe(200);
    const runs = (await lookup.body.json()) as Record<string, { foreground_audio_url: string }>;
    const after = Date.now();
    const expires = Number(new URL(runs[String(a.run_id)]!.foreground_audio_url).searchParams.get('expires'));
    expect(expires).toBeGreaterThanOrEqual(before + 7000);
    expect(expires).toBeLessThanOrEqual(after + 7000);
  });

  it('--task-ms sets how long a task stays PENDING; bad values exit 2', async () => {
    const slow = await startCommandEmulator(['--api-key', KEY, '--task-ms', '3600000']);
    closers.push(async () => void (await slow.stop()));
    const created = await request(`${slow.baseUrl}/translated-tts`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hello', source_language: 'en-us', target_language: 'es-es' }),
    });
    const { task_id } = (await created.body.json()) as { task_id: string };
    const status = await cli(['task-status', 'translated-tts', task_id], { env: serviceEnv(slow.baseUrl) });
    expect(JSON.parse(status.stdout.toString())).toEqual({ status: 'PENDING', run_id: null });

    const [negative, word] = await Promise.all([cli(['emulator', '--task-ms=-1']), cli(['emulator', '--rate-limit', 'many'])]);
    expect(negative.code).toBe(2);
    expect(negative.stderr).toBe('rt-translate: --task-ms expects an integer >= 0 (got "-1").\n');
    expect(word.code).toBe(2);
    expect(word.stderr).toBe('rt-translate: --rate-limit expects a number >= 0 (got "many").\n');
  });
});
