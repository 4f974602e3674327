/**
 * The embedded emulator of the commands (no service URL configured): each command starts one,
 * and it remembers what the commands before made in the user's state directory (here a
 * temporary `XDG_STATE_HOME` per test): a voice cloned by one command is used and deleted by the
 * next ones, run ids never repeat (two commands at once, in two processes, included), a task
 * left by `--no-wait` is waited for and fetched later, results are files on disk rather than
 * URLs that die with the command, `rt-translate emulator --reset` forgets it all. Stderr says
 * once that the emulator answers, louder when a key was given, and no key is ever written to disk.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { emulatorStateDir } from '../bin/embedded-emulator.js';
import { killAllChildren, runCli, runInProcess, type CliResult } from './helpers/cli.js';

import { VOICE_DESCRIPTION } from './http-test-helpers.js';
const FIXTURE = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const MEDIA = 'https://media.example.com/speech-en-24k.wav';
const NOTICE = 'rt-translate: using the embedded emulator: set RT_TRANSLATE_BASE_URL / RT_TRANSLATE_REALTIME_URL for the service';
const SECRET = 'sk-live-embedded-3f9c2a71d8e4';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});
afterAll(killAllChildren);

async function tempDir(name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `rt-translate-${name}-`));
  dirs.push(dir);
  return dir;
}

/** A fresh state home and `rt-translate ARGS` run in-process with it. */
async function stateHome(): Promise<{ home: string; state: string; run(args: string[], env?: Record<string, string>): Promise<CliResult> }> {
  const home = await tempDir('xdg');
  return {
    home,
    state: join(home, 'rt-translate', 'emulator'),
    run: (args, env = {}) => runInProcess(args, { env: { XDG_STATE_HOME: home, ...env } }),
  };
}

function lines(text: string | Buffer): string[] {
  return text
    .toString()
    .split('\n')
    .filter((line) => line !== '');
}

/** Every file under `dir`, with its path. */
async function filesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe('what one command made, the next ones use', () => {
  it('a cloned voice: --voice in a realtime and an HTTP command, then deleted; once deleted it is refused, saying what the emulator knows', async () => {
    const { state, run } = await stateHome();
    const created = await run(['voices', 'create', '--name', 'Me', '--gender', '1', '--file', FIXTURE]);
    expect(created.code, created.stderr).toBe(0);
    const id = /^created voice (\d+)\n$/.exec(created.stdout.toString())![1]!;

    const listed = await run(['voices']);
    expect(lines(listed.stdout).some((line) => line.startsWith(`${id}\tMe\t`))).toBe(true);
    const spoken = await run(['--from', 'en-us', '--to', 'es-es', '--voice', id, '-i', FIXTURE, '--text-only']);
    expect(spoken.code, spoken.stderr).toBe(0);
    const out = join(state, '..', 'tts.wav');
    const tts = await run(['tts', '--text', 'In my own voice.', '--language', 'en-us', '--voice', id, '-o', out]);
    expect(tts.code, tts.stderr).toBe(0);

    const deleted = await run(['voices', 'delete', id]);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout.toString()).toBe(`deleted voice ${id}\n`);
    const refused = await run(['--from', 'en-us', '--to', 'es-es', '--voice', id, '-i', FIXTURE, '--text-only']);
    expect(refused.code).toBe(1);
    expect(lines(refused.stderr).slice(-2)).toEqual([
      `rt-translate: the embedded emulator answered: it knows the voices, tasks and runs that commands made without a service URL (kept in ${state} until \`rt-translate emulator --reset\`), not those of a service or of a running \`rt-translate emulator\``,
      expect.stringMatching(
        new RegExp(
          `^rt-translate: The realtime service rejected the voice: Voice ${id} is not a cloned voice owned by this API key\\..*\\[RTT_VOICE_REJECTED\\]$`,
        ),
      ),
    ]);
    const again = await run(['voices', 'delete', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/the embedded emulator answered: it knows the voices/);
  });

  it('run ids never repeat: two dub -o DIR write dub-1001 and dub-1002, two more at once two others', async () => {
    const { run } = await stateHome();
    const out = await tempDir('dubbed');
    const dub = (url: string) => run(['dub', '--url', url, '--from', 'en-us', '--to', 'es-es', '-o', out]);
    expect((await dub(MEDIA)).code).toBe(0);
    expect((await dub('https://media.example.com/other.mp4')).code).toBe(0);
    const both = await Promise.all([dub('https://media.example.com/a.mp4'), dub('https://media.example.com/b.mp4')]);
    expect(both.map((r) => r.code)).toEqual([0, 0]);
    expect((await readdir(out)).sort()).toEqual(['dub-1001-es-es.flac', 'dub-1002-es-es.flac', 'dub-1003-es-es.flac', 'dub-1004-es-es.flac']);
  });

  it('two commands at once in two processes take different run ids', async () => {
    const home = await tempDir('xdg');
    const out = await tempDir('dubbed');
    const dub = (url: string) => runCli(['dub', '--url', url, '--from', 'en-us', '--to', 'es-es', '-o', out], { env: { XDG_STATE_HOME: home } });
    const results = await Promise.all([dub('https://media.example.com/a.mp4'), dub('https://media.example.com/b.mp4')]);
    expect(
      results.map((r) => r.code),
      results.map((r) => r.stderr).join('\n'),
    ).toEqual([0, 0]);
    expect((await readdir(out)).sort()).toEqual(['dub-1001-es-es.flac', 'dub-1002-es-es.flac']);
  });

  it('a task left by --no-wait: task-status --wait, then --run, in later commands', async () => {
    const { run } = await stateHome();
    const left = await run(['translated-tts', '--text', 'Good evening, everyone.', '--from', 'en-us', '--to', 'fr-fr', '--no-wait']);
    expect(left.code, left.stderr).toBe(0);
    const { task_id: taskId } = JSON.parse(left.stdout.toString()) as { task_id: string };
    const waited = await run(['task-status', 'translated-tts', taskId, '--wait']);
    expect(waited.code, waited.stderr).toBe(0);
    const { status, run_id: runId } = JSON.parse(waited.stdout.toString()) as { status: string; run_id: number };
    expect(status).toBe('SUCCESS');
    const out = join(await tempDir('later'), 'later.flac');
    const fetched = await run(['translated-tts', '--run', String(runId), '-o', out]);
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(fetched.stdout.toString()).toBe('[fr-fr] Good evening, everyone.\n');
    expect((await readFile(out)).subarray(0, 4).toString('latin1')).toBe('fLaC');
  });
});

describe('results are files, not URLs that die with the command', () => {
  it('dub without -o prints the path of its dubbed audio, the same bytes a later dub --run -o DIR downloads', async () => {
    const { state, run } = await stateHome();
    const result = await run(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es']);
    expect(result.code, result.stderr).toBe(0);
    const printed = JSON.parse(result.stdout.toString()) as { language: string; audioFile: string; videoUrl: null };
    expect(Object.keys(printed)).toEqual(['language', 'audioFile', 'videoUrl']);
    expect(printed.language).toBe('es-es');
    expect(printed.audioFile.startsWith(`${state}/files/`)).toBe(true);
    expect(printed.audioFile.endsWith('/run-1001-es-es.flac')).toBe(true);
    const bytes = await readFile(printed.audioFile);
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('fLaC');
    const out = await tempDir('dubbed');
    expect((await run(['dub', '--run', '1001', '--to', 'es-es', '-o', out])).code).toBe(0);
    expect((await readFile(join(out, 'dub-1001-es-es.flac'))).equals(bytes)).toBe(true);
  });

  it('voices design prints the paths of its previews', async () => {
    const { state, run } = await stateHome();
    const result = await run(['voices', 'design', '--text', 'Hello from a new voice.', '--description', VOICE_DESCRIPTION]);
    expect(result.code, result.stderr).toBe(0);
    const paths = lines(result.stdout);
    expect(paths).toHaveLength(3);
    for (const [i, path] of paths.entries()) {
      expect(path.startsWith(`${state}/files/`) && path.endsWith(`/run-1001-preview-${i + 1}.flac`), path).toBe(true);
      expect((await readFile(path)).subarray(0, 4).toString('latin1')).toBe('fLaC');
    }
  });

  it('against a running `rt-translate emulator` (no state directory of its own) the URLs are printed as they are', async () => {
    const { startInProcessEmulator } = await import('./helpers/cli.js');
    const running = await startInProcessEmulator(['--task-ms', '0']);
    try {
      const result = await runInProcess(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es'], {
        env: { RT_TRANSLATE_BASE_URL: running.baseUrl, RT_TRANSLATE_API_KEY: 'emulator-key' },
      });
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout.toString())).toMatchObject({
        language: 'es-es',
        audioUrl: expect.stringMatching(new RegExp(`^${running.baseUrl}/_files/`)),
      });
    } finally {
      await running.stop();
    }
  });
});

describe('rt-translate emulator --reset', () => {
  it('forgets it all: the voice, the runs (ids start again at 1001) and the files', async () => {
    const { state, run } = await stateHome();
    const id = /(\d+)/.exec((await run(['voices', 'create', '--name', 'Me', '--gender', '1', '--file', FIXTURE])).stdout.toString())![1]!;
    const dubbed = JSON.parse((await run(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es'])).stdout.toString()) as { audioFile: string };
    expect((await stat(dubbed.audioFile)).isFile()).toBe(true);

    const reset = await run(['emulator', '--reset']);
    expect(reset.code).toBe(0);
    expect(reset.stderr).toBe(`rt-translate emulator: forgot what the embedded emulator remembered: removed ${state}\n`);
    await expect(stat(state)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(lines((await run(['voices'])).stdout).some((line) => line.startsWith(`${id}\t`))).toBe(false);
    const next = JSON.parse((await run(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es'])).stdout.toString()) as { audioFile: string };
    expect(next.audioFile.endsWith('/run-1001-es-es.flac')).toBe(true);
    expect(next.audioFile).not.toBe(dubbed.audioFile);

    const nothing = await run(['emulator', '--reset']);
    expect(nothing.code).toBe(0);
    expect((await run(['emulator', '--reset'])).stderr).toBe(`rt-translate emulator: nothing to forget: ${state} does not exist\n`);
  });

  it('alone only, and only with a state directory: otherwise a usage error (exit 2)', async () => {
    const { run } = await stateHome();
    const withPort = await run(['emulator', '--reset', '--port', '0']);
    expect(withPort.code).toBe(2);
    expect(withPort.stderr).toBe("rt-translate: --reset goes alone: it forgets the embedded emulator's state and exits.\n");
    const nowhere = await runInProcess(['emulator', '--reset'], { env: { XDG_STATE_HOME: '', HOME: '' } });
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toBe(
      'rt-translate: --reset: the embedded emulator has no state directory to forget (neither XDG_STATE_HOME nor HOME is set to an absolute directory).\n',
    );
  });
});

describe('stderr says once that the embedded emulator answers', () => {
  it.each([
    ['an HTTP command', ['languages']],
    ['a realtime command', ['--from', 'en-us', '--to', 'de-de', '-i', FIXTURE, '--text-only']],
    ['a command asked for it (--emulator)', ['languages', '--emulator']],
  ])('%s: one line', async (_name, args) => {
    const { run } = await stateHome();
    const result = await run(args);
    expect(result.code, result.stderr).toBe(0);
    expect(lines(result.stderr).filter((line) => line.includes('embedded emulator'))).toEqual([NOTICE]);
  });

  it('louder when a key was given, naming where it came from, never the key', async () => {
    const { home, run } = await stateHome();
    const keyFile = join(home, 'key.txt');
    await writeFile(keyFile, `${SECRET}\n`);
    const cases: Array<[string, string[], Record<string, string>]> = [
      ['--api-key', ['languages', '--api-key', SECRET], {}],
      ['--api-key-file', ['languages', '--api-key-file', keyFile], {}],
      ['RT_TRANSLATE_API_KEY', ['languages'], { RT_TRANSLATE_API_KEY: SECRET }],
      ['RT_TRANSLATE_API_KEY', ['--from', 'en-us', '--to', 'de-de', '-i', FIXTURE, '--text-only'], { RT_TRANSLATE_API_KEY: SECRET }],
    ];
    for (const [source, args, env] of cases) {
      const result = await run(args, env);
      expect(result.code, result.stderr).toBe(0);
      expect(lines(result.stderr).filter((line) => line.includes('embedded emulator'))).toEqual([
        `rt-translate: warning: the API key from ${source} is not used: no service URL is configured, so the embedded emulator answers; ` +
          'set RT_TRANSLATE_BASE_URL / RT_TRANSLATE_REALTIME_URL for the service',
      ]);
      expect(result.stderr + result.stdout.toString()).not.toContain(SECRET);
    }
  });

  it('without a state directory it says it remembers nothing', async () => {
    const result = await runInProcess(['languages'], { env: { XDG_STATE_HOME: '', HOME: '' } });
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toEqual([
      'rt-translate: using the embedded emulator (it remembers nothing between commands: neither XDG_STATE_HOME nor HOME is set to an absolute directory): ' +
        'set RT_TRANSLATE_BASE_URL / RT_TRANSLATE_REALTIME_URL for the service',
    ]);
  });
});

describe('the state directory', () => {
  it.each([
    ['XDG_STATE_HOME', { XDG_STATE_HOME: '/x/state', HOME: '/home/u' }, '/x/state/rt-translate/emulator'],
    ['HOME without XDG_STATE_HOME', { HOME: '/home/u' }, '/home/u/.local/state/rt-translate/emulator'],
    [
      'HOME when XDG_STATE_HOME is relative (ignored, as the XDG rule says)',
      { XDG_STATE_HOME: 'state', HOME: '/home/u' },
      '/home/u/.local/state/rt-translate/emulator',
    ],
    ['neither', {}, undefined],
    ['a relative HOME', { HOME: 'u' }, undefined],
  ])('%s', (_name, env, expected) => {
    expect(emulatorStateDir(env)).toBe(expected);
  });

  it('under HOME when XDG_STATE_HOME is not set: a command writes nowhere else', async () => {
    const home = await tempDir('home');
    const result = await runInProcess(['voices', 'create', '--name', 'Me', '--gender', '1', '--file', FIXTURE], { env: { XDG_STATE_HOME: '', HOME: home } });
    expect(result.code, result.stderr).toBe(0);
    expect((await filesUnder(home)).map((path) => path.slice(home.length))).toEqual(['/.local/state/rt-translate/emulator/voices/300001.json']);
  });

  it('one that cannot be made is a usage error naming it, before any traffic (exit 2)', async () => {
    const home = await tempDir('xdg');
    const notADirectory = join(home, 'file');
    await writeFile(notADirectory, '');
    const result = await runInProcess(['languages'], { env: { XDG_STATE_HOME: notADirectory } });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `rt-translate: the embedded emulator cannot keep its state in ${notADirectory}/rt-translate/emulator (from XDG_STATE_HOME, else HOME): ENOTDIR; ` +
        'set XDG_STATE_HOME to a directory you can write.\n',
    );
  });

  it('holds no API key, whichever way it was given', async () => {
    const { home, state, run } = await stateHome();
    const keyFile = join(home, 'key.txt');
    await writeFile(keyFile, SECRET);
    await run(['voices', 'create', '--name', 'Me', '--gender', '1', '--file', FIXTURE, '--api-key', SECRET]);
    await run(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '--api-key-file', keyFile]);
    await run(['translated-tts', '--text', 'Hello there.', '--from', 'en-us', '--to', 'es-es', '--no-wait'], { RT_TRANSLATE_API_KEY: SECRET });
    await run(['--from', 'en-us', '--to', 'de-de', '-i', FIXTURE, '--text-only', '--api-key', SECRET]);
    const files = await filesUnder(state);
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) expect((await readFile(file)).includes(SECRET), file).toBe(false);
    // The key given never reached the emulator: the voice is owned by the emulator's own key.
    const voice = JSON.parse(await readFile(join(state, 'voices', '300001.json'), 'utf8')) as { owner: string };
    expect(voice.owner).toBe(`sha256:${createHash('sha256').update('emulator-key').digest('hex')}`);
  });
});
