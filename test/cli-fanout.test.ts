/**
 * The realtime command with several target languages (`--to es-es,fr-fr,de-de`), in process:
 * one output file per language (`-o 'out-{lang}.wav'`), `--events` lines with their `lang`,
 * `--stats` per language, the refusals made before any traffic (an `-o` without `{lang}`,
 * standard output, a language twice), and the exit status: 0 when every language completed,
 * 3 when some failed or ended incomplete (each named on stderr), 1 when all failed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulator, type EmulatorOptions } from '../lib/emulator/server.js';
import { fanoutProgressText, fanoutSummaryText, type FanoutProgress } from '../bin/fanout-report.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { runInProcess, startConnectionCounter } from './helpers/cli.js';
import { startSessionProxy } from './helpers/session-proxy.js';

const KEY = 'sk-cli-fanout-0b6f3d1e9a';
const fixture = loadSpeechFixture();
const expected = expectedTranslation(fixture.pcm, fixture.utterances);
const LANGS = ['es-es', 'fr-fr', 'de-de'];

let dir: string;
let wavIn: string;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-fanout-'));
  wavIn = join(dir, 'talk.wav');
  await writeFile(wavIn, fixture.wav);
});

afterAll(async () => {
  for (const close of closers.splice(0)) await close();
  await rm(dir, { recursive: true, force: true });
});

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

async function emulator(options: EmulatorOptions = {}): Promise<string> {
  const emu = await startEmulator({ apiKeys: [KEY], ...options });
  closers.push(() => emu.close());
  return emu.realtimeUrl;
}

/** A fresh directory for one test's outputs. */
async function outDir(name: string): Promise<string> {
  const out = join(dir, name);
  await rm(out, { recursive: true, force: true });
  return out;
}

/** The audio of a WAV file the command wrote (its header checked). */
async function wavAudio(path: string): Promise<Buffer> {
  const wav = await readFile(path);
  expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
  expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
  return wav.subarray(44);
}

describe.concurrent('rt-translate --to with several languages', () => {
  it("writes one file per language (-o 'out-{lang}.wav'), each the translation of the whole input; the speaker's words once", async () => {
    const out = await outDir('three');
    const result = await runInProcess(
      ['--from', 'en-us', '--to', LANGS.join(','), '-i', wavIn, '-o', join(out, 'talk-{lang}.wav'), '--quiet-ms', '400', '--create-dirs'],
      {},
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.length).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['talk-de-de.wav', 'talk-es-es.wav', 'talk-fr-fr.wav']);
    for (const lang of LANGS) expect((await wavAudio(join(out, `talk-${lang}.wav`))).equals(expected), lang).toBe(true);
    const stderr = lines(result.stderr);
    expect(stderr.filter((line) => line.startsWith('transcript (en-us): '))).toHaveLength(3);
    for (const lang of LANGS) {
      const translations = stderr.filter((line) => line.startsWith(`translation (${lang}): [${lang} translation of utterance`));
      expect(translations, lang).toHaveLength(3);
    }
    expect(stderr.at(-1)).toBe(
      'rt-translate: sent 8.3 s of audio; es-es received 4.7 s in 3 responses; fr-fr received 4.7 s in 3 responses; de-de received 4.7 s in 3 responses.',
    );
  });

  it('--events lines carry lang; --stats prints each language and ends the events with one stats line', async () => {
    const url = await emulator();
    const out = await outDir('events');
    const events = join(dir, 'fanout-events.jsonl');
    const result = await runInProcess(
      [
        '--from',
        'en-us',
        '--to',
        'es-es,ja-jp',
        '-i',
        wavIn,
        '-o',
        join(out, '{lang}.pcm'),
        '--events',
        events,
        '--stats',
        '--realtime-url',
        url,
        '--quiet-ms',
        '400',
        '--create-dirs',
      ],
      { env: { RT_TRANSLATE_API_KEY: KEY } },
    );
    expect(result.code, result.stderr).toBe(0);
    for (const lang of ['es-es', 'ja-jp']) expect((await readFile(join(out, `${lang}.pcm`))).equals(expected)).toBe(true);
    const logged = (await readFile(events, 'utf8'))
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const of = (lang: string) => logged.filter((e) => e.lang === lang).map((e) => e.type);
    for (const lang of ['es-es', 'ja-jp']) {
      const types = of(lang);
      expect(types[0]).toBe('target.added');
      expect(types.filter((t) => t === 'text.done')).toHaveLength(3);
      expect(types.slice(-2)).toEqual(['ended', 'target.done']);
      const audio = logged.filter((e) => e.lang === lang && e.type === 'audio.delta').reduce((sum, e) => sum + (e.bytes as number), 0);
      expect(audio).toBe(expected.length);
    }
    expect(logged.slice(0, -1).every((e) => typeof e.lang === 'string')).toBe(true);
    const stats = logged.at(-1) as { type: string; inputBytes: number; targets: Array<{ lang: string; outcome: string; responses: number }> };
    expect(stats.type).toBe('stats');
    expect(stats.inputBytes).toBe(fixture.pcm.length);
    expect(stats.targets.map((t) => [t.lang, t.outcome, t.responses])).toEqual([
      ['es-es', 'complete', 3],
      ['ja-jp', 'complete', 3],
    ]);
    for (const lang of ['es-es', 'ja-jp']) {
      expect(result.stderr).toContain(`rt-translate: ${lang}: 3 responses; 8.3 s of audio in, 4.7 s of translated audio out\n`);
      expect(result.stderr).toMatch(new RegExp(`^rt-translate: ${lang}: latency from the end of a sentence: transcript p50 `, 'm'));
    }
    expect(await readFile(events, 'utf8')).not.toContain(KEY);
  });

  it('a language whose voice is rejected is named, the others are written: exit 3', async () => {
    const out = await outDir('voice');
    const result = await runInProcess(
      ['--from', 'en-us', '--to', LANGS.join(','), '--voice', 'fr-fr=424242', '-i', wavIn, '-o', join(out, '{lang}.wav'), '--quiet-ms', '400', '--create-dirs'],
      {},
    );
    expect(result.code, result.stderr).toBe(3);
    expect(result.stderr).toMatch(/^rt-translate: fr-fr stopped: .*424242.* \[RTT_VOICE_REJECTED\]; the other languages go on\.$/m);
    expect(result.stderr).toMatch(/^rt-translate: fr-fr failed: .*424242.*\[RTT_VOICE_REJECTED\]$/m);
    // Nothing arrived for fr-fr: no file of it is left, not even a partial one.
    expect((await readdir(out)).sort()).toEqual(['de-de.wav', 'es-es.wav']);
    for (const lang of ['es-es', 'de-de']) expect((await wavAudio(join(out, `${lang}.wav`))).equals(expected)).toBe(true);
  });

  it('every language failing is exit 1, each named', async () => {
    const out = await outDir('all-fail');
    const result = await runInProcess(
      ['--from', 'en-us', '--to', 'es-es,fr-fr', '--voice', '424242', '-i', wavIn, '-o', join(out, '{lang}.wav'), '--create-dirs'],
      {},
    );
    expect(result.code, result.stderr).toBe(1);
    for (const lang of ['es-es', 'fr-fr']) expect(result.stderr).toMatch(new RegExp(`^rt-translate: ${lang} failed: .*\\[RTT_VOICE_REJECTED\\]$`, 'm'));
    expect(await readdir(out).catch(() => [])).toEqual([]);
  });

  it('a language that ends without every answer is named, the others complete: exit 3, what arrived written', async () => {
    const proxy = await startSessionProxy(await emulator(), { unfinished: { 'fr-fr': 3 } });
    closers.push(() => proxy.close());
    const out = await outDir('incomplete');
    const result = await runInProcess(
      [
        '--from',
        'en-us',
        '--to',
        'es-es,fr-fr',
        '-i',
        wavIn,
        '-o',
        join(out, '{lang}.pcm'),
        '--realtime-url',
        proxy.realtimeUrl,
        '--quiet-ms',
        '300',
        '--stall-ms',
        '300',
        '--create-dirs',
      ],
      { env: { RT_TRANSLATE_API_KEY: KEY } },
    );
    expect(result.code, result.stderr).toBe(3);
    expect(result.stderr).toMatch(/^rt-translate: fr-fr ended incomplete \(response-stalled\): \d+\.\d s of speech unanswered$/m);
    expect(result.stderr).not.toMatch(/es-es ended incomplete|es-es failed/);
    expect((await readFile(join(out, 'es-es.pcm'))).equals(expected)).toBe(true);
    // fr-fr's file holds what arrived: the third answer's audio without its end.
    expect((await readFile(join(out, 'fr-fr.pcm'))).equals(proxy.sent('fr-fr'))).toBe(true);
    // The summary, then each language that did not complete, last.
    expect(lines(result.stderr).slice(-2)).toEqual([
      'rt-translate: sent 8.3 s of audio; es-es received 4.7 s in 3 responses; fr-fr received 4.7 s in 2 responses (incomplete).',
      expect.stringMatching(/^rt-translate: fr-fr ended incomplete/),
    ]);
  });

  it('--text-only needs no -o: the translations of every language on stderr', async () => {
    const result = await runInProcess(['--from', 'en-us', '--to', 'es-es,de-de', '--text-only', '--quiet-ms', '400'], { stdin: fixture.pcm });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.length).toBe(0);
    for (const lang of ['es-es', 'de-de']) expect(lines(result.stderr).filter((line) => line.startsWith(`translation (${lang}): `))).toHaveLength(3);
    expect(lines(result.stderr).at(-1)).toBe('rt-translate: sent 8.3 s of audio; es-es 3 responses; de-de 3 responses.');
  });

  it.each([
    ['an output without {lang}', ['-o', 'out.wav'], /-o must contain \{lang\}, replaced by each language .*got -o out\.wav\.$/],
    ['no output (standard output)', [], /not to standard output: pass -o with \{lang\} in the name/],
    ["'-o -'", ['-o', '-'], /not to standard output/],
    ['a language twice', ['-o', '{lang}.wav', '--to', 'es-es,ES-ES'], /--to names es-es twice\.$/],
    ['an unknown language', ['-o', '{lang}.wav', '--to', 'es-es,xx-xx'], /Invalid --to: expected one of the realtime language tags/],
    ['a voice for a language not in --to', ['-o', '{lang}.wav', '--voice', 'it-it=5'], /Invalid --voice/],
    ['a voice for a language not asked for', ['-o', '{lang}.wav', '--voice', 'ja-jp=5'], /--voice names ja-jp, which is not in --to \(es-es,fr-fr\)\.$/],
    ['a bad voice id', ['-o', '{lang}.wav', '--voice', 'es-es=0'], /--voice es-es= expects an integer >= 1/],
  ])('%s is refused before any traffic (exit 2), nothing written', async (_name, extra) => {
    const counter = await startConnectionCounter();
    closers.push(() => counter.close());
    const out = await outDir(`refused-${_name.replace(/\W+/g, '-')}`);
    const args = ['--from', 'en-us', '--to', 'es-es,fr-fr', '-i', wavIn, '--realtime-url', counter.url, ...extra];
    const withDir = args.map((arg, i) => (args[i - 1] === '-o' && arg !== '-' ? join(out, arg) : arg));
    const result = await runInProcess(withDir, { env: { RT_TRANSLATE_API_KEY: KEY } });
    expect(result.code, result.stderr).toBe(2);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr).toMatch(/^rt-translate: /);
    expect(counter.connections).toBe(0);
    expect(await readdir(out).catch(() => [])).toEqual([]);
  });
});

describe('the fan-out progress line', () => {
  const progress = (over: Partial<FanoutProgress>): FanoutProgress => ({
    phase: 'translating',
    phaseMs: 2500,
    sentBytes: 96_000,
    textOnly: false,
    targets: [
      { lang: 'es-es', receivedBytes: 48_000, responses: 1, outcome: undefined },
      { lang: 'fr-fr', receivedBytes: 24_000, responses: 1, outcome: undefined },
      { lang: 'de-de', receivedBytes: 0, responses: 0, outcome: 'failed' },
    ],
    ...over,
  });

  it.each([
    ['connecting', 'connecting 3 sessions: 2 s'],
    ['starting', 'the service is starting: 2 s'],
    ['translating', 'sent 2.0 s; es-es 1.0 s, fr-fr 0.5 s, de-de failed'],
    ['finishing', 'input done: sent 2.0 s; waiting for the last translations: es-es 1.0 s, fr-fr 0.5 s, de-de failed, 2 s'],
    ['stopping', 'stopping (Ctrl-C again to abort): sent 2.0 s; waiting for the last translations: es-es 1.0 s, fr-fr 0.5 s, de-de failed, 2 s'],
  ] as const)('%s: %s', (phase, text) => {
    expect(fanoutProgressText(progress({ phase }))).toBe(text);
  });

  it('text only counts responses; the summary names what did not complete', () => {
    expect(fanoutProgressText(progress({ textOnly: true }))).toBe('sent 2.0 s; es-es 1 response, fr-fr 1 response, de-de failed');
    const done = progress({});
    done.targets[0]!.outcome = 'complete';
    done.targets[1]!.outcome = 'incomplete';
    expect(fanoutSummaryText(done)).toBe(
      'sent 2.0 s of audio; es-es received 1.0 s in 1 response; fr-fr received 0.5 s in 1 response (incomplete); de-de received 0.0 s in 0 responses (failed).',
    );
  });
});
