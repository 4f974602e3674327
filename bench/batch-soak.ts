/**
 * `node dist/bench/batch-soak.js [JOBS] [--queue]`: the batch's promise at full size, by hand
 * (not part of `npm run bench`, it measures no ratio). `rt-translate batch` runs JOBS jobs
 * (default 10,000) against an emulator through a proxy that counts the creates the service
 * answered. Embedded: the command is SIGKILLed five times along the way, then run to the end,
 * then once more with `--retry-uncertain`. With `--queue` (needs `redis-server` on PATH): the
 * jobs go on a BullMQ queue in a redis-server started here, two `rt-translate worker` processes
 * run them, and at the same five points one worker is SIGKILLed and replaced. Prints the creates
 * per job (1 for every job but those a kill left uncertain), the jobs done and the files on disk.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator } from '../lib/emulator/server.js';

const JOBS = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 10_000);
const QUEUE = process.argv.includes('--queue');
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
let uncertain: Array<{ id: string; status: string }> = [];
const readResults = async (): Promise<Array<{ id: string; status: string; files?: string[] }>> =>
  (await readFile(join(out, 'results.jsonl'), 'utf8'))
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as { id: string; status: string; files?: string[] });
let stopRedis = async (): Promise<void> => undefined;
if (!QUEUE) {
  for (const fraction of fractions) console.log(`killed after ${Math.round(JOBS * fraction)} creates -> ${await run([], Math.round(JOBS * fraction))}`);
  console.log(`run to the end -> ${await run([])}`);
  uncertain = (await readResults()).filter((r) => r.status === 'uncertain');
  console.log(`uncertain after the kills: ${uncertain.length} (${uncertain.map((r) => r.id).join(' ')})`);
  console.log(`--retry-uncertain -> ${await run(['--retry-uncertain'])}`);
} else {
  const redis = await startRedis();
  stopRedis = redis.stop;
  const onQueue = ['--queue', redis.url, '--base-url', baseUrl];
  const worker = (): ChildProcess =>
    spawn(process.execPath, [CLI, 'worker', ...onQueue, '--concurrency', '16', '--poll-ms', '10', '--lock-ms', '2000'], { env, stdio: 'ignore' });
  const workers = [worker(), worker()];
  const producer = run(['--queue', redis.url]);
  const killed = await new Promise<number>((resolve) => {
    let next = 0;
    let kills = 0;
    const timer = setInterval(() => {
      if (next < fractions.length && answered >= JOBS * fractions[next]!) {
        next += 1;
        kills += 1;
        workers.shift()!.kill('SIGKILL');
        workers.push(worker());
      }
      if (next === fractions.length) {
        clearInterval(timer);
        resolve(kills);
      }
    }, 5);
  });
  console.log(`workers SIGKILLed and replaced: ${killed}; producer -> ${await producer}`);
  uncertain = (await readResults()).filter((r) => r.status === 'uncertain');
  console.log(`uncertain after the kills: ${uncertain.length} (${uncertain.map((r) => r.id).join(' ')})`);
  if (uncertain.length > 0) console.log(`--retry-uncertain -> ${await run(['--queue', redis.url, '--retry-uncertain'])}`);
  for (const child of workers) child.kill('SIGTERM');
  await Promise.all(workers.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)));
}

const results = await readResults();
const done = results.filter((r) => r.status === 'done').length;
const uncertainIds = new Set(uncertain.map((r) => r.id));
const twice = [...creates].filter(([, n]) => n > 1).map(([id, n]) => `${id}:${n}`);
const unexplained = [...creates].filter(([id, n]) => n > 1 && !uncertainIds.has(id));
const files = (await readdir(out)).filter((name) => name !== 'journal.jsonl' && name !== 'results.jsonl');
const missing = results.flatMap((r) => r.files ?? []).filter((file) => !files.includes(file));
console.log(
  `${QUEUE ? 'queue' : 'embedded'}, ${JOBS} jobs, ${((Date.now() - started) / 1000).toFixed(0)} s: ${done} done; jobs created: ${creates.size}; created more than once: ${twice.length} (${twice.join(' ')}), of which not left uncertain by a kill: ${unexplained.length}; files on disk: ${files.length}, missing: ${missing.length}`,
);
await new Promise<void>((resolve) => {
  proxy.closeAllConnections();
  proxy.close(() => resolve());
});
await emulator.close();
await stopRedis();
await rm(dir, { recursive: true, force: true });
if (done !== JOBS || unexplained.length > 0 || missing.length > 0) process.exitCode = 1;

/** A redis-server on a free loopback port, nothing saved to disk. */
async function startRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const probe = createNetServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  probe.close();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.stdout!.setEncoding('utf8').on('data', (text: string) => {
      output += text;
      if (output.includes('Ready to accept connections')) resolve();
    });
    child.once('exit', () => reject(new Error(`redis-server did not start: ${output}`)));
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGKILL');
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}
