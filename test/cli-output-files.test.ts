/**
 * Output files are whole or absent: a command that fails leaves no empty or half file under the
 * name it was given. A failure before the answer (a 500, a reset, a failed create or result
 * read) leaves no file at all; one midway keeps what arrived in `OUT.partial`, said on stderr
 * (a WAV there with exact sizes); a file that was there before is left as it was. The HTTP
 * commands against an emulator on loopback whose fault switches fail them, the realtime command
 * and `listen` against the emulator and the reference server; all in-process.
 */
import { describe, expect, it } from 'vitest';
import { EventEmitter, once } from 'node:events';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startEmulator } from '../lib/emulator/server.js';
import { synthesizeFlac, synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { runDub } from '../bin/commands/dub.js';
import { runSubtitles } from '../bin/commands/subtitles.js';
import { runTranscribe } from '../bin/commands/transcribe.js';
import { runTranslatedTts } from '../bin/commands/translated-tts.js';
import { runTts } from '../bin/commands/tts.js';
import { runCommand, type CommandEntry, type CommandResult } from './helpers/cli-io.js';
import { runInProcess, runSpoken, startInProcess } from './helpers/cli.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { spokenFixture } from './helpers/spoken.js';
import { startReferenceServer } from './reference-server/index.js';
import { sharedCliEmulator } from './http-test-helpers.js';

const KEY = 'sk-cli-output-files-71d3a0c58e';
const MEDIA = 'https://media.example.com/speech-en-24k.wav';
const TEXT = 'Streaming speech from the command line.';
const ENTRIES: Record<string, CommandEntry> = {
  tts: runTts,
  'translated-tts': runTranslatedTts,
  transcribe: runTranscribe,
  subtitles: runSubtitles,
  dub: runDub,
};
const fixture = loadSpeechFixture();

const shared = sharedCliEmulator(KEY);
const control = shared.control;
let cases = 0;

/** A fresh directory of its own for one case. */
async function caseDir(): Promise<string> {
  const path = join(shared.dir, `case-${++cases}`);
  await mkdir(path);
  return path;
}

/** `rt-translate ARGS` in-process against the emulator (tasks polled every 10 ms). */
function cli(args: string[]): Promise<CommandResult> {
  const [name, ...rest] = args;
  const poll = name === 'tts' ? [] : ['--poll-ms', '10'];
  return runCommand(ENTRIES[name!]!, [...rest, ...poll], { env: shared.env });
}

/** `text` as a regular expression that matches it literally. */
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function lines(text: string | Buffer): string[] {
  return text
    .toString()
    .split('\n')
    .filter((line) => line !== '');
}

/** Checks a PCM16 mono 24 kHz WAV's header sizes against its length and returns its data. */
function wavData(wav: Buffer): Buffer {
  expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
  expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
  expect(wav.toString('latin1', 36, 40)).toBe('data');
  expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
  return wav.subarray(44);
}

/** A port on 127.0.0.1 that nothing listens on: one a server just gave back. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await once(server.close(), 'close');
  return port;
}

describe('a failure before the answer leaves no file', () => {
  it.each([
    ['tts, 500 before the headers', ['tts', '--text', TEXT, '--language', 'en-us'], 'out.wav', { status: 500, path: '/tts-stream' }, /HTTP 500.*\[RTT_HTTP\]$/],
    [
      'tts, a reset before the headers',
      ['tts', '--text', TEXT, '--language', 'en-us'],
      'out.wav',
      { dropAfterBytes: 0, path: '/tts-stream' },
      /lost its connection.*\[RTT_CONNECTION\]$/,
    ],
    [
      'translated-tts, 500s on the result download',
      ['translated-tts', '--text', 'Good morning', '--from', 'en-us', '--to', 'es-es'],
      'out.flac',
      { status: 500, count: 3, path: '/tts-result/' },
      /HTTP 500.*\[RTT_HTTP\]$/,
    ],
    [
      'transcribe, a reset on the create',
      ['transcribe', '--url', MEDIA, '--language', 'en-us'],
      't.json',
      { dropAfterBytes: 0, path: '/transcribe', method: 'POST' },
      /\[RTT_CONNECTION\]$/,
    ],
    [
      'transcribe, resets on the result read',
      ['transcribe', '--url', MEDIA, '--language', 'en-us'],
      't.json',
      { dropAfterBytes: 0, count: 3, path: '/transcription-result/' },
      /\[RTT_CONNECTION\]$/,
    ],
    [
      'subtitles, 500s on the transcript',
      ['subtitles', '--url', MEDIA, '--from', 'en-us'],
      's.srt',
      { status: 500, count: 3, path: '/transcript/' },
      /HTTP 500.*\[RTT_HTTP\]$/,
    ],
  ])('%s: exit 1, neither OUT nor OUT.partial', async (_name, args, name, fault, message) => {
    const out = await caseDir();
    await control('POST', 'faults', fault);
    const result = await cli([...args, '-o', join(out, name)]);
    expect(result.code).toBe(1);
    expect(lines(result.stderr).at(-1)).toMatch(message);
    expect(await readdir(out)).toEqual([]);
    expect(result.stderr).not.toContain(KEY);
  });

  it('a file of that name from before is left as it was', async () => {
    const out = await caseDir();
    await writeFile(join(out, 'keep.wav'), 'earlier audio');
    await control('POST', 'faults', { dropAfterBytes: 0, path: '/tts-stream' });
    const result = await cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', join(out, 'keep.wav')]);
    expect(result.code).toBe(1);
    expect(await readdir(out)).toEqual(['keep.wav']);
    expect(await readFile(join(out, 'keep.wav'), 'utf8')).toBe('earlier audio');
  });

  it('an output that cannot be written is a usage error before any request, creating nothing', async () => {
    const out = await caseDir();
    await control('DELETE', 'requests');
    const result = await cli(['tts', '--text', TEXT, '--language', 'en-us', '-o', join(out, 'missing', 'x.wav')]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `rt-translate: cannot write -o ${join(out, 'missing', 'x.wav')}: the directory ${join(out, 'missing')} does not exist; ` +
        'create it, or pass --create-dirs. [RTT_FILE]\n',
    );
    expect((await control('GET', 'requests')).requests).toEqual([]);
    expect(await readdir(out)).toEqual([]);
  });
});

describe('a failure midway keeps what arrived in OUT.partial, never in OUT', () => {
  it('translated-tts --decode -o out.wav, the download cut for good: a WAV with exact sizes in out.wav.partial', async () => {
    const out = await caseDir();
    const translated = '[es-es] Good morning, dear listeners';
    const flac = synthesizeFlac(translated, { sampleRate: 24_000 });
    const cut = Math.floor(flac.length / 2);
    await control('POST', 'faults', [
      { dropAfterBytes: cut, path: '/tts-result/' },
      { status: 404, path: '/tts-result/' },
    ]);
    const target = join(out, 'out.wav');
    const result = await cli(['translated-tts', '--text', 'Good morning, dear listeners', '--from', 'en-us', '--to', 'es-es', '--decode', '-o', target]);
    expect(result.code).toBe(1);
    expect(result.stdout.toString()).toBe(`${translated}\n`);
    const kept = await readFile(`${target}.partial`);
    const data = wavData(kept);
    expect(lines(result.stderr).slice(-3)).toEqual([
      expect.stringMatching(/^rt-translate: audio of run \d+: the connection was lost; going on from byte \d+$/),
      `rt-translate: ${target} was not written: ${target}.partial holds the first ${(data.length / 48_000).toFixed(1)} s of audio received before the failure`,
      expect.stringMatching(/HTTP 404.*\[RTT_HTTP\]$/),
    ]);
    expect(await readdir(out)).toEqual(['out.wav.partial']);
    const pcm = synthesizeSpeechPcm(translated, { sampleRate: 24_000 });
    expect(data.length).toBeGreaterThan(0);
    expect(data.length).toBeLessThan(pcm.length);
    expect(data.equals(pcm.subarray(0, data.length))).toBe(true);
  });

  it('dub -o DIR --transcript srt, the audio download cut for good: DIR holds NAME.partial and the transcript, no NAME', async () => {
    const out = await caseDir();
    // The dubbed FLAC's frames are at most 2739 bytes: a cut at 20000 leaves whole frames before it.
    await control('POST', 'faults', [
      { dropAfterBytes: 20_000, path: '/_files/' },
      { status: 404, path: '/_files/' },
    ]);
    const result = await cli(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', out, '--transcript', 'srt']);
    expect(result.code).toBe(1);
    const runId = Number(/run (\d+)/.exec(result.stderr)![1]);
    const partial = join(out, `dub-${runId}-es-es.flac.partial`);
    expect(lines(result.stderr)).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^rt-translate: audio of run ${runId} \\(es-es\\) failed: .*HTTP 404.*\\[RTT_HTTP\\]; ${escapeRegExp(partial)} holds the first \\d+\\.\\d s of audio received$`,
        ),
      ),
    );
    expect((await readdir(out)).sort()).toEqual([`dub-${runId}-es-es.flac.partial`, `dub-${runId}-es-es.srt`]);
    // Cut after its last whole frame, which ends before the 20000th byte.
    const kept = await readFile(partial);
    expect(kept.length).toBeGreaterThan(20_000 - 2739);
    expect(kept.length).toBeLessThanOrEqual(20_000);
    expect(lines(result.stdout)).toEqual([join(out, `dub-${runId}-es-es.srt`)]);
  });
});

describe('the realtime command and listen', () => {
  const firstUtteranceOnly = expectedTranslation(fixture.pcm, fixture.utterances.slice(0, 1));

  it('a session that fails (exit 1) after part of the translation arrived: out.wav.partial with exact WAV sizes, no out.wav', async () => {
    const out = await caseDir();
    const billing = await startEmulator({ apiKeys: [KEY], creditSeconds: 4 });
    try {
      const target = join(out, 'out.wav');
      const result = await runInProcess(
        ['--from', 'en-us', '--to', 'es-es', '--realtime-url', billing.realtimeUrl, '--api-key', KEY, '--quiet-ms', '500', '-o', target],
        { stdin: fixture.pcm },
      );
      expect(result.code).toBe(1);
      expect(await readdir(out)).toEqual(['out.wav.partial']);
      expect(wavData(await readFile(`${target}.partial`)).equals(firstUtteranceOnly)).toBe(true);
      const stderr = lines(result.stderr);
      expect(stderr.at(-2)).toMatch(/\[RTT_BILLING\]$/);
      expect(stderr.at(-1)).toBe(
        `rt-translate: ${target} was not written: ${target}.partial holds the first ${(firstUtteranceOnly.length / 48_000).toFixed(1)} s of audio ` +
          'received before the failure',
      );
      expect(result.stderr).not.toContain(KEY);
    } finally {
      await billing.close();
    }
  });

  it('a session that never connects (exit 1): no file at all', async () => {
    const out = await caseDir();
    const port = await closedPort();
    const result = await runInProcess(
      ['--from', 'en-us', '--to', 'es-es', '--realtime-url', `ws://127.0.0.1:${port}`, '--api-key', KEY, '--no-reconnect', '-o', join(out, 'out.wav')],
      { stdin: fixture.pcm },
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/ECONNREFUSED/);
    expect(await readdir(out)).toEqual([]);
  });

  it('stopped with Ctrl-C (exit 0): out.wav with the translation of what was sent', async () => {
    const out = await caseDir();
    const target = join(out, 'out.wav');
    // The first utterance and the silence after it; Ctrl-C once its translation was said.
    const sent = fixture.pcm.subarray(0, 84_480 * 2);
    const stderr = new EventEmitter();
    const translated = once(stderr, 'translation');
    const run = startInProcess(['--from', 'en-us', '--to', 'es-es', '--quiet-ms', '500', '-o', target], {
      onStderr: (text) => void (text.includes('translation (es-es)') && stderr.emit('translation')),
    });
    run.stdin.write(sent);
    await translated;
    run.signal('SIGINT');
    const result = await run.result;
    expect(result.code).toBe(0);
    expect(await readdir(out)).toEqual(['out.wav']);
    expect(wavData(await readFile(target)).equals(expectedTranslation(sent, fixture.utterances.slice(0, 1)))).toBe(true);
  });

  it('a session that ends incomplete (exit 3): out.wav with what was answered', async () => {
    const out = await caseDir();
    const target = join(out, 'out.wav');
    const server = await startReferenceServer({ last: 'never' });
    try {
      const parts = spokenFixture().map((part) => ({
        audio: part.audio,
        when: (stderr: string) => (stderr.match(/^transcript \(/gm) ?? []).length >= part.afterTranscripts,
      }));
      const result = await runSpoken(
        ['--from', 'en-us', '--to', 'es-es', '--realtime-url', server.realtimeUrl, '--api-key', server.apiKey, '--stall-ms', '2000', '-o', target],
        parts,
      );
      expect(result.code, result.stderr).toBe(3);
      expect(await readdir(out)).toEqual(['out.wav']);
      expect(wavData(await readFile(target)).equals(server.sentAudio())).toBe(true);
    } finally {
      await server.close();
    }
  });

  it('listen -o that never connects (exit 1): no file at all', async () => {
    const out = await caseDir();
    const port = await closedPort();
    const result = await runInProcess(
      ['listen', '--realtime-url', `ws://127.0.0.1:${port}`, '--api-key', KEY, '--no-reconnect', '-o', join(out, 'lines.txt')],
      {
        stdin: fixture.pcm,
      },
    );
    expect(result.code).toBe(1);
    expect(await readdir(out)).toEqual([]);
  });
});
