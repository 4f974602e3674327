/**
 * The README's first screen, run as a new user would: its commands (as processes, from a fresh
 * directory holding the repository's examples) and its library example (as a program of its
 * own, importing the built package by name). Needs `npm run build` (npm test does it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { killAllChildren, runCli, runInProcess } from './helpers/cli.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const readme = await readFile(join(root, 'README.md'), 'utf8');
const startHere = readme.slice(readme.indexOf('## Start here'), readme.indexOf('## API at a glance'));
const troubleshooting = readme.slice(readme.indexOf('## Troubleshooting'), readme.indexOf('## Performance'));

/** Splits a shell command line: words, and double-quoted strings as one word. */
function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

/** The `node dist/bin/rt-translate.js ...` command lines of a section, as argument lists. */
function commands(section: string): string[][] {
  return [...section.matchAll(/^node dist\/bin\/rt-translate\.js (.+)$/gm)].map((m) => words(m[1]!));
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-readme-'));
  await symlink(join(root, 'examples'), join(dir, 'examples'), 'dir');
  await mkdir(join(dir, 'node_modules'));
  await symlink(root, join(dir, 'node_modules', 'rt-translate'), 'dir');
});
afterAll(async () => {
  await killAllChildren();
  await rm(dir, { recursive: true, force: true });
});

function isWav(bytes: Buffer): boolean {
  return bytes.length > 44 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WAVE';
}

describe.concurrent('README: Start here', () => {
  it('the commands to translate a file and to stream text to speech work as written, on the embedded emulator', async () => {
    const lines = commands(startHere);
    expect(lines.map((args) => args[0])).toEqual(['--from', 'tts']);
    const results = await Promise.all(lines.map((args) => runCli(args, { cwd: dir })));
    for (const [i, result] of results.entries()) {
      expect(result.stderr).not.toMatch(/error|warning/i);
      expect(result.code).toBe(0);
      const args = lines[i]!;
      expect(isWav(await readFile(join(dir, args[args.indexOf('-o') + 1]!)))).toBe(true);
    }
  });

  it('the library example runs as written: a WAV file translated into another', async () => {
    const code = /\*\*From your code\*\*[^\n]*\n\n```ts\n([\s\S]*?)```/.exec(startHere)?.[1];
    expect(code).toBeDefined();
    await copyFile(join(root, 'test', 'fixtures', 'speech-en-24k.wav'), join(dir, 'talk.wav'));
    await writeFile(join(dir, 'example.mjs'), code!);
    const { stdout } = await promisify(execFile)(process.execPath, ['example.mjs'], { cwd: dir, env: { PATH: process.env.PATH } });
    expect(stdout.split('\n').filter((line) => line.startsWith('translated:'))).toHaveLength(3);
    const out = await readFile(join(dir, 'talk-es.wav'));
    expect(isWav(out)).toBe(true);
    expect(out.readUInt32LE(40)).toBe(out.length - 44);
    expect(out.length - 44).toBeGreaterThan(48_000);
  });
});

/**
 * The message of the Troubleshooting row whose message starts with `start`, as a pattern:
 * `...` stands for any text, the placeholders HOST, ID and TAG for a word.
 */
function troubleRow(start: string): RegExp {
  const row = troubleshooting.split('\n').find((line) => line.startsWith(`| \`${start}`));
  expect(row, `a Troubleshooting row starting with ${start}`).toBeDefined();
  const message = /^\| `([^`]+)`/.exec(row!)![1]!;
  const pattern = message
    .split(/(\.\.\.|\bHOST\b|\bID\b|\bTAG\b)/)
    .map((part) => (part === '...' ? '.*' : /^(HOST|ID|TAG)$/.test(part) ? '[^\\s,:]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(pattern);
}

describe.concurrent('README: Troubleshooting', () => {
  const fixture = join(root, 'test', 'fixtures', 'speech-en-24k.wav');
  it.each([
    { row: 'Refusing plain-text http://', args: ['tts', '--text', 'Hello there', '--language', 'en-us', '-o', '-', '--base-url', 'http://service.example.com/apis', '--api-key', 'k'] },
    { row: 'Invalid --base-url', args: ['voices', '--base-url', 'service.example.com', '--api-key', 'k'] },
    { row: 'was rejected with 422', args: ['translated-tts', '--text', 'Hello', '--from', 'en-us', '--to', 'xx-yy', '-o', '-'] },
    // No state directory: the embedded emulator could remember nothing.
    { row: 'task ID needs the service', args: ['task-status', 'dub', 'd41c9a2e'], env: { XDG_STATE_HOME: '', HOME: '' } },
    { row: 'the embedded emulator answered', args: ['task-status', 'dub', 'd41c9a2e'] },
    { row: 'warning: the API key from', args: ['task-status', 'dub', 'd41c9a2e', '--api-key', 'k'] },
    { row: 'The realtime service rejected the voice', args: ['--from', 'en-us', '--to', 'es-es', '--voice', '999', '-i', fixture, '--text-only'] },
  ])('the row "$row" is what the command prints', async ({ row, args, env }: { row: string; args: string[]; env?: Record<string, string> }) => {
    const result = await runInProcess(args, env ? { env } : {});
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(troubleRow(row));
  });
});
