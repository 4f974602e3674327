/**
 * The tests' `waitFor` helper: it re-checks its predicate on an emitter's events, never on a
 * timer, and leaves no listener behind.
 */
import { EventEmitter } from 'node:events';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { waitFor } from './helpers/wait-for.js';

/** Whether `promise` has settled after the microtasks and one macrotask turn now queued. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await tick();
  return done;
}

describe('waitFor', () => {
  it('resolves at once with the value when the predicate already holds, listening to nothing', async () => {
    const emitter = new EventEmitter();
    await expect(waitFor(() => 'yes', { onEvent: [emitter, 'change'] })).resolves.toBe('yes');
    expect(emitter.listenerCount('change')).toBe(0);
  });

  it('re-checks on the listed events only, in the listener, and then removes its listeners', async () => {
    const emitter = new EventEmitter();
    let count = 0;
    const seen: number[] = [];
    const waiting = waitFor(() => (count >= 2 ? count : undefined), { onEvent: [emitter, 'a', 'b'] });
    count = 2; // the state changed, but no event says so: not noticed
    expect(await settled(waiting)).toBe(false);
    emitter.emit('other');
    expect(await settled(waiting)).toBe(false);
    emitter.on('b', () => seen.push(count));
    count = 3;
    emitter.emit('b');
    count = 4; // checked in the listener: the value is the one the event was emitted with
    await expect(waiting).resolves.toBe(3);
    expect(seen).toEqual([3]);
    expect([emitter.listenerCount('a'), emitter.listenerCount('b')]).toEqual([0, 1]);
  });

  it('listens to several emitters', async () => {
    const [one, two] = [new EventEmitter(), new EventEmitter()];
    let ready = false;
    const waiting = waitFor(() => ready, {
      onEvent: [
        [one, 'x'],
        [two, 'y'],
      ],
    });
    ready = true;
    two.emit('y');
    await expect(waiting).resolves.toBe(true);
    expect([one.listenerCount('x'), two.listenerCount('y')]).toEqual([0, 0]);
  });

  it('rejects with what the predicate throws, and stops listening', async () => {
    const emitter = new EventEmitter();
    let fail = false;
    const waiting = waitFor(
      () => {
        if (fail) throw new Error('the stream failed first');
        return false;
      },
      { onEvent: [emitter, 'change'] },
    );
    fail = true;
    emitter.emit('change');
    await expect(waiting).rejects.toThrow('the stream failed first');
    expect(emitter.listenerCount('change')).toBe(0);
  });
});
