/**
 * `npm run bench`: runs every compiled `bench/*.bench.js` (or those whose name contains one of
 * the command-line words) in turn. Each bench module's default export prints its own ratios;
 * at the end, a summary table lists every figure with its target and whether it was met.
 */
import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beginSection, summary } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = (await readdir(here))
  .filter((f) => f.endsWith('.bench.js'))
  .filter((f) => filters.length === 0 || filters.some((word) => f.includes(word)))
  .sort();

if (files.length === 0) {
  console.error(`no bench file matches ${filters.join(', ') || '*'}`);
  process.exitCode = 1;
}
for (const file of files) {
  const name = file.replace(/\.bench\.js$/, '');
  console.log(`\n== ${name}`);
  beginSection(name);
  const mod = (await import(pathToFileURL(join(here, file)).href)) as { default: () => Promise<void> };
  await mod.default();
}
const misses = summary();
if (misses > 0) console.log(`\n${misses} figure(s) missed their target on this run`);
