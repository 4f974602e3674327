/**
 * What installing the package costs its users: nothing compiled on a plain `npm install`, no
 * npm warnings from the project's own configuration, and the Opus codec chosen the way
 * `@discordjs/voice` users expect (WebAssembly by default, the native module when the
 * application installed it).
 */
import { isBuiltin } from 'node:module';
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadOpusBackend } from '../lib/audio/opus.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
};
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { hasInstallScript?: boolean; dev?: boolean; devOptional?: boolean; optional?: boolean; peer?: boolean }>;
};

describe.concurrent('installing rt-translate', () => {
  it('builds nothing: the only install scripts are dev-only (the ffmpeg binaries, bufferutil for the benches) or optional prebuilds', () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript)
      .map(([name, entry]) => ({ name, devOnly: entry.dev === true || entry.devOptional === true, optional: entry.optional === true }));
    expect(withScripts.length).toBeGreaterThan(0);
    for (const { name, devOnly, optional } of withScripts) {
      if (name === 'node_modules/msgpackr-extract') {
        // BullMQ's MessagePack speed-up: its script only picks the platform's prebuilt binary (an
        // optional package); refused or failing, msgpackr runs in JavaScript.
        expect(optional).toBe(true);
        expect((pkg as { allowScripts?: Record<string, boolean> }).allowScripts?.['msgpackr-extract']).toBe(false);
        continue;
      }
      expect(name).toMatch(/^node_modules\/(@ffmpeg-installer\/|bufferutil$)/);
      expect(devOnly).toBe(true);
    }
    expect(Object.keys(lock.packages)).not.toContain('node_modules/@discordjs/opus');
  });

  it('bufferutil (native frame masking for ws) is an optional peer, never installed with rt-translate', () => {
    expect(pkg.dependencies?.bufferutil).toBeUndefined();
    expect(pkg.optionalDependencies?.bufferutil).toBeUndefined();
    expect(pkg.peerDependencies?.bufferutil).toBeDefined();
    expect(pkg.peerDependenciesMeta?.bufferutil?.optional).toBe(true);
  });

  it('Opus: opusscript (WebAssembly) is installed; @discordjs/opus is an optional peer the application may add', () => {
    expect(pkg.dependencies?.opusscript).toBeDefined();
    expect(pkg.optionalDependencies?.['@discordjs/opus']).toBeUndefined();
    expect(pkg.dependencies?.['@discordjs/opus']).toBeUndefined();
    expect(pkg.peerDependencies?.['@discordjs/opus']).toBeDefined();
    expect(pkg.peerDependenciesMeta?.['@discordjs/opus']?.optional).toBe(true);
  });

  it("'auto' takes @discordjs/opus when the application installed it, else opusscript", () => {
    const opusscript = loadOpusBackend('opusscript').module;
    const native = { OpusEncoder: class {} };
    const withNative = (name: string): unknown => (name === '@discordjs/opus' ? native : opusscript);
    const withoutNative = (name: string): unknown => {
      if (name === '@discordjs/opus') throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' });
      return opusscript;
    };
    expect(loadOpusBackend('auto', withNative)).toMatchObject({ backend: 'native', module: native });
    expect(loadOpusBackend('auto', withoutNative).backend).toBe('opusscript');
  });

  it("npm prints no warning about the project's configuration", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rt-translate-npmrc-'));
    try {
      // An empty user configuration: only the project's own is read.
      const userconfig = join(dir, 'npmrc');
      await writeFile(userconfig, '');
      const env: NodeJS.ProcessEnv = { ...process.env, npm_config_userconfig: userconfig };
      for (const name of Object.keys(env)) if (/^npm_config_/i.test(name) && name !== 'npm_config_userconfig') delete env[name];
      const { stderr } = await promisify(execFile)('npm', ['config', 'get', 'fund'], { cwd: root, env });
      expect(stderr).toBe('');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** `dir/node_modules/rt-translate` as npm would install it: the package.json and this checkout's build. */
async function installBuild(dir: string): Promise<string> {
  const modules = join(dir, 'node_modules');
  await mkdir(join(modules, 'rt-translate'), { recursive: true });
  await copyFile(join(root, 'package.json'), join(modules, 'rt-translate', 'package.json'));
  await symlink(join(root, 'dist'), join(modules, 'rt-translate', 'dist'), 'dir');
  return modules;
}

/** Compiles the program of `dir/tsconfig.json`: no error, no output. */
async function expectCompiles(dir: string): Promise<void> {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const result = await promisify(execFile)(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: dir }).then(
    ({ stdout }) => ({ ok: true, stdout }),
    (error: { stdout: string }) => ({ ok: false, stdout: error.stdout }),
  );
  expect(result.stdout).toBe('');
  expect(result.ok).toBe(true);
}

describe.concurrent('the package surface', () => {
  it('a consumer program compiles against the built declarations, and the building blocks are off the root', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rt-translate-consumer-'));
    try {
      // An application with rt-translate installed as npm would: the package (its package.json
      // and the build of this checkout) and its dependencies beside it, none of its
      // devDependencies; the application's own @types/node.
      const modules = await installBuild(dir);
      const typesNode = JSON.parse(readFileSync(join(root, 'node_modules', '@types', 'node', 'package.json'), 'utf8')) as {
        dependencies?: Record<string, string>;
      };
      for (const name of [...Object.keys(pkg.dependencies ?? {}), '@types/node', ...Object.keys(typesNode.dependencies ?? {})]) {
        await mkdir(dirname(join(modules, name)), { recursive: true });
        await symlink(join(root, 'node_modules', name), join(modules, name), 'dir');
      }
      // Every package the declarations import has its types among those dependencies (the
      // compiler below skips checking declaration files, which would also skip this).
      const declarations = (await readdir(join(root, 'dist', 'lib'), { recursive: true })).filter((name) => name.endsWith('.d.ts'));
      const imported = new Set<string>();
      for (const name of declarations) {
        const text = await readFile(join(root, 'dist', 'lib', name), 'utf8');
        for (const [, spec] of text.matchAll(/(?:from |import\()['"]([^'"./][^'"]*)['"]/g)) imported.add(spec!);
      }
      // Node's own modules (`node:stream`, or `stream` as the compiler sometimes writes it) come with @types/node.
      const packages = [...imported]
        .filter((spec) => !isBuiltin(spec))
        .map((spec) =>
          spec
            .split('/')
            .slice(0, spec.startsWith('@') ? 2 : 1)
            .join('/'),
        );
      expect(packages.length).toBeGreaterThan(0);
      for (const name of new Set(packages)) {
        const own = JSON.parse(await readFile(join(modules, name, 'package.json'), 'utf8').catch(() => '{}')) as { types?: string; typings?: string };
        const typed = own.types !== undefined || own.typings !== undefined || existsSync(join(modules, '@types', name));
        expect({ name, typed }).toEqual({ name, typed: true });
      }
      for (const name of ['consumer.ts', 'tsconfig.json', 'package.json']) await copyFile(join(root, 'test', 'consumer', name), join(dir, name));
      await expectCompiles(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a web page compiles against rt-translate/browser with the DOM library and no Node types', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rt-translate-browser-consumer-'));
    try {
      await installBuild(dir);
      await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'page', private: true, type: 'module' }));
      // The declarations are checked too (no skipLibCheck): a Buffer or a node: import in them fails.
      const compilerOptions = {
        target: 'ES2022',
        module: 'ESNext',
        moduleResolution: 'bundler',
        lib: ['ES2023', 'DOM'],
        types: [],
        strict: true,
        noEmit: true,
        preserveSymlinks: true,
      };
      await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['page.ts'] }));
      await writeFile(
        join(dir, 'page.ts'),
        [
          "import { RealtimeTranslator, PcmPlayer, StreamResampler, type ResponseTiming } from 'rt-translate/browser';",
          "const translator = new RealtimeTranslator({ url: '/v1/realtime', token: 'token', from: 'en-us', to: 'es-es', whilePlaying: 'duck' });",
          "translator.on('response', (timing: ResponseTiming) => timing.firstAudioMs);",
          "translator.on('audio.delta', (pcm: Int16Array) => pcm.length);",
          '// @ts-expect-error the audio of an event is an Int16Array here',
          "translator.on('audio.delta', (pcm: string) => pcm);",
          'export const parts = [PcmPlayer, new StreamResampler(48000, 24000).read(new Int16Array(1))];',
        ].join('\n'),
      );
      await expectCompiles(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the root is grouped by use: what a program needs, no building blocks', async () => {
    const rootModule = (await import('../lib/index.js')) as Record<string, unknown>;
    const names = Object.keys(rootModule);
    for (const internal of [
      'oggPageCrc',
      'averageInt16',
      'designResampler',
      'PASSBAND_EDGE',
      'encodeSessionUpdate',
      'redactSecret',
      'FrameAssembler',
      'startEmulator',
      'backoffDelay',
      'createTranslatedTts',
    ]) {
      expect(names).not.toContain(internal);
    }
    for (const used of [
      'RealtimeTranslateStream',
      'openAudioSource',
      'LocalizationClient',
      'toServiceFormat',
      'DiscordReceiveAdapter',
      'TwilioMediaBridge',
      'AudioInputError',
      'createRealtimeRelay',
    ]) {
      expect(names).toContain(used);
    }
    const dsp = (await import('../lib/dsp.js')) as Record<string, unknown>;
    const protocol = (await import('../lib/protocol.js')) as Record<string, unknown>;
    expect(Object.keys(dsp)).toEqual(expect.arrayContaining(['oggPageCrc', 'averageInt16', 'designResampler', 'PASSBAND_EDGE']));
    expect(Object.keys(protocol)).toEqual(expect.arrayContaining(['encodeSessionUpdate', 'decodeServerEvent', 'parseTwilioMessage']));
  });
});
