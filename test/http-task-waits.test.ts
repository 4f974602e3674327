/**
 * Task waits bounded by their deadline, not by a count of failed status reads: the rule of
 * `statusReadDelay` (`retry.ts`) as a table, then long waits against the emulator over real
 * loopback sockets with fake timers (`setTimeout`, `Date`): a minute of 429s, 500s and resets
 * survived and the result fetched, a deadline that passes during failures, and the failures
 * that still end a wait at once. Then the pace: a server that announces itself (the emulator) is
 * read when it says the task will be done; one that does not (the emulator with
 * `announce: false`, and a small server sharing no code with the emulator) on the documented
 * schedule. Time only moves while no status read is in flight (a counting
 * dispatcher says when one is), so every read time is exact.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import {
  HttpAuthError,
  HttpConnectionError,
  HttpForbiddenError,
  HttpRateLimitError,
  HttpStatusError,
  HttpTimeoutError,
  HttpTlsError,
  ServiceValidationError,
  TaskFailedError,
  TaskWaitTimeoutError,
} from '../lib/http/errors.js';
import { DEFAULT_RETRY, statusReadDelay } from '../lib/http/retry.js';
import type { TaskProgress, TaskReadFailure } from '../lib/http/tasks.js';
import type { TaskKind } from '../lib/http/task-kinds.js';
import { KEY, control, emulator, ioTurns, logged, until } from './http-test-helpers.js';

const info = { method: 'GET', path: '/dub/t' };

describe('statusReadDelay: a failed status read of a wait is read again, whatever the count', () => {
  const policy = { ...DEFAULT_RETRY };
  it.each([
    ['429 with Retry-After: as asked, even beyond maxDelayMs', new HttpRateLimitError({ ...info, retryAfterMs: 120_000 }), 1, 120_000],
    ['429 without one: the back-off', new HttpRateLimitError(info), 1, 750],
    ['503 with Retry-After', new HttpStatusError(503, { ...info, retryAfterMs: 1000 }), 40, 1000],
    ['429 with Retry-After: 0 (or a reset already past): minDelayMs, never a busy loop', new HttpRateLimitError({ ...info, retryAfterMs: 0 }), 5, 1000],
    ['500, first failure: minDelayMs with jitter', new HttpStatusError(500, info), 1, 750],
    ['500, third failure in a row: grown', new HttpStatusError(500, info), 3, 3000],
    ['500, 100th failure in a row: capped at the polling interval', new HttpStatusError(500, info), 100, 11_250],
    ['a reset', new HttpConnectionError('exchange', 'UND_ERR_SOCKET', 'other side closed', info), 2, 1500],
    ['a headers timeout', new HttpTimeoutError('headers', 60_000, info), 1, 750],
    ['401', new HttpAuthError(info), 1, undefined],
    ['403', new HttpForbiddenError(info), 1, undefined],
    ['404', new HttpStatusError(404, info), 1, undefined],
    ['422', new ServiceValidationError([], info), 1, undefined],
    ['a TLS failure', new HttpTlsError('CERT_HAS_EXPIRED', 'expired', info), 1, undefined],
    ['a task ERROR', new TaskFailedError('bad', { taskId: 't' }), 1, undefined],
    ['a plain Error', new Error('no idea'), 1, undefined],
  ])('%s', (_name, error, inARow, expected) => {
    expect(statusReadDelay(error, inARow, policy, 15_000, 0.5)).toBe(expected);
  });

  it('retry: false, or retries: 0, ends the wait at the first failure', () => {
    const error = new HttpStatusError(500, info);
    expect(statusReadDelay(error, 1, false, 15_000, 0.5)).toBeUndefined();
    expect(statusReadDelay(error, 1, { ...policy, retries: 0 }, 15_000, 0.5)).toBeUndefined();
    // `retries` does not bound the reads otherwise: the 1000th failure is read again.
    expect(statusReadDelay(error, 1000, { ...policy, retries: 1 }, 15_000, 0.5)).toBe(11_250);
  });

  it('jitter stays within the upper half of the capped back-off', () => {
    const error = new HttpStatusError(502, info);
    for (const random of [0, 0.25, 0.999]) {
      const delay = statusReadDelay(error, 10, policy, 2000, random)!;
      expect(delay).toBeGreaterThanOrEqual(1000);
      expect(delay).toBeLessThanOrEqual(2000);
    }
  });
});

/** A wait on a live server, driven by fake time that moves only while no status read is in flight. */
interface DrivenClient {
  client: LocalizationClient;
  /** Status requests handed to the dispatcher so far. */
  dispatched(): number;
  progress: TaskProgress[];
  failures: TaskReadFailure[];
  /** Read times (ms since the wait began): successes and failures, in order. */
  readTimes(): number[];
  /** Runs `wait` to its end; `onIdle` is called between reads (to arm faults, say). */
  drive<T>(wait: Promise<T>, onIdle?: () => Promise<void>): Promise<T>;
  close(): Promise<void>;
}

/** The same on the emulator. */
interface DrivenWait extends DrivenClient {
  emu: RunningEmulator;
}

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A client of the server at `baseUrl` whose status reads (`GET statusPath...`) are counted; `closeServer` runs after it closes. */
function drivenClient(baseUrl: string, statusPath: string, closeServer: () => Promise<void>): DrivenClient {
  let statusRequests = 0;
  const dispatcher = new Agent().compose(
    (dispatch: Dispatcher['dispatch']) =>
      (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean => {
        if (options.method === 'GET' && String(options.path).startsWith(statusPath)) statusRequests++;
        return dispatch(options, handler);
      },
  );
  // The library's default retry setting (first back-off 1 s) and polling (per kind).
  const client = new LocalizationClient({ baseUrl, apiKey: KEY, dispatcher });
  const progress: TaskProgress[] = [];
  const failures: TaskReadFailure[] = [];
  const close = async (): Promise<void> => {
    await client.close();
    await dispatcher.close();
    await closeServer();
  };
  closers.push(close);
  const done = (): number => progress.length + failures.length;
  return {
    client,
    dispatched: () => statusRequests,
    progress,
    failures,
    readTimes: () =>
      [...progress.map((p) => [p.poll, p.elapsedMs]), ...failures.map((f) => [f.poll, f.elapsedMs])].sort((a, b) => a[0]! - b[0]!).map((x) => x[1]!),
    async drive(wait, onIdle) {
      let settled = false;
      void wait.then(
        () => (settled = true),
        () => (settled = true),
      );
      for (let step = 0; step < 100_000 && !settled; step++) {
        // A read in flight finishes over the real socket before time moves again.
        await until(() => settled || statusRequests === done());
        if (settled) break;
        await onIdle?.();
        await vi.advanceTimersToNextTimerAsync();
        await ioTurns();
      }
      return wait;
    },
    close,
  };
}

async function drivenWait(statusPath: string, emulatorOptions: Parameters<typeof emulator>[0] = {}): Promise<DrivenWait> {
  // Answering as the service does (no word of its pace) unless a test asks for the emulator's pace.
  const emu = await emulator({ announce: false, ...emulatorOptions });
  return { emu, ...drivenClient(emu.baseUrl, statusPath, () => emu.close()) };
}

/** A task of `kind` made through the control endpoint, PENDING for its first `polls` status reads. */
async function seededTask(emu: RunningEmulator, kind: TaskKind, polls: number): Promise<string> {
  const { task_id: taskId } = (await control(emu, 'POST', 'tasks', { kind, polls })) as { task_id: string };
  return taskId;
}

function useFakeTime(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'], now: 1_000_000 });
  // Equal jitter at its middle: each back-off is 3/4 of its cap, so every read time is exact.
  vi.spyOn(Math, 'random').mockReturnValue(0.5);
}

describe('a long wait survives failed status reads and fetches the result (real sockets, fake time)', () => {
  it('dub: 500s and resets, then a minute of 429s (Retry-After: 1); 70 reads, 66 failed, 215.6 s', async () => {
    const t = await drivenWait('/dub/', { taskPolls: 3 });
    const created = await t.client.dub.create({ videoUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' });
    await control(t.emu, 'POST', 'faults', [
      { status: 500, count: 3, path: '/dub/', method: 'GET' },
      { dropAfterBytes: 0, count: 3, path: '/dub/', method: 'GET' },
    ]);
    useFakeTime();
    let armed = false;
    const wait = t.client.tasks.wait('dub', created.taskId, { onProgress: (p) => t.progress.push(p), onReadFailure: (f) => t.failures.push(f) });
    const run = await t.drive(wait, async () => {
      // After the first PENDING answer: a minute of 429s.
      if (armed || t.progress.length !== 1) return;
      armed = true;
      await control(t.emu, 'POST', 'faults', { status: 429, retryAfter: 1, count: 60, path: '/dub/', method: 'GET' });
    });
    vi.useRealTimers();

    const result = await t.client.dub.result(run.runId);
    expect(result.outputs).toHaveLength(1);
    expect(result.outputs[0]!.audioUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/_files\//);

    // Reads made: every one reached the service once (no hidden retries inside a read).
    expect(t.dispatched()).toBe(70);
    expect(await logged(t.emu, 'GET', `/dub/${created.taskId}`)).toHaveLength(70);
    // Failures counted, in order and by kind.
    expect(t.failures).toHaveLength(66);
    expect(t.failures.map((f) => f.error.constructor.name)).toEqual([
      ...Array<string>(3).fill('HttpStatusError'),
      ...Array<string>(3).fill('HttpConnectionError'),
      ...Array<string>(60).fill('HttpRateLimitError'),
    ]);
    expect(t.failures.map((f) => f.failuresInARow)).toEqual([1, 2, 3, 4, 5, 6, ...Array.from({ length: 60 }, (_, i) => i + 1)]);
    // Back-off: 1 s growing (3/4 of 1, 2, 4, 8 s), capped at the first polling interval (15 s);
    // then the service's 1 s, sixty times.
    expect(t.failures.map((f) => f.retryInMs)).toEqual([750, 1500, 3000, 6000, 11_250, 11_250, ...Array<number>(60).fill(1000)]);
    expect(t.progress.map((p) => [p.poll, p.status, p.failedReads])).toEqual([
      [7, 'PENDING', 6],
      [68, 'PENDING', 66],
      [69, 'PENDING', 66],
      [70, 'SUCCESS', 66],
    ]);
    // Time waited, read by read: 15 s, the back-offs, 22.5 s after the PENDING, 1 s apart, 22.5 s, 33.75 s, 50.6 s.
    const times = t.readTimes();
    expect(times.slice(0, 8)).toEqual([15_000, 15_750, 17_250, 20_250, 26_250, 37_500, 48_750, 71_250]);
    expect(times[66]).toBe(130_250);
    expect(times.slice(67)).toEqual([131_250, 165_000, 215_625]);
    expect(t.progress.at(-1)!.elapsedMs).toBe(215_625);
  });

  it('task-status reads of every kind go through the same rule: a translated-tts wait over 20 failed reads', async () => {
    const t = await drivenWait('/translated-tts/');
    const taskId = await seededTask(t.emu, 'translated-tts', 1);
    await control(t.emu, 'POST', 'faults', [
      { status: 503, retryAfter: null, count: 10, path: '/translated-tts/', method: 'GET' },
      { dropAfterBytes: 0, count: 10, path: '/translated-tts/', method: 'GET' },
    ]);
    useFakeTime();
    const wait = t.client.tasks.wait('translated-tts', taskId, { onProgress: (p) => t.progress.push(p), onReadFailure: (f) => t.failures.push(f) });
    const run = await t.drive(wait);
    expect(run.runId).toBeGreaterThan(0);
    expect(t.dispatched()).toBe(22);
    expect(t.failures).toHaveLength(20);
    // 2 s polling: back-offs of 750, then 1500 (the cap, 2 s, at 3/4).
    expect(t.failures.map((f) => f.retryInMs)).toEqual([750, ...Array<number>(19).fill(1500)]);
    expect(t.progress.map((p) => [p.poll, p.status, p.elapsedMs])).toEqual([
      [21, 'PENDING', 2000 + 750 + 19 * 1500],
      [22, 'SUCCESS', 2000 + 750 + 19 * 1500 + 3000],
    ]);
  });
});

describe('the deadline still ends a wait during failures', () => {
  it('with TaskWaitTimeoutError naming the task, the time waited, the reads that failed and the last failure', async () => {
    const t = await drivenWait('/translated-tts/');
    const taskId = await seededTask(t.emu, 'translated-tts', 1000);
    useFakeTime();
    let armed = false;
    const wait = t.client.tasks
      .wait('translated-tts', taskId, { maxWaitMs: 30_000, onProgress: (p) => t.progress.push(p), onReadFailure: (f) => t.failures.push(f) })
      .catch((error: unknown) => error);
    const error = await t.drive(wait, async () => {
      if (armed || t.progress.length !== 1) return;
      armed = true;
      await control(t.emu, 'POST', 'faults', [
        { status: 500, count: 5, path: '/translated-tts/', method: 'GET' },
        { dropAfterBytes: 0, count: 100, path: '/translated-tts/', method: 'GET' },
      ]);
    });
    expect(error).toBeInstanceOf(TaskWaitTimeoutError);
    const timeout = error as TaskWaitTimeoutError;
    expect(timeout).toMatchObject({ code: 'RTT_TIMEOUT', taskId, lastStatus: 'PENDING', timeoutMs: 30_000, waitedMs: 30_000, reads: 14, failedReads: 13 });
    expect(timeout.lastFailure).toBeInstanceOf(HttpConnectionError);
    expect(timeout.cause).toBe(timeout.lastFailure);
    expect(timeout.message).toMatch(
      new RegExp(
        `^Task ${taskId} was still PENDING after waiting 30\\.0 s \\(maxWaitMs 30000\\); 13 of 14 status reads failed, ` +
          `the last with: GET /translated-tts/${taskId} lost its connection \\(UND_ERR_SOCKET: .*\\)\\. .*It may still finish: poll it again later with its task id, or raise maxWaitMs\\.$`,
      ),
    );
    // Reads: 2 s, then 3 s after the PENDING; back-offs 0.75, 1.5, then 2.25 s (3/4 of the 3 s interval).
    expect(t.readTimes()).toEqual([2000, 5000, 5750, 7250, 9500, 11_750, 14_000, 16_250, 18_500, 20_750, 23_000, 25_250, 27_500, 29_750]);
    expect(Date.now() - 1_000_000).toBe(30_000);
    expect(t.dispatched()).toBe(14);
  });

  it('a wait whose every read failed says its status was never read', async () => {
    const t = await drivenWait('/dub/');
    const taskId = await seededTask(t.emu, 'dub', 1000);
    await control(t.emu, 'POST', 'faults', { status: 429, retryAfter: 30, count: 1000, path: '/dub/', method: 'GET' });
    useFakeTime();
    const error = (await t.drive(
      t.client.tasks.wait('dub', taskId, { maxWaitMs: 120_000, onReadFailure: (f) => t.failures.push(f) }).catch((e: unknown) => e),
    )) as TaskWaitTimeoutError;
    expect(error).toBeInstanceOf(TaskWaitTimeoutError);
    // At 15 s, then every 30 s as asked: 15, 45, 75, 105; the next would be past 120 s.
    expect(error).toMatchObject({ taskId, reads: 4, failedReads: 4, waitedMs: 120_000 });
    expect(error.lastFailure).toBeInstanceOf(HttpRateLimitError);
    expect(error.message).toMatch(
      new RegExp(
        `^Task ${taskId}: none of its 4 status reads succeeded in 120\\.0 s \\(maxWaitMs 120000\\); the last failed with: GET /dub/${taskId} was rate limited \\(429\\)\\. It asked to wait 30000 ms\\. Slow down or retry later\\. It may still finish`,
      ),
    );
  });
});

describe('failures no retry can fix still end a wait at once', () => {
  it.each([
    [401, HttpAuthError],
    [403, HttpForbiddenError],
    [404, HttpStatusError],
    [422, ServiceValidationError],
  ])('%i after two failed reads: that error, after 3 reads', async (status, type) => {
    const t = await drivenWait('/dub/');
    const taskId = await seededTask(t.emu, 'dub', 1000);
    await control(t.emu, 'POST', 'faults', [
      { status: 502, count: 2, path: '/dub/', method: 'GET' },
      { status, count: 1, path: '/dub/', method: 'GET' },
    ]);
    useFakeTime();
    const error = await t.drive(t.client.tasks.wait('dub', taskId, { onReadFailure: (f) => t.failures.push(f) }).catch((e: unknown) => e));
    expect(error).toBeInstanceOf(type);
    expect(error).toMatchObject({ status });
    expect(t.failures.map((f) => f.error.status)).toEqual([502, 502]);
    expect(t.dispatched()).toBe(3);
    expect(Date.now() - 1_000_000).toBe(15_000 + 750 + 1500);
  });

  it('a task ERROR after failed reads: TaskFailedError', async () => {
    const t = await drivenWait('/dub/');
    const { task_id: taskId } = (await control(t.emu, 'POST', 'tasks', { kind: 'dub', status: 'ERROR', message: 'the video is private' })) as {
      task_id: string;
    };
    await control(t.emu, 'POST', 'faults', { dropAfterBytes: 0, count: 2, path: '/dub/', method: 'GET' });
    useFakeTime();
    const error = await t.drive(t.client.tasks.wait('dub', taskId, { onReadFailure: (f) => t.failures.push(f) }).catch((e: unknown) => e));
    expect(error).toBeInstanceOf(TaskFailedError);
    expect(error).toMatchObject({ taskId, taskMessage: 'the video is private' });
    expect(t.failures).toHaveLength(2);
    expect(t.dispatched()).toBe(3);
  });

  it('retry: false ends the wait at the first failed read, as before', async () => {
    const t = await drivenWait('/dub/');
    const taskId = await seededTask(t.emu, 'dub', 1000);
    await control(t.emu, 'POST', 'faults', { status: 500, count: 1, path: '/dub/', method: 'GET' });
    useFakeTime();
    const error = await t.drive(t.client.tasks.wait('dub', taskId, { retry: false, onReadFailure: (f) => t.failures.push(f) }).catch((e: unknown) => e));
    expect(error).toBeInstanceOf(HttpStatusError);
    expect(error).toMatchObject({ status: 500 });
    expect(t.failures).toEqual([]);
    expect(t.dispatched()).toBe(1);
  });
});

describe('a server that says when a task will be done is read then; one that does not, on the documented schedule', () => {
  const dub = { videoUrl: 'https://example.com/talk.mp4', sourceLanguage: 'en-us', targetLanguage: 'es-es' } as const;

  it('the emulator, once it announced itself: the first read at once, the next when it said (a 2 s dub: 2 reads, 2 s)', async () => {
    const t = await drivenWait('/dub/', { announce: true, taskMs: 2000, taskPolls: 0, clock: () => Date.now() });
    useFakeTime();
    const created = await t.client.dub.create(dub);
    expect(t.client.emulatorVersion).toMatch(/^\d+\.\d+\.\d+/);
    const run = await t.drive(t.client.tasks.wait('dub', created.taskId, { onProgress: (p) => t.progress.push(p) }));
    expect(run.runId).toBeGreaterThan(0);
    expect(t.readTimes()).toEqual([0, 2000]);
    expect(t.progress.map((p) => [p.status, p.nextPollInMs])).toEqual([
      ['PENDING', 2000],
      ['SUCCESS', undefined],
    ]);
    expect(t.dispatched()).toBe(2);
  });

  it('a client that has not heard from it yet: the first read after the first interval of the schedule, then at its pace', async () => {
    const t = await drivenWait('/dub/', { announce: true, clock: () => Date.now() });
    useFakeTime();
    const taskId = ((await control(t.emu, 'POST', 'tasks', { kind: 'dub', taskMs: 20_000 })) as { task_id: string }).task_id;
    await t.drive(t.client.tasks.wait('dub', taskId, { onProgress: (p) => t.progress.push(p) }));
    expect(t.readTimes()).toEqual([15_000, 20_000]);
    expect(t.dispatched()).toBe(2);
  });

  it('a task longer than the intervals of the schedule: never read later than the schedule would', async () => {
    const t = await drivenWait('/dub/', { announce: true, clock: () => Date.now() });
    useFakeTime();
    const taskId = ((await control(t.emu, 'POST', 'tasks', { kind: 'dub', taskMs: 100_000 })) as { task_id: string }).task_id;
    await t.client.voices.list();
    await t.drive(t.client.tasks.wait('dub', taskId, { onProgress: (p) => t.progress.push(p) }));
    // At once, then 15, 22.5 and 33.75 s later (the schedule), then when the emulator said: 100 s.
    expect(t.readTimes()).toEqual([0, 15_000, 37_500, 71_250, 100_000]);
  });

  /**
   * A dubbing service written here, sharing no code with the emulator: task `plain-1`, PENDING
   * for its first three status reads, then SUCCESS. It sends the emulator's ready-in header too, but never
   * announces itself: a client must not take its word for a pace.
   */
  async function plainServer(): Promise<{ baseUrl: string; close(): Promise<void> }> {
    let reads = 0;
    const server = createHttpServer((req, res) => {
      req.resume();
      const send = (body: unknown): void => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-rt-translate-emulator-ready-in-ms': '1' });
        res.end(JSON.stringify(body));
      };
      if (req.method === 'GET' && req.url === '/dub/plain-1') return send(++reads > 3 ? { status: 'SUCCESS', run_id: 7 } : { status: 'PENDING', run_id: null });
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    };
  }

  it.each([
    ['a new task: 15 s growing by 1.5 to 60 s', false, [15_000, 37_500, 71_250, 121_875]],
    ['read at once (task-status --wait), then the same schedule', true, [0, 15_000, 37_500, 71_250]],
  ])('a server that does not announce itself: %s', async (_name, readAtOnce, times) => {
    const server = await plainServer();
    const t = drivenClient(server.baseUrl, '/dub/', () => server.close());
    useFakeTime();
    const run = await t.drive(t.client.tasks.wait('dub', 'plain-1', { readAtOnce, onProgress: (p) => t.progress.push(p) }));
    expect(run.runId).toBe(7);
    expect(t.client.emulatorVersion).toBeUndefined();
    expect(t.readTimes()).toEqual(times);
    expect(t.progress.every((p) => p.response.readyInMs === undefined)).toBe(true);
  });
});
