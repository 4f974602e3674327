/**
 * The batch tests' jobs and what a batch left behind: a mixed job file's i-th job, the creates the service answered per job (seen
 * by the counting proxy, each create's body naming its job), the files of an output directory
 * and its `results.jsonl`.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BatchJobResult } from '../../lib/batch/index.js';
import type { CountingProxy } from './counting-proxy.js';

/**
 * The i-th job of a mixed batch (half translations, then speech, translated speech and
 * transcripts); with `dub`, the fifth of each ten is a dub, into two languages every other time.
 * `tag` keeps the texts of different tests apart.
 */
export function mixedJob(i: number, tag: string, options: { dub?: boolean } = {}): Record<string, unknown> {
  const id = `${tag}-${i}`;
  if (options.dub === true && i % 10 === 4)
    return { id, kind: 'dub', url: `https://media.example/${id}.mp4`, from: 'en-us', to: i % 20 === 4 ? ['es-es', 'fr-fr'] : ['de-de'] };
  switch (i % 10) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
      return { id, kind: 'translate-text', text: `Sentence ${id} to translate.`, from: 'en-us', to: 'es-es' };
    case 5:
    case 6:
      return { id, kind: 'tts', text: `Say ${id} aloud.`, language: 'en-us', format: 'wav' };
    case 7:
    case 8:
      return { id, kind: 'translated-tts', text: `Translate and say ${id}.`, from: 'en-us', to: 'fr-fr' };
    default:
      return { id, kind: 'transcribe', url: `https://media.example/${id}.mp3`, language: 'en-us', format: 'srt' };
  }
}

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
