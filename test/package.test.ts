/**
 * What installing the package costs its users: nothing compiled on a plain `npm install`, no
 * npm warnings from the project's own configuration, and the Opus codec chosen the way
 * `@discordjs/voice` users expect (WebAssembly by default, the native module when the
 * application installed it).
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  packages: Record<string, { hasInstallScript?: boolean; dev?: boolean; optional?: boolean; peer?: boolean }>;
};

describe('installing rt-translate', () => {
  it('builds nothing: the only install scripts are the dev-only ffmpeg binaries marking themselves executable', () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript)
      .map(([name, entry]) => ({ name, dev: entry.dev === true }));
    for (const { name, dev } of withScripts) {
      expect(name).toMatch(/^node_modules\/@ffmpeg-installer\//);
      expect(dev).toBe(true);
    }
    expect(Object.keys(lock.packages)).not.toContain('node_modules/@discordjs/opus');
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
