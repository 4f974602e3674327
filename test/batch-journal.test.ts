/**
 * The batch journal (lib/batch/journal.ts): entries read back as written, the last line of a job
 * winning; a line cut short at the end dropped and the file cut back; damage anywhere else an
 * error; lines recorded together all durable; and a writer SIGKILLed while writing loses none of
 * the lines it had acknowledged (a real child process, killed at several points).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFile, mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchJournal, JournalError } from '../lib/batch/journal.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rtt-journal-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('BatchJournal', () => {
  it("reads back each job's last state, after a reopen", async () => {
    const path = join(dir, 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    await journal.record('a', 'd1', { state: 'creating' });
    await journal.record('a', 'd1', { state: 'created', taskId: 'task-a' });
    await journal.record('b', 'd2', { state: 'creating' });
    await journal.record('a', 'd1', { state: 'done', taskId: 'task-a', runId: 7, files: ['a.flac'] });
    await journal.close();

    const again = await BatchJournal.open(path);
    expect(again.size).toBe(2);
    expect(again.get('a')).toMatchObject({ id: 'a', digest: 'd1', state: 'done', taskId: 'task-a', runId: 7, files: ['a.flac'] });
    expect(again.get('b')).toMatchObject({ id: 'b', digest: 'd2', state: 'creating' });
    expect(again.get('c')).toBeUndefined();
    await again.close();
    const lines = (await readFile(path, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(JSON.parse(lines[0]!)).toEqual({ journal: 'rt-translate batch', version: 1 });
  });

  it('keeps every line of records made at once, each durable when its promise resolves', async () => {
    const path = join(dir, 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    await Promise.all(Array.from({ length: 200 }, (_, i) => journal.record(`job-${i}`, 'd', { state: 'created', taskId: `t-${i}` })));
    // Read by another handle before close: what resolved is in the file.
    const text = await readFile(path, 'utf8');
    expect(text.trimEnd().split('\n')).toHaveLength(201);
    await journal.close();
    const again = await BatchJournal.open(path);
    expect(again.size).toBe(200);
    expect(again.get('job-199')).toMatchObject({ state: 'created', taskId: 't-199' });
    await again.close();
  });

  it('drops a last line cut short by a crash and cuts the file back to the whole lines', async () => {
    const path = join(dir, 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    await journal.record('a', 'd', { state: 'created', taskId: 't' });
    await journal.close();
    const whole = (await stat(path)).size;
    await appendFile(path, '{"id":"b","digest":"d","at":"2026-01-01T00:00:00.000Z","sta');

    const again = await BatchJournal.open(path);
    expect(again.get('b')).toBeUndefined();
    expect((await stat(path)).size).toBe(whole);
    await again.record('b', 'd', { state: 'creating' });
    await again.close();
    const reread = await BatchJournal.open(path);
    expect(reread.get('b')).toMatchObject({ state: 'creating' });
    expect(reread.get('a')).toMatchObject({ state: 'created', taskId: 't' });
    await reread.close();
  });

  it('refuses a journal damaged before its end, and a file that is not a journal', async () => {
    const damaged = join(dir, 'damaged.jsonl');
    const journal = await BatchJournal.open(damaged);
    await journal.record('a', 'd', { state: 'creating' });
    await journal.close();
    await appendFile(damaged, 'not json\n{"id":"b","digest":"d","state":"creating"}\n');
    const error = await BatchJournal.open(damaged).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JournalError);
    expect((error as Error).message).toContain('line 3');

    const other = join(dir, 'other.jsonl');
    await writeFile(other, '{"something":"else"}\n');
    const notJournal = await BatchJournal.open(other).catch((e: unknown) => e);
    expect(notJournal).toBeInstanceOf(JournalError);
    expect((notJournal as Error).message).toContain('not a batch journal');
  });

  it('drops a garbled last line (a crash can leave zeros) but not one that good lines follow', async () => {
    const path = join(dir, 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    await journal.record('a', 'd', { state: 'created', taskId: 't' });
    await journal.close();
    const whole = (await stat(path)).size;
    await appendFile(path, Buffer.concat([Buffer.alloc(40), Buffer.from('\n')]));
    const again = await BatchJournal.open(path);
    expect(again.get('a')).toMatchObject({ state: 'created' });
    await again.close();
    expect((await stat(path)).size).toBe(whole);
  });

  it('lets one batch at a time use a journal, and takes over the lock of a process that is gone', async () => {
    const path = join(dir, 'journal.jsonl');
    const first = await BatchJournal.open(path);
    const refused = await BatchJournal.open(path).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(JournalError);
    expect((refused as Error).message).toContain(`Another batch (process ${process.pid})`);
    await first.close();
    // A lock left by a process that no longer runs.
    const gone = spawn(process.execPath, ['-e', '0']);
    await once(gone, 'exit');
    await writeFile(join(dir, 'journal.lock'), `${gone.pid}\n`);
    const second = await BatchJournal.open(path);
    await second.record('a', 'd', { state: 'creating' });
    await second.close();
  });

  it('takes over a lock naming its own process id that it does not hold (a killed run with the same id)', async () => {
    const path = join(dir, 'journal.jsonl');
    await writeFile(join(dir, 'journal.lock'), `${process.pid}\n`);
    const journal = await BatchJournal.open(path);
    expect(await BatchJournal.open(path).catch((e: unknown) => e)).toBeInstanceOf(JournalError);
    await journal.close();
  });

  it('rewrites a journal of many lines per job as one line per job', async () => {
    const path = join(dir, 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    for (const id of ['a', 'b']) {
      await journal.record(id, 'd', { state: 'creating' });
      await journal.record(id, 'd', { state: 'created', taskId: `t-${id}` });
      await journal.record(id, 'd', { state: 'done', taskId: `t-${id}`, runId: 1, files: [`${id}.json`] });
    }
    await journal.close();
    expect((await readFile(path, 'utf8')).trimEnd().split('\n')).toHaveLength(7);
    const again = await BatchJournal.open(path);
    expect(again.get('b')).toMatchObject({ state: 'done', files: ['b.json'] });
    await again.close();
    expect((await readFile(path, 'utf8')).trimEnd().split('\n')).toHaveLength(3);
  });

  it('cuts back a line a full disk tore, so the lines after it still read back', async () => {
    const path = join(dir, 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    await journal.record('a', 'd', { state: 'created', taskId: 't-a' });
    const prototype = Object.getPrototypeOf(await open(join(dir, 'probe'), 'w').then(async (handle) => (await handle.close(), handle))) as {
      write: (...args: unknown[]) => Promise<{ bytesWritten: number }>;
    };
    const write = prototype.write;
    let calls = 0;
    const spy = vi.spyOn(prototype, 'write').mockImplementation(function (this: unknown, buffer: unknown, offset: unknown) {
      calls += 1;
      // The first call writes part of the line, the second finds the disk full.
      if (calls === 1) return write.call(this, (buffer as Buffer).subarray(0, 10), offset);
      if (calls === 2) return Promise.reject(Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' }));
      return write.call(this, buffer, offset);
    });
    try {
      await expect(journal.record('b', 'd', { state: 'creating' })).rejects.toBeInstanceOf(JournalError);
    } finally {
      spy.mockRestore();
    }
    await journal.record('c', 'd', { state: 'created', taskId: 't-c' });
    await journal.close();
    const again = await BatchJournal.open(path);
    expect(again.get('a')).toMatchObject({ state: 'created', taskId: 't-a' });
    expect(again.get('b')).toBeUndefined();
    expect(again.get('c')).toMatchObject({ state: 'created', taskId: 't-c' });
    await again.close();
  });

  it('starts a journal in a directory that does not exist yet', async () => {
    const path = join(dir, 'a', 'b', 'journal.jsonl');
    const journal = await BatchJournal.open(path);
    await journal.record('x', 'd', { state: 'creating' });
    await journal.close();
    expect((await readFile(path, 'utf8')).split('\n')).toHaveLength(3);
  });
});

describe('BatchJournal under SIGKILL', () => {
  const writer = fileURLToPath(new URL('./fixtures/journal-writer.mjs', import.meta.url));

  // Killed after 1, 37 and 400 acknowledged lines: early, between group commits, deep in.
  it.each([1, 37, 400])('loses no acknowledged line when the writer is killed after %i', async (killAfter) => {
    const path = join(dir, 'journal.jsonl');
    const child = spawn(process.execPath, [writer, path], { stdio: ['ignore', 'pipe', 'inherit'] });
    const acknowledged = new Set<number>();
    let buffered = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => {
      buffered += text;
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) acknowledged.add(Number(line));
      if (acknowledged.size >= killAfter && child.exitCode === null) child.kill('SIGKILL');
    });
    const [code, signal] = await once(child, 'exit');
    expect(signal).toBe('SIGKILL');
    expect(code).toBeNull();

    const journal = await BatchJournal.open(path);
    for (const n of acknowledged) expect(journal.get(`job-${n}`), `job-${n}`).toMatchObject({ state: 'created', taskId: `task-${n}` });
    await journal.close();
  });
});
