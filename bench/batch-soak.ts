/**
 * `node dist/bench/batch-soak.js [JOBS]`: the batch's promise at full size, by hand (not part of
 * `npm run bench`, it measures no ratio). `rt-translate batch` runs JOBS jobs (default 10,000)
 * against an emulator through a proxy that counts the creates the service answered, and is
 * SIGKILLed five times along the way, then run to the end, then once more with
 * `--retry-uncertain`. Prints the creates per job (1 for every job but those a kill left
 * uncertain), the jobs done and the files on disk.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator } from '../lib/emulator/server.js';

const JOBS = Number(process.argv[2] ?? 10_000);
const KEY = 'soak-key';
const CLI = fileURLToPath(new URL('../bin/rt-translate.js', import.meta.url));

const emulator = await startEmulator({ port: 0, apiKeys: [KEY], taskMs: 0, taskPolls: 1, ttsStreamDelayMs: 0 });
const upstream = new URL(emulator.baseUrl);
/** Creates the service answered 2xx, per job id (the body names the job). */
const creates = new Map<string, number>();
let answered = 0;
const proxy = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const forwarded = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      const id = req.method === 'POST' ? /soak-\d+/.exec(body.toString('utf8'))?.[0] : undefined;
      if (id !== undefined && (answer.statusCode ?? 500) < 300) {
        creates.set(id, (creates.get(id) ?? 0) + 1);
        answered += 1;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    forwarded.end(body);
  });
});
proxy.on('clientError', (_error, socket) => socket.destroy());
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const baseUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

const dir = await mkdtemp(join(tmpdir(), 'rtt-batch-soak-'));
const lines: string[] = [];
for (let i = 0; i < JOBS; i++) {
  const id = `soak-${i}`;
  lines.push(
    JSON.stringify(
      i % 10 < 7
        ? { id, kind: 'translate-text', text: `Line ${id} of the catalogue.`, from: 'en-us', to: 'es-es' }
        : i % 10 < 9
          ? { id, kind: 'translated-tts', text: `Say ${id}.`, from: 'en-us', to: 'fr-fr' }
          : { id, kind: 'tts', text: `Line ${id}.`, language: 'en-us', format: 'flac' },
    ),
  );
}
const jobs = join(dir, 'jobs.jsonl');
await writeFile(jobs, `${lines.join('\n')}\n`);
const out = join(dir, 'out');
const args = [CLI, 'batch', jobs, '--out', out, '--base-url', baseUrl, '--concurrency', '32', '--poll-ms', '10', '--no-progress'];
const env = { ...process.env, RT_TRANSLATE_API_KEY: KEY };

async function run(extra: string[], killAfter?: number): Promise<string> {
  const child = spawn(process.execPath, [...args, ...extra], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  let timer: NodeJS.Timeout | undefined;
  if (killAfter !== undefined) {
    timer = setInterval(() => {
      if (answered >= killAfter) child.kill('SIGKILL');
    }, 5);
  }
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  clearInterval(timer);
  return `${signal ?? `exit ${code}`}: ${stderr.trim().split('\n').at(-1) ?? ''}`;
}

const started = Date.now();
const fractions = [0.05, 0.25, 0.5, 0.75, 0.9];
for (const fraction of fractions) console.log(`killed after ${Math.round(JOBS * fraction)} creates -> ${await run([], Math.round(JOBS * fraction))}`);
console.log(`run to the end -> ${await run([])}`);
const afterRest = (await readFile(join(out, 'results.jsonl'), 'utf8')).trimEnd().split('\n');
const uncertain = afterRest.map((line) => JSON.parse(line) as { id: string; status: string }).filter((r) => r.status === 'uncertain');
console.log(`uncertain after the kills: ${uncertain.length} (${uncertain.map((r) => r.id).join(' ')})`);
console.log(`--retry-uncertain -> ${await run(['--retry-uncertain'])}`);

const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
  .trimEnd()
  .split('\n')
  .map((line) => JSON.parse(line) as { id: string; status: string; files?: string[] });
const done = results.filter((r) => r.status === 'done').length;
const uncertainIds = new Set(uncertain.map((r) => r.id));
const twice = [...creates].filter(([, n]) => n > 1).map(([id, n]) => `${id}:${n}`);
const unexplained = [...creates].filter(([id, n]) => n > 1 && !uncertainIds.has(id));
const files = (await readdir(out)).filter((name) => name !== 'journal.jsonl' && name !== 'results.jsonl');
const missing = results.flatMap((r) => r.files ?? []).filter((file) => !files.includes(file));
console.log(
  `${JOBS} jobs, ${((Date.now() - started) / 1000).toFixed(0)} s: ${done} done; jobs created: ${creates.size}; created more than once: ${twice.length} (${twice.join(' ')}), of which not left uncertain by a kill: ${unexplained.length}; files on disk: ${files.length}, missing: ${missing.length}`,
);
await new Promise<void>((resolve) => {
  proxy.closeAllConnections();
  proxy.close(() => resolve());
});
await emulator.close();
await rm(dir, { recursive: true, force: true });
if (done !== JOBS || unexplained.length > 0 || missing.length > 0) process.exitCode = 1;
