/**
 * A new user's careless hour, replayed: the rough edges a first run through the README and every
 * command met, each tried again the way the user tried it (the built command as a process, the
 * embedded emulator unless the case needs another server) and checked for what the user should
 * have been told. Every case here once ended in a silent success, a raw errno, a dead URL, a
 * forgotten voice or a 15 s wait on a task of a second or two. The depth of each behaviour is
 * tested where it is built (`cli-not-audio`, `cli-progress`, `cli-interrupt`, `cli-file-errors`,
 * `field-limits`, `emulator-pacing`, `embedded-emulator`, `cli-deprecations`); this file keeps the
 * hour whole.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watch, statSync } from 'node:fs';
import { collect, killAllChildren, runCli, spawnCli, startCliEmulator, type CliResult } from './helpers/cli.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { waitFor } from './helpers/wait-for.js';
import { control, emulator } from './http-test-helpers.js';
import type { RunningEmulator } from '../lib/emulator/server.js';

const fixture = loadSpeechFixture();
const README = new URL('../README.md', import.meta.url);
const MEDIA = 'https://media.example.com/talk.mp4';
const RT = ['--from', 'en-us', '--to', 'es-es'];
const SPEECH = 'The gate for the flight to Madrid has changed; please go to gate twelve now.';
const DESCRIPTION = 'A warm, calm narrator in her forties, speaking slowly and clearly, with a gentle smile in her voice and no hurry.';
const WORDS = /\b(ENOENT|EISDIR|EACCES|ENOTDIR)\b/;

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-careless-'));
  await writeFile(join(dir, 'notes.txt'), 'Notes for Monday: book the interpreters, send the agenda, check the microphones.\n');
  await writeFile(join(dir, 'README.md'), await readFile(README));
  await writeFile(join(dir, 'one.bin'), Buffer.from([0x2a]));
  await writeFile(join(dir, 'empty.pcm'), Buffer.alloc(0));
  await writeFile(join(dir, 'speech.wav'), fixture.wav);
});

afterAll(async () => {
  await killAllChildren();
  await rm(dir, { recursive: true, force: true });
});

/** `rt-translate ARGS` in the scratch directory, as typed at a shell, on the embedded emulator. */
function run(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCli(args, { cwd: dir, env });
}

function lines(result: CliResult): string[] {
  return result.stderr.split('\n').filter((line) => line !== '');
}

describe('a new user, careless for an hour', () => {
  it('1. what is not audio is refused (exit 2) and named, and nothing is written', async () => {
    const [text, readme, oneByte, empty, upload] = await Promise.all([
      run([...RT, '-i', 'notes.txt', '-o', 'a.wav']),
      run([...RT, '-i', 'README.md', '-o', 'b.wav']),
      run([...RT, '-i', 'one.bin', '-o', 'c.wav']),
      run([...RT, '-i', 'empty.pcm', '-o', 'd.wav']),
      run(['transcribe', '-i', 'notes.txt', '--language', 'en-us']),
    ]);
    for (const result of [text, readme, oneByte, empty, upload]) expect(result.code).toBe(2);
    expect(text.stderr).toMatch(/^rt-translate: notes\.txt looks like text, not audio: .* say so with -f s16le .*\[RTT_INPUT\]\n$/);
    expect(readme.stderr).toMatch(/^rt-translate: README\.md looks like text, not audio/);
    expect(oneByte.stderr).toBe('rt-translate: No audio in one.bin: it holds 1 byte, less than one sample frame (2 bytes of s16le mono). [RTT_INPUT]\n');
    expect(empty.stderr).toBe('rt-translate: No audio in empty.pcm: it holds nothing. [RTT_INPUT]\n');
    expect(upload.stderr).toMatch(/^rt-translate: -i notes\.txt looks like text, not a recording the service can read/);
    for (const name of ['a.wav', 'b.wav', 'c.wav', 'd.wav']) await expect(stat(join(dir, name))).rejects.toThrow();
  });

  it('2. a long synthesis says how far it is; a text past the service limit is refused before any request', async () => {
    const text = SPEECH.repeat(4);
    const [long, tooLong] = await Promise.all([
      run(['tts', '--text', text, '--language', 'en-us', '--progress', '-o', 'long.wav']),
      run(['tts', '--text', 'a'.repeat(3001), '--language', 'en-us', '-o', 'too-long.wav']),
    ]);
    expect(long.code).toBe(0);
    expect(long.stderr).toMatch(/^receiving the audio: /m);
    const seconds = ((await stat(join(dir, 'long.wav'))).size - 44) / 48_000;
    expect(long.stderr).toContain(`rt-translate: received the audio into long.wav (`);
    expect(long.stderr).toContain(`, ${seconds.toFixed(1)} s of audio) in `);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toBe('rt-translate: --text expects a string of 3 to 3000 characters (got a string of 3001 characters).\n');
  });

  describe('against a server that stalls a synthesis midway', () => {
    let server: RunningEmulator;
    beforeAll(async () => {
      server = await emulator({ apiKeys: ['sk-careless-hour-3f9a2c'] });
    });
    afterAll(() => server.close());

    it('3. Ctrl-C leaves a valid WAV named .partial, its length said, exit 130', async () => {
      await control(server, 'POST', 'faults', { stallAfterBytes: 30_000, stallMs: 600_000, path: '/tts-stream' });
      const target = join(dir, 'interrupted.wav');
      const child = spawnCli(['tts', '--text', SPEECH, '--language', 'en-us', '-o', target], {
        RT_TRANSLATE_BASE_URL: server.baseUrl,
        RT_TRANSLATE_API_KEY: 'sk-careless-hour-3f9a2c',
      });
      child.stdin?.end();
      const ended = collect(child);
      const watcher = watch(dir);
      try {
        await waitFor(() => (statSync(`${target}.partial`, { throwIfNoEntry: false })?.size ?? 0) >= 30_000, { onEvent: [watcher, 'change', 'rename'] });
      } finally {
        watcher.close();
      }
      child.kill('SIGINT');
      const result = await ended;
      expect(result.code).toBe(130);
      const wav = await readFile(`${target}.partial`);
      expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
      expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
      expect(lines(result).at(-1)).toBe(`rt-translate: interrupted: ${target}.partial holds the first ${((wav.length - 44) / 48_000).toFixed(1)} s of audio`);
      await expect(stat(target)).rejects.toThrow();
    });
  });

  it('4. a dub against `rt-translate emulator` polls at the emulator pace: a couple of status reads, not a 15 s wait', async () => {
    const standalone = await startCliEmulator(['--task-ms', '1500']);
    try {
      const env = { RT_TRANSLATE_BASE_URL: standalone.baseUrl, RT_TRANSLATE_API_KEY: 'emulator-key' };
      const result = await run(['dub', '--url', MEDIA, ...RT, '-o', 'paced', '--create-dirs', '--progress'], env);
      expect(result.code).toBe(0);
      // Read at once (PENDING, ready in about 1.5 s), then when the emulator said: the service's schedule would read once, after 15 s.
      expect(result.stderr).toMatch(/^waiting for the dub task \(submitted, checking now\), 0 s$/m);
      const { requests } = (await (await fetch(`${standalone.baseUrl}/_emulator/requests`)).json()) as { requests: Array<{ method: string; path: string }> };
      const reads = requests.filter((r) => r.method === 'GET' && /^\/dub\/[^/]+$/.test(r.path));
      expect(reads.length).toBeGreaterThanOrEqual(2);
      expect(reads.length).toBeLessThanOrEqual(3);
      expect(await readdir(join(dir, 'paced'))).toEqual([expect.stringMatching(/^dub-\d+-es-es\.flac$/)]);
    } finally {
      await standalone.stop();
    }
  });

  // Six commands, each starting the embedded emulator: the bound is for a hang, not a speed (a
  // loaded machine took more than 30 s).
  it('5. the embedded emulator remembers a voice across commands, writes files (previews, dubs) instead of dead URLs, never repeats a run id', async () => {
    const created = await run(['voices', 'create', '--name', 'Ann', '--gender', '2', '--file', 'speech.wav']);
    expect(created.code).toBe(0);
    const id = /^created voice (\d+)\n$/.exec(created.stdout.toString())?.[1];
    expect(id).toBeDefined();
    const spoken = await run(['tts', '--text', SPEECH, '--language', 'en-us', '--voice', id!, '-o', 'ann.wav']);
    expect(spoken.code).toBe(0);
    const [first, second] = [await run(['dub', '--url', MEDIA, ...RT, '-o', 'dubs', '--create-dirs']), await run(['dub', '--url', MEDIA, ...RT, '-o', 'dubs'])];
    const designed = await run(['voices', 'design', '--text', SPEECH, '--description', DESCRIPTION]);
    expect(designed.code).toBe(0);
    const previews = designed.stdout.toString().trim().split('\n');
    expect(previews).toHaveLength(3);
    for (const preview of previews) expect((await stat(preview)).size).toBeGreaterThan(44);
    const deleted = await run(['voices', 'delete', id!]);
    expect(deleted.stdout.toString()).toBe(`deleted voice ${id}\n`);
    for (const result of [first, second, deleted]) expect(result.code).toBe(0);
    const files = await readdir(join(dir, 'dubs'));
    expect(files).toHaveLength(2);
    for (const result of [created, spoken, first, second, designed, deleted]) {
      expect(result.stdout.toString() + result.stderr).not.toMatch(/https?:\/\/127\.0\.0\.1/);
      expect(lines(result).filter((line) => line.startsWith('rt-translate: using the embedded emulator'))).toHaveLength(1);
    }
  }, 120_000);

  it('6. a key, a voice or a language the embedded emulator cannot honour is said, not ignored', async () => {
    const [key, voice, language] = await Promise.all([
      run(['tts', '--text', SPEECH, '--language', 'en-us', '--api-key', 'sk-meant-for-the-service', '-o', 'key.wav']),
      run(['tts', '--text', SPEECH, '--language', 'en-us', '--voice', '42', '-o', 'voice.wav']),
      run(['listen', '--language', 'xx-yy', '-i', 'speech.wav']),
    ]);
    expect(key.code).toBe(0);
    expect(key.stderr).toMatch(
      /^rt-translate: warning: the API key from --api-key is not used: no service URL is configured, so the embedded emulator answers/m,
    );
    expect(key.stderr).not.toContain('sk-meant-for-the-service');
    expect(voice.code).toBe(1);
    expect(voice.stderr).toMatch(/--voice: .*voice 42 is not a voice of this API key/);
    expect(language.code).toBe(1);
    expect(language.stderr).toMatch(/Unsupported language "xx-yy"/);
  });

  it('7. files and directories get one wording and one code, never a raw errno', async () => {
    const results = await Promise.all([
      run(['tts', '--text', SPEECH, '--language', 'en-us', '-o', 'nodir/out.wav']),
      run(['dub', '--url', MEDIA, ...RT, '-o', 'no-dubs']),
      run(['tts', '--text', SPEECH, '--language', 'en-us', '-o', tmpdir()]),
      run([...RT, '-i', 'nope.wav']),
      run(['transcribe', '-i', 'nope.wav', '--language', 'en-us']),
    ]);
    const [noDir, noDubs, isDir, rtMissing, uploadMissing] = results;
    expect(noDir!.stderr).toBe(
      'rt-translate: cannot write -o nodir/out.wav: the directory nodir does not exist; create it, or pass --create-dirs. [RTT_FILE]\n',
    );
    expect(noDubs!.stderr).toBe('rt-translate: cannot write into -o no-dubs: no such directory; create it, or pass --create-dirs. [RTT_FILE]\n');
    expect(isDir!.stderr).toBe(`rt-translate: cannot write -o ${tmpdir()}: it is a directory; -o takes a file name here. [RTT_FILE]\n`);
    expect(rtMissing!.stderr).toBe('rt-translate: cannot read -i nope.wav: no such file. [RTT_FILE]\n');
    expect(uploadMissing!.stderr).toBe(rtMissing!.stderr);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stderr).not.toMatch(WORDS);
    }
  });

  it('8. a deprecated flag is marked in --help and said once in plain words, with no Node warning', async () => {
    const [help, used] = await Promise.all([run(['translate-text', '--help']), run(['translate-text', '--stream', ...RT, SPEECH])]);
    expect(help.stdout.toString()).toMatch(/--stream +deprecated/);
    expect(used.code).toBe(0);
    expect(lines(used).filter((line) => line.includes('deprecated'))).toEqual([
      'rt-translate: --stream is deprecated by the service; without --stream, translate-text gives the same translation through a translation task.',
    ]);
    expect(used.stderr).not.toMatch(/DeprecationWarning|--trace-deprecation/);
  });

  it('10. the gaps: a command for separation, per-command help hints, suggestions, one name for deleting a voice', async () => {
    const [separate, flag, command, alias, helps] = await Promise.all([
      run(['separate', '-i', 'speech.wav', '-o', 'tracks', '--create-dirs']),
      run(['tts', '--bogus']),
      run(['translat']),
      run(['delete-voice', '999999']),
      Promise.all(['separate', 'separate-results', 'task-status'].map((name) => run([name, '--help']))),
    ]);
    expect(separate.code).toBe(0);
    expect((await readdir(join(dir, 'tracks'))).sort()).toEqual([
      expect.stringMatching(/^background-\d+\.flac$/),
      expect.stringMatching(/^foreground-\d+\.flac$/),
    ]);
    expect(flag.stderr).toBe("rt-translate: Unknown option '--bogus'. See rt-translate tts --help.\n");
    expect(command.stderr).toBe("rt-translate: unknown command 'translat'. Did you mean translate? See rt-translate --help.\n");
    expect(alias.stderr).toMatch(/delete-voice is deprecated.*voices delete/);
    for (const help of helps) expect(help.stdout.toString()).not.toMatch(/\ba audio/);
  });
});
