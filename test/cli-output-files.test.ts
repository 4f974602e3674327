/**
 * Output files are whole or absent: a command that fails leaves no empty or half file under the
 * name it was given. A failure before the answer (a 500, a reset, a failed create or result
 * read) leaves no file at all; one midway keeps what arrived in `OUT.partial`, said on stderr
 * (a WAV there with exact sizes); a file that was there before is left as it was. The HTTP
 * commands, in-process against an emulator on loopback whose fault switches fail them.
 */
import { describe, expect, it } from 'vitest';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { synthesizeFlac, synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { runDub } from '../bin/commands/dub.js';
import { runSubtitles } from '../bin/commands/subtitles.js';
import { runTranscribe } from '../bin/commands/transcribe.js';
import { runTranslatedTts } from '../bin/commands/translated-tts.js';
import { runTts } from '../bin/commands/tts.js';
import { runCommand, type CommandEntry, type CommandResult } from './helpers/cli-io.js';
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

function lines(text: string | Buffer): string[] {
  return text.toString().split('\n').filter((line) => line !== '');
}

/** Checks a PCM16 mono 24 kHz WAV's header sizes against its length and returns its data. */
function wavData(wav: Buffer): Buffer {
  expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
  expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
  expect(wav.toString('latin1', 36, 40)).toBe('data');
  expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
  return wav.subarray(44);
}

describe('a failure before the answer leaves no file', () => {
  it.each([
    ['tts, 500 before the headers', ['tts', '--text', TEXT, '--language', 'en-us'], 'out.wav', { status: 500, path: '/tts-stream' }, /HTTP 500.*\[RTT_HTTP\]$/],
    ['tts, a reset before the headers', ['tts', '--text', TEXT, '--language', 'en-us'], 'out.wav', { dropAfterBytes: 0, path: '/tts-stream' }, /lost its connection.*\[RTT_CONNECTION\]$/],
    [
      'translated-tts, 500s on the result download',
      ['translated-tts', '--text', 'Good morning', '--from', 'en-us', '--to', 'es-es'],
      'out.flac',
      { status: 500, count: 3, path: '/tts-result/' },
      /HTTP 500.*\[RTT_HTTP\]$/,
    ],
    ['transcribe, a reset on the create', ['transcribe', '--url', MEDIA, '--language', 'en-us'], 't.json', { dropAfterBytes: 0, path: '/transcribe', method: 'POST' }, /\[RTT_CONNECTION\]$/],
    [
      'transcribe, resets on the result read',
      ['transcribe', '--url', MEDIA, '--language', 'en-us'],
      't.json',
      { dropAfterBytes: 0, count: 3, path: '/transcription-result/' },
      /\[RTT_CONNECTION\]$/,
    ],
    ['subtitles, 500s on the transcript', ['subtitles', '--url', MEDIA, '--from', 'en-us'], 's.srt', { status: 500, count: 3, path: '/transcript/' }, /HTTP 500.*\[RTT_HTTP\]$/],
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
    expect(result.stderr).toBe(`rt-translate: cannot write output ${join(out, 'missing', 'x.wav')}: ENOENT\n`);
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
    expect(lines(result.stderr).slice(-3)).toEqual([
      expect.stringMatching(/^rt-translate: audio of run \d+: the connection was lost; going on from byte \d+$/),
      `rt-translate: ${target} was not written: the ${kept.length} bytes received are kept in ${target}.partial ` +
        '(a WAV file whose header has the exact sizes of what it holds)',
      expect.stringMatching(/HTTP 404.*\[RTT_HTTP\]$/),
    ]);
    expect(await readdir(out)).toEqual(['out.wav.partial']);
    const data = wavData(kept);
    const pcm = synthesizeSpeechPcm(translated, { sampleRate: 24_000 });
    expect(data.length).toBeGreaterThan(0);
    expect(data.length).toBeLessThan(pcm.length);
    expect(data.equals(pcm.subarray(0, data.length))).toBe(true);
  });

  it('dub -o DIR --transcript srt, the audio download cut for good: DIR holds NAME.partial and the transcript, no NAME', async () => {
    const out = await caseDir();
    await control('POST', 'faults', [
      { dropAfterBytes: 2000, path: '/_files/' },
      { status: 404, path: '/_files/' },
    ]);
    const result = await cli(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', out, '--transcript', 'srt']);
    expect(result.code).toBe(1);
    const runId = Number(/run (\d+)/.exec(result.stderr)![1]);
    const partial = join(out, `dub-${runId}-es-es.flac.partial`);
    expect(lines(result.stderr)).toContainEqual(
      expect.stringMatching(new RegExp(`^rt-translate: audio of run ${runId} \\(es-es\\) failed: .*HTTP 404.*\\[RTT_HTTP\\]; the 2000 bytes received are kept in ${partial.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)),
    );
    expect((await readdir(out)).sort()).toEqual([`dub-${runId}-es-es.flac.partial`, `dub-${runId}-es-es.srt`]);
    expect((await readFile(partial)).length).toBe(2000);
    expect(lines(result.stdout)).toEqual([join(out, `dub-${runId}-es-es.srt`)]);
  });
});
