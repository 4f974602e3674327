/**
 * Files and directories named on the command line: every command says the same words, with the
 * code RTT_FILE and exit status 2 before any traffic, for a missing input, a missing directory,
 * a directory where a file is expected and a file where a directory is, a path through a regular
 * file, and a permission denied; paths are named as typed (relative ones too). `--create-dirs`
 * creates what an output needs, on every command that writes files.
 *
 * In process against a listener that counts connections (none may be made), except permission
 * denied: the built command as a process, run as user nobody when the tests run as root (whom a
 * file's mode does not stop), so that the denial is real either way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI_PATH, cliEnv, runInProcess, startConnectionCounter, type CliResult, type ConnectionCounter } from './helpers/cli.js';
import { loadSpeechFixture } from './helpers/speech.js';

const KEY = 'sk-cli-file-errors-8c2e51b7aa';
const fixture = loadSpeechFixture();

let dir: string;
let counter: ConnectionCounter;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-files-'));
  counter = await startConnectionCounter();
  await writeFile(join(dir, 'speech.wav'), fixture.wav);
  await writeFile(join(dir, 'afile'), 'a regular file\n');
  await mkdir(join(dir, 'adir'));
});
afterAll(async () => {
  await counter?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The access flags that point each kind of command at the counting listener. */
function access(args: readonly string[]): string[] {
  const realtime = args[0] === undefined || args[0].startsWith('-') || args[0] === 'listen';
  return realtime ? ['--realtime-url', counter.url, '--api-key', KEY] : ['--base-url', counter.url.replace('ws:', 'http:'), '--api-key', KEY];
}

/** `rt-translate ARGS` in process, relative paths taken from the test's directory. */
function inDir(args: string[]): Promise<CliResult> {
  return runInProcess([...args, ...access(args)], { cwd: dir, stdin: fixture.wav });
}

function expectFileError(result: CliResult, message: string): void {
  expect(result.stderr).toBe(`rt-translate: ${message} [RTT_FILE]\n`);
  expect(result.code).toBe(2);
  expect(result.stdout.length).toBe(0);
  expect(counter.connections).toBe(0);
}

const TRANSLATE = ['--from', 'en-us', '--to', 'es-es'];
const TTS = ['tts', '--text', 'Hello there', '--language', 'en-us'];
const MEDIA = 'https://media.example.com/talk.mp4';

describe.concurrent('a missing input: one wording for every command', () => {
  it.each([
    { name: 'translate -i', args: [...TRANSLATE, '-i', 'nope.wav'], flag: '-i', path: 'nope.wav' },
    { name: 'listen -i', args: ['listen', '-i', 'nope.wav'], flag: '-i', path: 'nope.wav' },
    { name: 'transcribe -i', args: ['transcribe', '--language', 'en-us', '-i', 'nope.wav'], flag: '-i', path: 'nope.wav' },
    { name: 'voices create --file', args: ['voices', 'create', '--name', 'Me', '--gender', '1', '--file', 'nope.wav'], flag: '--file', path: 'nope.wav' },
    { name: 'translate-text --file', args: ['translate-text', ...TRANSLATE, '--file', 'texts/nope.txt'], flag: '--file', path: 'texts/nope.txt' },
    { name: 'tts --api-key-file', args: [...TTS, '-o', 'out.wav', '--api-key-file', 'nope.key'], flag: '--api-key-file', path: 'nope.key' },
  ])('$name', async ({ args, flag, path }) => {
    // --api-key-file and --api-key do not go together: that case names its own service.
    const result =
      flag === '--api-key-file' ? await runInProcess([...args, '--base-url', counter.url.replace('ws:', 'http:')], { cwd: dir }) : await inDir(args);
    expectFileError(result, `cannot read ${flag} ${path}: no such file.`);
  });
});

describe.concurrent('an output into a missing directory names the directory', () => {
  it.each([
    { name: 'translate -o', args: [...TRANSLATE, '-o', 'dubs/out.wav'], flag: '-o', path: 'dubs/out.wav' },
    {
      name: 'translate --events',
      args: [...TRANSLATE, '-o', 'out.wav', '--events', 'logs/today/events.jsonl'],
      flag: '--events',
      path: 'logs/today/events.jsonl',
    },
    { name: 'listen -o', args: ['listen', '-o', 'dubs/out.txt'], flag: '-o', path: 'dubs/out.txt' },
    { name: 'tts -o', args: [...TTS, '-o', 'dubs/out.wav'], flag: '-o', path: 'dubs/out.wav' },
    { name: 'translated-tts -o', args: ['translated-tts', '--text', 'Hello there', ...TRANSLATE, '-o', 'dubs/out.flac'], flag: '-o', path: 'dubs/out.flac' },
    { name: 'transcribe -o', args: ['transcribe', '--language', 'en-us', '--url', MEDIA, '-o', 'dubs/t.srt'], flag: '-o', path: 'dubs/t.srt' },
    { name: 'subtitles -o', args: ['subtitles', '--url', MEDIA, '--from', 'en-us', '-o', 'dubs/s.srt'], flag: '-o', path: 'dubs/s.srt' },
  ])('$name', async ({ args, flag, path }) => {
    const missing = path.slice(0, path.lastIndexOf('/'));
    expectFileError(await inDir(args), `cannot write ${flag} ${path}: the directory ${missing} does not exist; create it, or pass --create-dirs.`);
  });

  it.each([
    { name: 'dub -o DIR', args: ['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', 'dubs'], path: 'dubs' },
    { name: 'separate-results -o DIR', args: ['separate-results', '12', '-o', 'dubs'], path: 'dubs' },
    { name: 'subtitles -o DIR/', args: ['subtitles', '--url', MEDIA, '--from', 'en-us', '-o', 'subs/'], path: 'subs/' },
  ])('$name: no such directory', async ({ args, path }) => {
    expectFileError(await inDir(args), `cannot write into -o ${path}: no such directory; create it, or pass --create-dirs.`);
  });
});

describe.concurrent('a directory where a file is expected, and a file where a directory is', () => {
  it.each([
    { name: 'translate -o DIR', args: [...TRANSLATE, '-o', 'adir'], message: 'cannot write -o adir: it is a directory; -o takes a file name here.' },
    { name: 'listen -o DIR', args: ['listen', '-o', 'adir'], message: 'cannot write -o adir: it is a directory; -o takes a file name here.' },
    { name: 'tts -o DIR', args: [...TTS, '-o', 'adir'], message: 'cannot write -o adir: it is a directory; -o takes a file name here.' },
    { name: 'tts -o NAME/', args: [...TTS, '-o', 'new/'], message: 'cannot write -o new/: it names a directory; -o takes a file name here.' },
    { name: 'translate -i DIR', args: [...TRANSLATE, '-i', 'adir'], message: 'cannot read -i adir: it is a directory; -i takes a file here.' },
    {
      name: 'transcribe -i DIR',
      args: ['transcribe', '--language', 'en-us', '-i', 'adir'],
      message: 'cannot read -i adir: it is a directory; -i takes a file here.',
    },
    {
      name: 'dub -o FILE',
      args: ['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', 'afile'],
      message: 'cannot write into -o afile: it is a file; -o takes a directory here.',
    },
    {
      name: 'separate-results -o FILE',
      args: ['separate-results', '12', '-o', 'afile'],
      message: 'cannot write into -o afile: it is a file; -o takes a directory here.',
    },
  ])('$name', async ({ args, message }) => {
    expectFileError(await inDir(args), message);
  });

  it.each([
    { name: 'translate -o', args: [...TRANSLATE, '-o', 'afile/out.wav'], message: 'cannot write -o afile/out.wav: afile is a file, not a directory.' },
    { name: 'tts -o', args: [...TTS, '-o', 'afile/deeper/out.wav'], message: 'cannot write -o afile/deeper/out.wav: afile is a file, not a directory.' },
    { name: 'listen -i', args: ['listen', '-i', 'afile/in.wav'], message: 'cannot read -i afile/in.wav: afile is a file, not a directory.' },
    {
      name: 'dub -o',
      args: ['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', 'afile/dubs'],
      message: 'cannot write into -o afile/dubs: afile is a file, not a directory.',
    },
  ])('a path through a regular file: $name', async ({ args, message }) => {
    expectFileError(await inDir(args), message);
  });
});

describe('permission denied', () => {
  /** Runs the built command as a process; as user nobody when this runs as root. */
  function runAsUser(args: string[]): Promise<CliResult> {
    const asRoot = process.getuid?.() === 0;
    const child = spawn(process.execPath, [CLI_PATH, ...args], {
      cwd: dir,
      env: cliEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
    });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out), stderr }));
    });
  }

  it('an output in a read-only directory, an unreadable input, a read-only output directory: "permission denied" from each command', async () => {
    // Every other user may enter the test's directory and read what it needs there.
    await chmod(dir, 0o755);
    await mkdir(join(dir, 'locked'), { mode: 0o555 });
    await chmod(join(dir, 'locked'), 0o555);
    await writeFile(join(dir, 'secret.wav'), fixture.wav, { mode: 0o000 });
    await chmod(join(dir, 'secret.wav'), 0o000);
    const [tts, translate, dub] = await Promise.all([
      runAsUser([...TTS, '-o', 'locked/out.wav', ...access(TTS)]),
      runAsUser([...TRANSLATE, '-i', 'secret.wav', '-o', 'out.wav', ...access(TRANSLATE)]),
      runAsUser(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', 'locked', ...access(['dub'])]),
    ]);
    expectFileError(tts, 'cannot write -o locked/out.wav: permission denied.');
    expectFileError(translate, 'cannot read -i secret.wav: permission denied.');
    expectFileError(dub, 'cannot write into -o locked: permission denied.');
    expect(await readdir(join(dir, 'locked'))).toEqual([]);
  });
});

describe.concurrent('--create-dirs creates what an output needs (embedded emulator)', () => {
  it('tts -o a/b/out.wav, translate -o and --events into new directories, dub -o DIR, subtitles -o DIR/, separate -o DIR', async () => {
    const [tts, translate, dub, subtitles, separate] = await Promise.all([
      runInProcess([...TTS, '-o', 'made/tts/out.wav', '--create-dirs'], { cwd: dir }),
      runInProcess([...TRANSLATE, '--quiet-ms', '300', '-o', 'made/rt/out.wav', '--events', 'made/logs/events.jsonl', '--create-dirs'], {
        cwd: dir,
        stdin: fixture.pcm.subarray(0, 96_000),
      }),
      runInProcess(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '--poll-ms', '10', '-o', 'made/dubs', '--create-dirs'], { cwd: dir }),
      runInProcess(['subtitles', '--url', MEDIA, '--from', 'en-us', '--poll-ms', '10', '-o', 'made/subs/', '--create-dirs'], { cwd: dir }),
      runInProcess(['separate', '-i', 'speech.wav', '--poll-ms', '10', '-o', 'made/tracks', '--create-dirs'], { cwd: dir }),
    ]);
    for (const result of [tts, translate, dub, subtitles, separate]) expect(result.code).toBe(0);
    expect((await stat(join(dir, 'made/tts/out.wav'))).size).toBeGreaterThan(44);
    expect((await stat(join(dir, 'made/rt/out.wav'))).size).toBeGreaterThan(44);
    expect((await stat(join(dir, 'made/logs/events.jsonl'))).size).toBeGreaterThan(0);
    expect((await readdir(join(dir, 'made/dubs'))).length).toBeGreaterThan(0);
    expect(await readdir(join(dir, 'made/subs'))).toEqual([expect.stringMatching(/^sub-\d+-en-us\.srt$/)]);
    expect((await readdir(join(dir, 'made/tracks'))).sort()).toEqual([
      expect.stringMatching(/^background-\d+\.flac$/),
      expect.stringMatching(/^foreground-\d+\.flac$/),
    ]);
  });
});
