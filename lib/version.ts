/**
 * The package's version, read once from the `package.json` above this module (built or not), for
 * `rt-translate --version` and for the emulator, which names its version in every answer.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './errors.js';

let version: string | undefined;

/** The version in the package's `package.json`. */
export function packageVersion(): string {
  if (version !== undefined) return version;
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version: string };
      if (pkg.name === 'rt-translate') return (version = pkg.version);
    } catch {
      // no package.json here
    }
    if (dir.pathname === '/')
      throw new ConfigError('package.json', 'The package.json of rt-translate was not found above its modules: the installation is incomplete.');
  }
}
