/**
 * `npm run bench`: runs every compiled `bench/*.bench.js` (or those whose name contains one of
 * the command-line words) in turn, each in a process of its own. Each bench module's default
 * export prints its own ratios; at the end, a summary table lists every figure with its target
 * and whether it was met.
 *
 * One process per bench file, so that a figure does not depend on which benches ran before it
 * in the same run: a heap grown by thousands of sessions, or by a 16 MiB re-framing loop,
 * changes what collection costs the next bench (the FLAC download against its own decoder
 * measured 1.17 on its own and 1.24 after the concurrency rows, in one pair of runs). The full
 * run and `npm run bench -- NAME` measure each figure in the same conditions.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { adopt, beginSection, recorded, summary, type SummaryRow } from './harness.js';

const self = fileURLToPath(import.meta.url);
const here = dirname(self);
const ONE = '--one-bench-file';

if (process.argv[2] === ONE) {
  // A child: runs one bench file and hands its figures to the parent.
  const file = process.argv[3]!;
  beginSection(file.replace(/\.bench\.js$/, ''));
  const mod = (await import(pathToFileURL(join(here, file)).href)) as { default: () => Promise<void> };
  await mod.default();
  const send = process.send?.bind(process);
  if (send) {
    await new Promise<void>((resolve, reject) => send(recorded(), (error: Error | null) => (error ? reject(error) : resolve())));
    process.disconnect();
  } else {
    summary(); // run by hand, without a parent to gather the figures
  }
} else {
  const filters = process.argv.slice(2);
  const files = (await readdir(here))
    .filter((f) => f.endsWith('.bench.js'))
    .filter((f) => filters.length === 0 || filters.some((word) => f.includes(word)))
    .sort();

  if (files.length === 0) {
    console.error(`no bench file matches ${filters.join(', ') || '*'}`);
    process.exitCode = 1;
  }
  const failed: string[] = [];
  for (const file of files) {
    const name = file.replace(/\.bench\.js$/, '');
    console.log(`\n== ${name}`);
    const child = fork(self, [ONE, file], { stdio: 'inherit', execArgv: process.execArgv });
    child.on('message', (rows: SummaryRow[]) => adopt(rows));
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    if (code !== 0) {
      failed.push(name);
      console.log(`${name} failed (${signal ?? `exit code ${code}`}); its figures are missing from the summary`);
    }
  }
  const misses = summary();
  if (misses > 0) console.log(`\n${misses} figure(s) missed their target on this run`);
  if (failed.length > 0) {
    console.log(`\n${failed.length} bench file(s) failed: ${failed.join(', ')}`);
    process.exitCode = 1;
  }
}
