import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AbortError, BillingError, ProtocolError, ValidationError } from '../lib/errors.js';
import { HttpStatusError, PaymentRequiredError, TaskFailedError, TaskTimeoutError, TaskWaitTimeoutError } from '../lib/http/errors.js';
import { LONG_MEDIA_POLLING, SPEECH_POLLING, parseTaskStatus, resolvePolling, runTask, waitForTask, type TaskProgress } from '../lib/http/tasks.js';

/** A status source answering `answers` in turn (the last one repeats), recording call times. */
function statuses(answers: unknown[]): { get: (id: string) => Promise<unknown>; calls: number[] } {
  const calls: number[] = [];
  let i = 0;
  return {
    calls,
    get: async () => {
      calls.push(Date.now());
      return answers[Math.min(i++, answers.length - 1)];
    },
  };
}

const pending = { status: 'PENDING', run_id: null };

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});

afterEach(() => {
  vi.useRealTimers();
});

describe('polling profiles', () => {
  it('follow the interface guidance', () => {
    expect(SPEECH_POLLING).toMatchObject({ initialIntervalMs: 2000, maxIntervalMs: 5000 });
    expect(LONG_MEDIA_POLLING).toMatchObject({ initialIntervalMs: 15_000, maxIntervalMs: 60_000 });
    expect(resolvePolling({ profile: 'longMedia', maxWaitMs: 10 })).toMatchObject({ initialIntervalMs: 15_000, maxWaitMs: 10 });
  });

  it('refuse nonsense', () => {
    expect(() => resolvePolling({ factor: 0.5 })).toThrow(/factor/);
    expect(() => resolvePolling({ initialIntervalMs: -1 })).toThrow(/initialIntervalMs/);
  });
});

describe('waitForTask', () => {
  it('polls at 2 s growing to 5 s (speech) until SUCCESS, reporting each poll', async () => {
    const source = statuses([pending, pending, pending, pending, { status: 'SUCCESS', run_id: 42 }]);
    const progress: TaskProgress[] = [];
    const promise = waitForTask('t1', source.get, { onProgress: (p) => progress.push(p) });
    await vi.advanceTimersByTimeAsync(60_000);
    await expect(promise).resolves.toMatchObject({ taskId: 't1', runId: 42 });
    // 2000, then x1.5: 3000, 4500, then capped at 5000.
    expect(source.calls).toEqual([2000, 5000, 9500, 14_500, 19_500]);
    expect(progress.map((p) => [p.poll, p.status, p.nextPollInMs])).toEqual([
      [1, 'PENDING', 3000],
      [2, 'PENDING', 4500],
      [3, 'PENDING', 5000],
      [4, 'PENDING', 5000],
      [5, 'SUCCESS', undefined],
    ]);
    expect(progress[4]!.elapsedMs).toBe(19_500);
  });

  it('polls at 15 s growing to 60 s (long media)', async () => {
    const source = statuses([pending, pending, pending, pending, pending, { status: 'SUCCESS', run_id: 1 }]);
    const promise = waitForTask('t', source.get, { profile: 'longMedia' });
    await vi.advanceTimersByTimeAsync(300_000);
    await promise;
    expect(source.calls).toEqual([15_000, 37_500, 71_250, 121_875, 181_875, 241_875]);
  });

  it.each([
    ['ERROR with message', { status: 'ERROR', run_id: null, message: 'bad text' }, TaskFailedError, 'bad text'],
    ['ERROR with exception_reason', { status: 'ERROR', run_id: null, exception_reason: 'oom' }, TaskFailedError, 'oom'],
    ['ERROR with neither', { status: 'ERROR', run_id: null }, TaskFailedError, 'no message given'],
    ['TIMEOUT', { status: 'TIMEOUT', run_id: null }, TaskTimeoutError, 'smaller requests'],
    ['PAYMENT_REQUIRED', { status: 'PAYMENT_REQUIRED', run_id: null }, PaymentRequiredError, 'credits'],
  ])('%s ends the wait with its typed error', async (_name, answer, type, text) => {
    const source = statuses([pending, answer]);
    const promise = waitForTask('t2', source.get, { initialIntervalMs: 10 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1000);
    const error = await promise;
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toContain(text);
    expect((error as { taskId: string }).taskId).toBe('t2');
    expect(source.calls).toHaveLength(2);
  });

  it('a task that ended without a result is a TaskFailedError saying its status; one out of credits is a PaymentRequiredError', async () => {
    const ended = async (answer: Record<string, unknown>): Promise<unknown> => {
      const promise = waitForTask('t4', statuses([answer]).get, { initialIntervalMs: 10 }).catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(100);
      return promise;
    };
    const timedOut = await ended({ status: 'TIMEOUT', run_id: null });
    expect(timedOut).toBeInstanceOf(TaskFailedError);
    expect(timedOut).toMatchObject({ taskStatus: 'TIMEOUT', code: 'RTT_TASK_TIMEOUT', retryable: false, taskId: 't4' });
    expect(timedOut).not.toBeInstanceOf(TaskWaitTimeoutError);
    const failed = await ended({ status: 'ERROR', run_id: null, message: 'bad text' });
    expect(failed).toMatchObject({ taskStatus: 'ERROR', code: 'RTT_TASK_FAILED', retryable: true });
    expect(failed).not.toBeInstanceOf(TaskTimeoutError);
    const unpaid = await ended({ status: 'PAYMENT_REQUIRED', run_id: null });
    expect(unpaid).toBeInstanceOf(PaymentRequiredError);
    expect(unpaid).toBeInstanceOf(BillingError);
    expect(unpaid).toMatchObject({ taskId: 't4', method: undefined, path: undefined, code: 'RTT_BILLING', retryable: false });
  });

  it.each([
    [{ initialIntervalMs: -1 }, 'polling.initialIntervalMs', '-1'],
    [{ factor: 0.5 }, 'polling.factor', '0.5'],
    [{ maxWaitMs: Number.POSITIVE_INFINITY }, 'polling.maxWaitMs', 'Infinity'],
  ])('a polling option out of range (%o) is a ValidationError naming it, before any status read', async (options, field, received) => {
    const source = statuses([pending]);
    const error = await waitForTask('t5', source.get, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field, received });
    expect(source.calls).toEqual([]);
  });

  it('a read abandoned at the deadline after failed reads counts among them: no read is said to have succeeded', async () => {
    let calls = 0;
    const get = (_id: string, signal: AbortSignal | undefined): Promise<unknown> => {
      calls += 1;
      if (calls < 3) return Promise.reject(new HttpStatusError(503, { method: 'GET', path: '/dub/t6' }));
      // The third read hangs until the wait's deadline abandons it.
      return new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
    };
    const promise = waitForTask('t6', get, { initialIntervalMs: 10, maxIntervalMs: 10, maxWaitMs: 200, retry: { minDelayMs: 10, maxDelayMs: 10 } }).catch(
      (e: unknown) => e,
    );
    await vi.advanceTimersByTimeAsync(1000);
    const error = await promise;
    expect(error).toBeInstanceOf(TaskWaitTimeoutError);
    expect(error).toMatchObject({ reads: 3, failedReads: 3 });
    expect((error as Error).message).toContain('none of its 3 status reads succeeded');
    expect((error as Error).message).toContain('HTTP 503');
  });

  it('a status it does not know is a ProtocolError naming it, not an endless loop', async () => {
    const source = statuses([{ status: 'QUEUED', run_id: null }]);
    const promise = waitForTask('t3', source.get, { initialIntervalMs: 10 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(100);
    const error = await promise;
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as Error).message).toContain('"QUEUED"');
    expect(source.calls).toHaveLength(1);
  });

  it('accepts statuses in any case and a numeric-string run_id', () => {
    expect(parseTaskStatus('t', { status: 'success', run_id: '17' })).toMatchObject({ status: 'SUCCESS', runId: 17, raw: { status: 'success', run_id: '17' } });
    expect(() => parseTaskStatus('t', { run_id: 1 })).toThrow(ProtocolError);
    expect(() => parseTaskStatus('t', null)).toThrow(ProtocolError);
  });

  it('SUCCESS without a run_id is a ProtocolError', async () => {
    const source = statuses([{ status: 'SUCCESS', run_id: null }]);
    const promise = waitForTask('t4', source.get, { initialIntervalMs: 10 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(100);
    expect(await promise).toBeInstanceOf(ProtocolError);
  });

  it('gives up after maxWaitMs with TaskWaitTimeoutError carrying the task id', async () => {
    const source = statuses([pending]);
    const promise = waitForTask('t5', source.get, { initialIntervalMs: 1000, maxIntervalMs: 1000, maxWaitMs: 3500 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10_000);
    const error = await promise;
    expect(error).toBeInstanceOf(TaskWaitTimeoutError);
    expect(error).toMatchObject({ code: 'RTT_TIMEOUT', taskId: 't5', lastStatus: 'PENDING', timeoutMs: 3500 });
    // Polls at 1000, 2000, 3000; none at the deadline (3500), where no time is left for one.
    expect(source.calls).toEqual([1000, 2000, 3000]);
  });

  describe('each status request gets the time left before maxWaitMs', () => {
    it('a request still running at the deadline is aborted and the wait ends with TaskWaitTimeoutError', async () => {
      const signals: AbortSignal[] = [];
      // The first poll answers PENDING; the second hangs (retries, a stalled answer) until aborted.
      const getStatus = (_id: string, signal: AbortSignal | undefined): Promise<unknown> => {
        signals.push(signal!);
        if (signals.length === 1) return Promise.resolve(pending);
        return new Promise((_, reject) => signal!.addEventListener('abort', () => reject(new AbortError('aborted')), { once: true }));
      };
      let outcome: unknown;
      void waitForTask('t9', getStatus, { initialIntervalMs: 1000, maxIntervalMs: 1000, maxWaitMs: 5000 }).then(
        (value) => (outcome = value),
        (error: unknown) => (outcome = error),
      );
      await vi.advanceTimersByTimeAsync(4999);
      expect(outcome).toBeUndefined();
      expect(signals[1]!.aborted).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(outcome).toBeInstanceOf(TaskWaitTimeoutError);
      expect(outcome).toMatchObject({ taskId: 't9', lastStatus: 'PENDING', timeoutMs: 5000 });
      expect(signals[1]!.aborted).toBe(true);
      expect(Date.now()).toBe(5000);
    });

    it('a status function that ignores its signal is not awaited beyond the deadline', async () => {
      let calls = 0;
      const getStatus = (): Promise<unknown> => (++calls === 1 ? Promise.resolve(pending) : new Promise(() => undefined));
      let outcome: unknown;
      void waitForTask('t10', getStatus, { initialIntervalMs: 1000, maxWaitMs: 3000 }).catch((error: unknown) => (outcome = error));
      await vi.advanceTimersByTimeAsync(3000);
      expect(outcome).toBeInstanceOf(TaskWaitTimeoutError);
      expect(calls).toBe(2);
    });

    it("the caller's abort during a status request is still an AbortError", async () => {
      const controller = new AbortController();
      const getStatus = (_id: string, signal: AbortSignal | undefined): Promise<unknown> =>
        new Promise((_, reject) => signal!.addEventListener('abort', () => reject(new Error('request aborted')), { once: true }));
      const promise = waitForTask('t11', getStatus, { initialIntervalMs: 10, maxWaitMs: 60_000, signal: controller.signal }).catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(100);
      controller.abort();
      const error = await promise;
      expect(error).toBeInstanceOf(AbortError);
      expect(error).not.toBeInstanceOf(TaskWaitTimeoutError);
    });
  });

  it('TaskFailedError says what the interface says for ERROR: read the message, retry (it is retryable)', () => {
    const withMessage = new TaskFailedError('the voice is unavailable', { taskId: 't12' });
    expect(withMessage).toMatchObject({ retryable: true, code: 'RTT_TASK_FAILED', taskMessage: 'the voice is unavailable' });
    expect(withMessage.message).toBe(
      'Task t12 failed: the voice is unavailable. Read the message: if it names a problem with the input, fix that; ' +
        'otherwise submit the task again, which may succeed.',
    );
    const bare = new TaskFailedError(undefined, { taskId: 't13' });
    expect(bare.retryable).toBe(true);
    expect(bare.message).toBe('Task t13 failed (no message given). Submitting the task again may succeed.');
  });

  it('an abort ends the wait between polls at once', async () => {
    const source = statuses([pending]);
    const controller = new AbortController();
    const promise = waitForTask('t6', source.get, { signal: controller.signal }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(2500);
    controller.abort();
    const error = await promise;
    expect(error).toBeInstanceOf(AbortError);
    expect(source.calls).toEqual([2000]);
  });

  it('an already aborted signal polls nothing', async () => {
    const source = statuses([pending]);
    const error = await waitForTask('t7', source.get, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AbortError);
    expect(source.calls).toEqual([]);
  });

  it('a failing status request ends the wait with that error', async () => {
    const failure = new Error('network down');
    const promise = waitForTask(
      't8',
      async () => {
        throw failure;
      },
      { initialIntervalMs: 10 },
    ).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(100);
    expect(await promise).toBe(failure);
  });
});

describe('runTask', () => {
  it('creates, polls and fetches the result of the run', async () => {
    const steps: string[] = [];
    const promise = runTask(
      {
        create: async () => {
          steps.push('create');
          return 'task-9';
        },
        status: async (id) => {
          steps.push(`status ${id}`);
          return steps.length < 3 ? pending : { status: 'SUCCESS', run_id: 77 };
        },
        result: async (run) => {
          steps.push(`result ${run.runId}`);
          return `audio of ${run.runId}`;
        },
      },
      { initialIntervalMs: 5 },
    );
    await vi.advanceTimersByTimeAsync(100);
    await expect(promise).resolves.toBe('audio of 77');
    expect(steps).toEqual(['create', 'status task-9', 'status task-9', 'result 77']);
  });
});
