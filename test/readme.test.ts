/**
 * The documentation's code runs as written. Every fenced block of README.md and of the guides
 * under docs/ (the generated reference under docs/api/ aside) is accounted for, one of three ways:
 *
 * - A `ts` or `js` block is a program of its own: it runs (as an ES module, its types stripped)
 *   in a fresh directory where rt-translate is installed as npm installs it (only the files
 *   `npm pack` would publish, beside the dependencies), with RT_TRANSLATE_REALTIME_URL,
 *   RT_TRANSLATE_BASE_URL and RT_TRANSLATE_API_KEY pointing at an emulator on loopback. It must
 *   exit 0 and print nothing on stderr.
 * - A `sh` block runs line by line, in order, in a fresh directory that holds the repository's
 *   examples and build as a clone does (`node dist/bin/rt-translate.js`), `rt-translate` being
 *   that command, with no service configured: the commands use the embedded emulator. Each line
 *   must exit 0 and print no error or warning.
 * - A block that cannot run as written (it stands for the reader's own inputs or application, it
 *   starts a server that runs until stopped, it shows output or a summary) is marked as a
 *   fragment: the line before its opening fence is `<!-- fragment: WHY -->`, WHY saying what
 *   keeps it from running. Any other block fails the first test below.
 *
 * Then the rows of docs/troubleshooting.md's messages are checked against what the commands
 * print. Needs `npm run build` (npm test does it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { CLI_PATH, cliEnv, killAllChildren, runInProcess } from './helpers/cli.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const KEY = 'sk-readme-examples-3f9a0c71d2';

/** One fenced block of a document. */
interface Block {
  /** `README.md:44`: the document and the line of the opening fence. */
  where: string;
  lang: string;
  code: string;
  /** The reason given by a `<!-- fragment: WHY -->` line, when the block is marked. */
  fragment: string | undefined;
}

/** The fenced blocks of `text`, each with the marker on the line before it, if any. */
function blocksOf(name: string, text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    expect(end, `${name}:${i + 1}: a fence that is never closed`).toBeGreaterThan(i);
    const marker = /^<!-- fragment: (.+) -->$/.exec(lines[i - 1] ?? '');
    blocks.push({ where: `${name}:${i + 1}`, lang: open[1]!, code: `${lines.slice(i + 1, end).join('\n')}\n`, fragment: marker?.[1] });
    i = end;
  }
  return blocks;
}

async function documents(): Promise<Array<{ name: string; text: string }>> {
  const docs = [{ name: 'README.md', text: await readFile(join(root, 'README.md'), 'utf8') }];
  // docs/api/ is TypeDoc's output (npm run docs), which copies the guides it links to.
  const guides = (await readdir(join(root, 'docs'), { recursive: true })).filter((f) => f.endsWith('.md') && !f.startsWith('api/'));
  for (const guide of guides.sort()) docs.push({ name: `docs/${guide}`, text: await readFile(join(root, 'docs', guide), 'utf8') });
  return docs;
}

const blocks = (await documents()).flatMap(({ name, text }) => blocksOf(name, text));
const programs = blocks.filter((b) => b.fragment === undefined && /^(ts|js|typescript|javascript)$/.test(b.lang));
const scripts = blocks.filter((b) => b.fragment === undefined && /^(sh|bash|shell)$/.test(b.lang));

const troubleshootingGuide = await readFile(join(root, 'docs', 'troubleshooting.md'), 'utf8');
const troubleshooting = troubleshootingGuide.slice(
  troubleshootingGuide.indexOf('## Messages'),
  troubleshootingGuide.indexOf('\n## ', troubleshootingGuide.indexOf('## Messages') + 1),
);

let dir: string;
let installed: string;
let emulator: RunningEmulator;

/**
 * rt-translate as npm installs it, under `into`: the files `npm pack` lists (from this checkout
 * and its build) and the package's dependencies beside them.
 */
async function install(into: string): Promise<void> {
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root });
  const { files } = (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]!;
  const pkg = join(into, 'node_modules', 'rt-translate');
  for (const { path } of files) {
    await mkdir(dirname(join(pkg, path)), { recursive: true });
    await symlink(join(root, path), join(pkg, path));
  }
  const { dependencies = {} } = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  for (const name of Object.keys(dependencies)) {
    await mkdir(dirname(join(into, 'node_modules', name)), { recursive: true });
    await symlink(join(root, 'node_modules', name), join(into, 'node_modules', name), 'dir');
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-readme-'));
  installed = join(dir, 'installed');
  await install(installed);
  // The command as a clone has it, and as `rt-translate` on PATH.
  await mkdir(join(dir, 'bin'));
  await writeFile(join(dir, 'bin', 'rt-translate'), `#!/bin/sh\nexec "${process.execPath}" "${CLI_PATH}" "$@"\n`);
  await chmod(join(dir, 'bin', 'rt-translate'), 0o755);
  emulator = await startEmulator({ apiKeys: [KEY], taskMs: 0 });
}, 60_000);

afterAll(async () => {
  await killAllChildren();
  await emulator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A fresh directory for one block: the installed package for a program, a clone's examples and build for a script. */
async function workspace(block: Block, kind: 'program' | 'script'): Promise<string> {
  const work = join(dir, block.where.replace(/[^A-Za-z0-9]+/g, '-'));
  await mkdir(work);
  if (kind === 'program') {
    await symlink(join(installed, 'node_modules'), join(work, 'node_modules'), 'dir');
  } else {
    await symlink(join(root, 'examples'), join(work, 'examples'), 'dir');
    await symlink(join(root, 'dist'), join(work, 'dist'), 'dir');
  }
  return work;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function isWav(bytes: Buffer): boolean {
  return bytes.length > 44 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WAVE';
}

/** What a program must also have done, found by a line it contains. */
const PROGRAM_CHECKS: Array<{ contains: string; check: (work: string, result: Run) => Promise<void> }> = [
  {
    contains: "new WavFileWriter('sample-es.wav'",
    check: async (work, { stdout }) => {
      expect(stdout.split('\n').filter((line) => line.startsWith('translated:')).length).toBeGreaterThan(0);
      const out = await readFile(join(work, 'sample-es.wav'));
      expect(isWav(out)).toBe(true);
      expect(out.readUInt32LE(40)).toBe(out.length - 44);
      expect(out.length - 44).toBeGreaterThan(48_000);
    },
  },
  {
    contains: "createWriteStream('sample-es.pcm')",
    check: async (work, { stdout }) => {
      expect(stdout).toMatch(/^session [0-9a-f-]{36}$/m);
      expect((await readFile(join(work, 'sample-es.pcm'))).length).toBeGreaterThan(48_000);
    },
  },
  {
    contains: "createWriteStream('good-morning-es.flac')",
    check: async (work, { stdout }) => {
      expect(isWav(await readFile(join(work, 'hello.wav')))).toBe(true);
      expect((await readFile(join(work, 'good-morning-es.flac'))).toString('latin1', 0, 4)).toBe('fLaC');
      expect(stdout).toMatch(/^1\n00:00:\d\d,\d{3} --> /m);
      expect(stdout).toMatch(/^cloned voice \d+$/m);
    },
  },
  {
    contains: "createWriteStream('hello-tts.wav')",
    check: async (work) => {
      const out = await readFile(join(work, 'hello-tts.wav'));
      expect(isWav(out)).toBe(true);
      expect(out.length - 44).toBeGreaterThan(4_800);
    },
  },
  {
    contains: "client.tasks.wait('translation', taskId",
    check: async (_work, { stdout }) => {
      const lines = stdout.trim().split('\n');
      expect(lines).toContain('SUCCESS');
      expect(lines.at(-1)).toMatch(/Good morning/);
    },
  },
  {
    contains: 'new RealtimeFanout(',
    check: async (work, { stdout }) => {
      for (const lang of ['es-es', 'fr-fr', 'de-de']) {
        expect(stdout).toMatch(new RegExp(`^${lang} complete $`, 'm'));
        expect(stdout).toMatch(new RegExp(`^${lang}: \\[${lang} translation of `, 'm'));
        const out = await readFile(join(work, `sample-${lang}.wav`));
        expect(isWav(out)).toBe(true);
        expect(out.length - 44).toBeGreaterThan(48_000);
      }
    },
  },
  {
    contains: 'handleDeprecations(',
    check: async (_work, { stdout }) => {
      expect(stdout).toContain('note (RTT_DEP_TRANSLATION_STREAM): POST /translation/stream is deprecated by the service');
      expect(stdout).toContain('Good morning');
    },
  },
];

describe('the documentation: every code block', () => {
  it('is a program, a shell script, or marked as a fragment with its reason', () => {
    const unaccounted = blocks.filter((b) => b.fragment === undefined && !programs.includes(b) && !scripts.includes(b));
    expect(unaccounted.map((b) => `${b.where}: \`\`\`${b.lang} neither runs nor is marked <!-- fragment: WHY -->`)).toEqual([]);
    expect(blocks.filter((b) => b.fragment !== undefined && b.fragment.trim().length < 5).map((b) => b.where)).toEqual([]);
    // The README runs: its two commands, and its examples of the three tasks (realtime, TTS, a task).
    expect(scripts.filter((b) => b.where.startsWith('README.md:')).length).toBeGreaterThanOrEqual(2);
    expect(programs.filter((b) => b.where.startsWith('README.md:')).length).toBeGreaterThanOrEqual(3);
    expect(scripts.length).toBeGreaterThanOrEqual(3);
    expect(programs.length).toBeGreaterThanOrEqual(4);
    // Every check above is about a program that is still there.
    for (const { contains } of PROGRAM_CHECKS)
      expect(
        programs.some((b) => b.code.includes(contains)),
        contains,
      ).toBe(true);
  });

  it('the package publishes the sample the examples read', async () => {
    const sample = join(installed, 'node_modules', 'rt-translate', 'examples', 'assets', 'sample-en.wav');
    expect(isWav(await readFile(sample))).toBe(true);
  });
});

describe.concurrent('the documentation: programs run as written, against the emulator', () => {
  it.each(programs.map((block) => ({ where: block.where, block })))(
    '$where',
    async ({ block }) => {
      const work = await workspace(block, 'program');
      const { outputText } = ts.transpileModule(block.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
      await writeFile(join(work, 'example.mjs'), outputText);
      const env = {
        PATH: process.env.PATH,
        RT_TRANSLATE_REALTIME_URL: emulator.realtimeUrl,
        RT_TRANSLATE_BASE_URL: emulator.baseUrl,
        RT_TRANSLATE_API_KEY: KEY,
      };
      const result = await run(process.execPath, ['example.mjs'], work, env);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      for (const { contains, check } of PROGRAM_CHECKS) if (block.code.includes(contains)) await check(work, result);
    },
    // The transcription's wait follows the service's guidance for long media: a first poll after 15 s.
    60_000,
  );
});

describe.concurrent('the documentation: shell lines run as written, on the embedded emulator', () => {
  it.each(scripts.map((block) => ({ where: block.where, block })))(
    '$where',
    async ({ block }) => {
      const work = await workspace(block, 'script');
      const env = { ...cliEnv(), PATH: `${join(dir, 'bin')}:${process.env.PATH}` };
      const lines = block.code.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
      for (const line of lines) {
        const result = await run('sh', ['-c', line], work, env);
        expect({ line, code: result.code, stderr: result.stderr }).toEqual({ line, code: 0, stderr: expect.not.stringMatching(/error|warn|deprecat/i) });
      }
      // Each `-o NAME` a line names was written, whole; `{lang}` in it stands for each language of its `--to`.
      const outputs = block.code.split('\n').flatMap((line) =>
        [...line.matchAll(/ -o (\S+)/g)].flatMap(([, quoted]) => {
          const name = quoted!.replace(/^'(.*)'$/, '$1');
          const langs = name.includes('{lang}') ? (/ --to (\S+)/.exec(line)?.[1] ?? '').split(',') : [''];
          return langs.map((lang) => name.split('{lang}').join(lang));
        }),
      );
      for (const name of outputs) {
        const path = join(work, name);
        if (name.endsWith('/')) expect((await readdir(path)).length, relative(work, path)).toBeGreaterThan(0);
        else expect((await readFile(path)).length, name).toBeGreaterThan(0);
      }
      expect((await readdir(work)).filter((name) => name.endsWith('.partial'))).toEqual([]);
    },
    60_000,
  );
});

/**
 * The message of the row of docs/troubleshooting.md's messages whose message starts with `start`, as a pattern:
 * `...` stands for any text, the placeholders HOST, ID and TAG for a word.
 */
function troubleRow(start: string): RegExp {
  const row = troubleshooting.split('\n').find((line) => line.startsWith(`| \`${start}`));
  expect(row, `a row of docs/troubleshooting.md's messages starting with ${start}`).toBeDefined();
  const message = /^\| `([^`]+)`/.exec(row!)![1]!;
  const pattern = message
    .split(/(\.\.\.|\bHOST\b|\bID\b|\bTAG\b)/)
    .map((part) => (part === '...' ? '.*' : /^(HOST|ID|TAG)$/.test(part) ? '[^\\s,:]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(pattern);
}

describe.concurrent('docs/troubleshooting.md: the messages', () => {
  const fixture = join(root, 'test', 'fixtures', 'speech-en-24k.wav');
  it.each([
    {
      row: 'Refusing plain-text http://',
      args: ['tts', '--text', 'Hello there', '--language', 'en-us', '-o', '-', '--base-url', 'http://service.example.com/apis', '--api-key', 'k'],
    },
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
