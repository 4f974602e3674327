/**
 * What a batch left behind, for the batch tests: the creates the service answered per job (seen
 * by the counting proxy, each create's body naming its job), the files of an output directory
 * and its `results.jsonl`.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BatchJobResult } from '../../lib/batch/index.js';
import type { CountingProxy } from './counting-proxy.js';

/** Creates the service answered with a 2xx, per job id (`TAG-N`). */
export function createsPerJob(proxy: CountingProxy, tag: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const post of proxy.posts) {
    if (post.status === undefined || post.status >= 300) continue;
    const id = jobIdIn(post.body, tag);
    if (id !== undefined) counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** The job id (`TAG-N`) a request body names, if any. */
export function jobIdIn(body: string, tag: string): string | undefined {
  return new RegExp(`${tag}-\\d+(?!\\d)`).exec(body)?.[0];
}

/** Every file of a batch's output directory but its journal and results, with its bytes. */
export async function outputs(outDir: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  for (const name of (await readdir(outDir)).sort()) {
    if (name === 'journal.jsonl' || name === 'results.jsonl') continue;
    files.set(name, await readFile(join(outDir, name)));
  }
  return files;
}

/** The lines of the directory's `results.jsonl`. */
export async function resultsIn(outDir: string): Promise<BatchJobResult[]> {
  return (await readFile(join(outDir, 'results.jsonl'), 'utf8'))
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as BatchJobResult);
}
