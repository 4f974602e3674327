/**
 * DuplexLifecycle in a minimal Duplex, without sockets: one setter that clears the old state's
 * timer and settles its callback, construction and ending callbacks, failures delivered after
 * the reader has drained, the abort signal.
 */
import { Duplex } from 'node:stream';
import { once } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AbortError, ConnectionError } from '../lib/errors.js';
import { COMPLETE, DuplexLifecycle, type LifecycleState } from '../lib/realtime/duplex-lifecycle.js';

afterEach(() => {
  vi.useRealTimers();
});

/** A Duplex wired the way the realtime streams wire it; `connect` is what `_construct` starts. */
class Host extends Duplex {
  readonly life: DuplexLifecycle;
  readonly changes: string[] = [];
  shutdowns = 0;
  connects = 0;

  constructor(signal?: AbortSignal) {
    super({ allowHalfOpen: true });
    this.life = new DuplexLifecycle(this, {
      signal,
      name: 'test session',
      shutdown: () => this.shutdowns++,
      nudgeRead: () => this.push(Buffer.alloc(0)),
      stateChange: (previous: LifecycleState, next: LifecycleState) => this.changes.push(`${previous.status}->${next.status}`),
    });
  }

  override _construct(callback: (error?: Error | null) => void): void {
    this.life.construct(callback, () => this.connects++);
  }

  override _read(): void {
    this.life.failWhenDrained();
  }

  override _write(_chunk: Buffer, _encoding: BufferEncoding, callback: () => void): void {
    callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.life.failWhenDrained()) return;
    this.life.set({ status: 'ending', finalCallback: callback, timer: undefined });
  }

  override destroy(error?: Error): this {
    super.destroy(error);
    this.life.destroying(error);
    return this;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.life.destroyed(error);
    callback(error);
  }
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function started(host: Host = new Host()): Promise<Host> {
  await tick();
  expect(host.life.state.status).toBe('starting');
  host.life.opened();
  await tick();
  return host;
}

async function ending(host: Host): Promise<void> {
  host.end();
  await tick();
  expect(host.life.state.status).toBe('ending');
}

describe('DuplexLifecycle: the one setter', () => {
  it("clears the old state's timer and settles its callback; reports each change", async () => {
    vi.useFakeTimers();
    const host = new Host();
    const fired: string[] = [];
    host.life.set({ status: 'ending', finalCallback: () => fired.push('final'), timer: setTimeout(() => fired.push('timer'), 100) });
    host.life.set({ status: 'closing', finalCallback: () => fired.push('final'), ending: COMPLETE });
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual(['final']);
    expect(host.changes).toEqual(['open->ending', 'ending->closing']);
  });

  it('a new state that carries the timer and the callback on keeps both', () => {
    vi.useFakeTimers();
    const host = new Host();
    const fired: string[] = [];
    const finalCallback = () => fired.push('final');
    const timer = setTimeout(() => fired.push('timer'), 100);
    host.life.set({ status: 'ending', finalCallback, timer });
    host.life.set({ status: 'ending', finalCallback, timer });
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(['timer']);
  });
});

describe('DuplexLifecycle: construction', () => {
  it('writes wait for opened(); construction succeeds then', async () => {
    const host = new Host();
    const written: string[] = [];
    host.write('a', () => written.push('a'));
    await tick();
    expect(host.connects).toBe(1);
    expect(written).toEqual([]);
    host.life.opened();
    await tick();
    expect(written).toEqual(['a']);
    expect(host.life.state.status).toBe('open');
  });

  it('a failure before the first session fails construction with that error and shuts the connection', async () => {
    const host = new Host();
    await tick();
    const failure = new ConnectionError('refused');
    host.life.fail(failure);
    const [error] = await once(host, 'error');
    expect(error).toBe(failure);
    expect(host.shutdowns).toBe(1);
    expect(host.life.state).toMatchObject({ status: 'closed', error: failure });
  });

  it('destroy() while connecting ends the connection and settles construction at once', async () => {
    const host = new Host();
    await tick();
    host.destroy();
    await once(host, 'close');
    expect(host.shutdowns).toBe(1);
    expect(host.life.state).toMatchObject({ status: 'closed', ending: undefined });
  });

  it('a signal aborted before the start fails construction with AbortError, without connecting', async () => {
    const controller = new AbortController();
    controller.abort();
    const host = new Host(controller.signal);
    const [error] = await once(host, 'error');
    expect(error).toBeInstanceOf(AbortError);
    expect((error as Error).message).toBe('The test session was aborted before it started.');
    expect(host.connects).toBe(0);
  });
});

describe('DuplexLifecycle: ending and failing', () => {
  it('close() announces a complete ending unless decide() said otherwise, ends the readable side, settles end()', async () => {
    const host = await started();
    await ending(host);
    const finished = once(host, 'finish');
    const ended = once(host, 'end');
    const announced: unknown[] = [];
    host.life.decide({ complete: false, reason: 'response-stalled', unansweredSpeechMs: 40 });
    expect(host.life.ending).toEqual({ complete: false, reason: 'response-stalled', unansweredSpeechMs: 40 });
    host.life.close((e) => announced.push(e));
    await finished;
    await ended;
    expect(announced).toEqual([{ complete: false, reason: 'response-stalled', unansweredSpeechMs: 40 }]);
    expect(host.changes.slice(-2)).toEqual(['ending->closing', 'closing->closed']);
  });

  it('a failure while ending with nothing left to read fails end() at once', async () => {
    const host = await started();
    await ending(host);
    const failure = new ConnectionError('dropped');
    host.life.fail(failure);
    const [error] = await once(host, 'error');
    expect(error).toBe(failure);
  });

  it('a failure waits until a paused reader has taken what already arrived', async () => {
    const host = await started();
    host.pause();
    host.push(Buffer.from('abc'));
    await ending(host);
    const errors: Error[] = [];
    host.on('error', (e) => errors.push(e));
    host.life.decide({ complete: false, reason: 'gave-up', unansweredSpeechMs: 10 });
    host.life.fail(new ConnectionError('dropped'));
    await tick();
    expect(host.destroyed).toBe(false);
    expect(host.life.ending).toMatchObject({ reason: 'gave-up' });
    const closed = new Promise((resolve) => host.once('close', resolve));
    expect(host.read()?.toString()).toBe('abc');
    host.read();
    await closed;
    expect(errors.map((e) => e.message)).toEqual(['dropped']);
  });

  it('an abort destroys the stream with AbortError, but not once the ending is decided', async () => {
    const controller = new AbortController();
    const host = await started(new Host(controller.signal));
    await ending(host);
    host.life.decide(COMPLETE);
    controller.abort();
    expect(host.destroyed).toBe(false);

    const other = new AbortController();
    const aborted = await started(new Host(other.signal));
    other.abort();
    const [error] = await once(aborted, 'error');
    expect(error).toBeInstanceOf(AbortError);
    expect((error as Error).message).toBe('The test session was aborted.');
  });
});
