/**
 * EventOutlet in a minimal Duplex with a link that only records its pauses: events under one
 * name to listeners and iterators, data to the reader, and the socket paused while either is
 * behind (resumed, and reported, once neither is).
 */
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { EventOutlet } from '../lib/realtime/event-outlet.js';

type Ev = { type: 'said'; text: string } | { type: 'big'; bytes: number };

function outlet(options: { count?: number; readableHighWaterMark?: number } = {}) {
  const stream = new Duplex({
    readableHighWaterMark: options.readableHighWaterMark ?? 16,
    read() {},
    write(_c, _e, cb) {
      cb();
    },
  });
  const pauses = new Set<string>();
  const link = {
    pause: (reason: string) => void pauses.add(reason),
    resume: (reason: string) => void pauses.delete(reason),
    get paused() {
      return pauses.size > 0;
    },
  };
  let resumed = 0;
  const out = new EventOutlet<Ev>(stream, link, {
    bounds: { count: options.count ?? 100, bytes: 1000, weigh: (e) => (e.type === 'big' ? e.bytes : 0) },
    listenerArgs: (e) => (e.type === 'said' ? [e.text] : [e.bytes]),
    resumed: () => resumed++,
  });
  return { stream, pauses, out, resumed: () => resumed };
}

describe('EventOutlet', () => {
  it('publishes an event as `event`, under its own name with its listener arguments, and to iterators', async () => {
    const { stream, out } = outlet();
    const seen: unknown[] = [];
    stream.on('event', (e) => seen.push(['event', e.type]));
    stream.on('said', (text) => seen.push(['said', text]));
    const iterator = out.subscribe();
    out.publish({ type: 'said', text: 'hola' });
    expect(seen).toEqual([
      ['event', 'said'],
      ['said', 'hola'],
    ]);
    expect(await iterator.next()).toEqual({ value: { type: 'said', text: 'hola' }, done: false });
    out.end();
    expect(await iterator.next()).toEqual({ value: undefined, done: true });
  });

  it('a reader that is behind pauses the socket; its next read resumes it, reported once', () => {
    const { stream, pauses, out, resumed } = outlet({ readableHighWaterMark: 4 });
    stream.pause();
    out.deliver(Buffer.alloc(8));
    expect([...pauses]).toEqual(['reader']);
    expect(stream.read()).toHaveLength(8);
    out.read();
    expect(pauses.size).toBe(0);
    expect(resumed()).toBe(1);
    out.read();
    expect(resumed()).toBe(1);
  });

  it('while only an iterator reads, data reaches the iterator only: nothing is buffered for a reader', () => {
    const { stream, out } = outlet();
    out.subscribe();
    out.deliver(Buffer.alloc(8));
    expect(stream.readableLength).toBe(0);
    const alone = outlet();
    alone.out.deliver(Buffer.alloc(8));
    expect(alone.stream.readableLength).toBe(8);
  });

  it('an iterator past its bound pauses the socket until it has drained to half', async () => {
    const { pauses, out, resumed } = outlet({ count: 2 });
    const iterator = out.subscribe();
    for (let i = 0; i < 3; i++) out.publish({ type: 'said', text: String(i) });
    expect([...pauses]).toEqual(['events']);
    await iterator.next();
    await iterator.next();
    expect(pauses.size).toBe(0);
    expect(resumed()).toBe(1);
  });

  it('nothing is delivered once the readable side has ended or the stream is destroyed', () => {
    const { stream, out } = outlet();
    stream.destroy();
    out.deliver(Buffer.alloc(8));
    expect(stream.readableLength).toBe(0);
  });
});
