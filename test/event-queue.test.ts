/**
 * EventFanout: every subscriber gets every item in order; a subscriber that falls behind past
 * its bound (items or bytes) turns the pressure on, and it goes off only once every queue has
 * drained to half; iterators end or throw with the stream, after what was queued.
 */
import { describe, expect, it } from 'vitest';
import { EventFanout } from '../lib/realtime/event-queue.js';

interface Item {
  n: number;
  bytes?: number;
}

function fanout(count = 4, bytes = 1000) {
  const pressure: boolean[] = [];
  const fan = new EventFanout<Item>({ count, bytes, weigh: (item) => item.bytes ?? 0 }, (full) => pressure.push(full));
  return { fan, pressure };
}

async function take<T>(iterator: AsyncIterator<T>, count: number): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < count; i++) out.push((await iterator.next()).value as T);
  return out;
}

describe('EventFanout', () => {
  it('gives every subscriber every item in order, also to one already waiting', async () => {
    const { fan } = fanout();
    const a = fan.subscribe();
    const b = fan.subscribe();
    const waiting = a.next();
    fan.push({ n: 1 });
    fan.push({ n: 2 });
    expect(await waiting).toEqual({ value: { n: 1 }, done: false });
    expect((await take(a, 1)).map((i) => i.n)).toEqual([2]);
    expect((await take(b, 2)).map((i) => i.n)).toEqual([1, 2]);
    expect(fan.subscribers).toBe(2);
  });

  it('is bounded in items: pressure on past the bound, off only at half', async () => {
    const { fan, pressure } = fanout(4);
    const it = fan.subscribe();
    for (let n = 1; n <= 4; n++) fan.push({ n });
    expect(pressure).toEqual([]);
    fan.push({ n: 5 });
    expect(pressure).toEqual([true]);
    expect(fan.maxQueued).toBe(5);
    await take(it, 2); // 3 left: still over half of 4
    expect(pressure).toEqual([true]);
    await take(it, 1); // 2 left: half
    expect(pressure).toEqual([true, false]);
  });

  it('is bounded in bytes, by the weight of what is queued', async () => {
    const { fan, pressure } = fanout(100, 1000);
    const it = fan.subscribe();
    fan.push({ n: 1, bytes: 600 });
    fan.push({ n: 2, bytes: 300 });
    expect(pressure).toEqual([]);
    fan.push({ n: 3, bytes: 200 });
    expect(pressure).toEqual([true]);
    await take(it, 1); // 500 left: not over half of 1000
    expect(pressure).toEqual([true, false]);
  });

  it('the slowest subscriber holds the pressure; one that returns lets it go', async () => {
    const { fan, pressure } = fanout(2);
    const fast = fan.subscribe();
    const slow = fan.subscribe();
    for (let n = 1; n <= 3; n++) fan.push({ n });
    expect(pressure).toEqual([true]);
    await take(fast, 3);
    expect(pressure).toEqual([true]);
    await slow.return!();
    expect(pressure).toEqual([true, false]);
    expect(fan.subscribers).toBe(1);
  });

  it('without subscribers nothing is queued and nothing pushes back', () => {
    const { fan, pressure } = fanout(1);
    for (let n = 0; n < 100; n++) fan.push({ n });
    expect(pressure).toEqual([]);
    expect(fan.maxQueued).toBe(0);
  });

  it('end(): an iterator drains what is queued, then is done; pressure goes off; later pushes are dropped', async () => {
    const { fan, pressure } = fanout(1);
    const it = fan.subscribe();
    fan.push({ n: 1 });
    fan.push({ n: 2 });
    expect(pressure).toEqual([true]);
    fan.end();
    expect(pressure).toEqual([true, false]);
    fan.push({ n: 3 });
    const seen: number[] = [];
    for await (const item of it) seen.push(item.n);
    expect(seen).toEqual([1, 2]);
  });

  it('end(error): an iterator drains what is queued, then throws the error; a waiting one throws at once', async () => {
    const { fan } = fanout();
    const queued = fan.subscribe();
    const waiting = fan.subscribe();
    fan.push({ n: 1 });
    await take(waiting, 1);
    const pending = waiting.next();
    const failure = new Error('stream failed');
    fan.end(failure);
    await expect(pending).rejects.toBe(failure);
    expect(await queued.next()).toEqual({ value: { n: 1 }, done: false });
    await expect(queued.next()).rejects.toBe(failure);
    // The error is thrown once; after it the iterator is done.
    expect(await queued.next()).toEqual({ value: undefined, done: true });
  });

  it('a subscriber that comes after the end finishes at once (with the error, if there was one)', async () => {
    const plain = fanout().fan;
    plain.end();
    expect(await plain.subscribe().next()).toEqual({ value: undefined, done: true });
    const failed = fanout().fan;
    const failure = new Error('late');
    failed.end(failure);
    await expect(failed.subscribe().next()).rejects.toBe(failure);
  });
});
