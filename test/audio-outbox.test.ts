/**
 * AudioOutbox without sockets: a scripted link whose send buffer and send callbacks the test
 * controls, so coalescing, the socket bound, held writes, the replay bound and rewinds are
 * checked byte for byte.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AudioOutbox, type AudioOutboxOptions, type OutboxLink } from '../lib/realtime/audio-outbox.js';
import type { LinkStatus } from '../lib/realtime/session-link.js';

/** A link that keeps every message "in the socket" (counted in bufferedAmount) until `take()`. */
class ScriptedLink implements OutboxLink {
  status: LinkStatus = 'ready';
  /** The socket is closing: `send` says no (the connection's readyState is no longer OPEN). */
  refuse = false;
  readonly messages: Buffer[] = [];
  /** The frame kind of each message, as the outbox asked for it. */
  readonly binary: boolean[] = [];
  /** Whether each send asked for a completion callback. */
  readonly reported: boolean[] = [];
  /** A send without a callback is written out before `send` returns, as an idle socket's kernel takes it. */
  instant = false;
  readonly #inFlight: Array<{ length: number; callback: ((error?: Error) => void) | undefined }> = [];

  get bufferedAmount(): number {
    return this.#inFlight.reduce((sum, m) => sum + m.length, 0);
  }

  send(data: string | Buffer, callback?: (error?: Error) => void, binary = typeof data !== 'string'): boolean {
    if (this.refuse || (this.status !== 'ready' && this.status !== 'connecting')) return false;
    const message = Buffer.from(data as Buffer);
    this.messages.push(message);
    this.binary.push(binary);
    this.reported.push(callback !== undefined);
    if (!(this.instant && callback === undefined)) this.#inFlight.push({ length: message.length, callback });
    return true;
  }

  /** The kernel takes the oldest `count` messages (or they fail with `error`); their send callbacks run. */
  take(count = Infinity, error?: Error): void {
    for (let i = 0; i < count && this.#inFlight.length; i++) this.#inFlight.shift()!.callback?.(error);
  }

  /** What was sent, as one buffer. */
  get bytes(): Buffer {
    return Buffer.concat(this.messages);
  }
}

function outbox(link: ScriptedLink, options: Partial<AudioOutboxOptions> = {}) {
  const handed: number[] = [];
  const sent: number[] = [];
  const box = new AudioOutbox(link, {
    maxPieceBytes: 1000,
    maxSocketBufferBytes: 3000,
    maxReplayBytes: 10_000,
    encode: (piece) => Buffer.from(piece),
    binary: true,
    handed: (end) => handed.push(end),
    sent: (length) => sent.push(length),
    ...options,
  });
  return { box, handed, sent };
}

const microtask = () => new Promise<void>((resolve) => queueMicrotask(resolve));

describe('AudioOutbox: what leaves, and when', () => {
  it('a run of small writes leaves as one message a microtask later, not one message each', async () => {
    const link = new ScriptedLink();
    const { box, handed } = outbox(link);
    const data = randomBytes(600);
    for (let at = 0; at < 600; at += 60) box.accept(data.subarray(at, at + 60));
    expect(link.messages).toHaveLength(0);
    await microtask();
    expect(link.messages.map((m) => m.length)).toEqual([600]);
    expect(link.bytes.equals(data)).toBe(true);
    expect(handed).toEqual([600]);
  });

  it('sends an encoded Buffer as the frame kind it is told: binary audio, or the bytes of a text event', async () => {
    for (const binary of [true, false]) {
      const link = new ScriptedLink();
      const { box } = outbox(link, { binary, encode: (piece) => Buffer.from(`{"n":${piece.length}}`) });
      box.accept(randomBytes(2500));
      await Promise.resolve();
      expect(link.binary).toEqual([binary, binary, binary]);
      expect(link.messages.map(String)).toEqual(['{"n":1000}', '{"n":1000}', '{"n":500}']);
    }
  });

  it('a whole piece queued leaves at once, in pieces of maxPieceBytes; the rest follows a microtask later', async () => {
    const link = new ScriptedLink();
    const { box } = outbox(link);
    const data = randomBytes(2500);
    box.accept(data);
    expect(link.messages.map((m) => m.length)).toEqual([1000, 1000, 500]);
    expect(link.bytes.equals(data)).toBe(true);
    await microtask();
    expect(link.messages).toHaveLength(3);
  });

  it('stops handing over above maxSocketBufferBytes and goes on as the socket takes; sent() counts what the kernel took', () => {
    const link = new ScriptedLink();
    const { box, sent } = outbox(link, { maxSocketBufferBytes: 1500 });
    const data = randomBytes(5000);
    box.accept(data);
    // 1000 buffered is under the bound, 2000 is over it: two messages, then it waits.
    expect(link.messages).toHaveLength(2);
    expect(box.unsent).toBe(3000);
    expect(box.drained).toBe(false);
    link.take(1);
    expect(sent).toEqual([1000]);
    expect(link.messages).toHaveLength(3);
    for (let i = 0; i < 10; i++) link.take(1);
    expect(link.bytes.equals(data)).toBe(true);
    expect(sent.reduce((a, b) => a + b, 0)).toBe(5000);
    expect(box.drained).toBe(true);
  });

  it('sends nothing while the session is not ready, then everything when pumped', () => {
    const link = new ScriptedLink();
    link.status = 'connecting';
    const { box } = outbox(link);
    const data = randomBytes(1200);
    box.accept(data);
    expect(link.messages).toHaveLength(0);
    link.status = 'ready';
    box.pump();
    expect(link.bytes.equals(data)).toBe(true);
  });
});

describe('AudioOutbox: the memory of messages', () => {
  it('gives each message back once, when the socket is done with it: written, failed, or refused', async () => {
    const link = new ScriptedLink();
    const encoded: Buffer[] = [];
    const released: Array<string | Buffer> = [];
    const { box, handed } = outbox(link, {
      encode: (piece) => {
        const message = Buffer.from(piece);
        encoded.push(message);
        return message;
      },
      release: (message) => released.push(message),
    });
    box.accept(randomBytes(2500));
    await microtask();
    expect(encoded.map((m) => m.length)).toEqual([1000, 1000, 500]);
    expect(released).toHaveLength(0); // all three still in the socket
    link.take(1);
    expect(released).toHaveLength(1);
    expect(released[0]).toBe(encoded[0]);
    link.take(1, new Error('connection lost')); // a connection going down fails its queue
    expect(released[1]).toBe(encoded[1]);
    link.take();
    expect(released[2]).toBe(encoded[2]);
    // A socket that is closing refuses the next message: it is given back at once, not handed.
    link.refuse = true;
    box.accept(randomBytes(1000));
    expect(encoded).toHaveLength(4);
    expect(released).toHaveLength(4);
    expect(released[3]).toBe(encoded[3]);
    expect(handed).toEqual([1000, 2000, 2500]);
    expect(box.unsent).toBe(1000);
  });
});

describe('AudioOutbox: held writes', () => {
  it('a write is called back at once while there is room, and held while the socket is over its bound', () => {
    const link = new ScriptedLink();
    const { box } = outbox(link, { maxSocketBufferBytes: 1500 });
    const calls: Array<Error | null | undefined> = [];
    box.accept(randomBytes(1000));
    box.hold((error) => calls.push(error));
    expect(calls).toEqual([undefined]);
    box.accept(randomBytes(3000));
    box.hold((error) => calls.push(error));
    expect(calls).toHaveLength(1);
    link.take(1); // 1000 of 4000 taken: 3000 unsent or buffered, still over 1500
    expect(calls).toHaveLength(1);
    link.take(2);
    expect(calls).toEqual([undefined, undefined]);
  });

  it('while reconnecting, a write is held only once the replay bound is full', () => {
    const link = new ScriptedLink();
    link.status = 'waiting';
    const { box } = outbox(link, { maxReplayBytes: 2000 });
    const calls: number[] = [];
    box.accept(randomBytes(1500));
    box.hold(() => calls.push(1));
    expect(calls).toEqual([1]);
    box.accept(randomBytes(1000));
    box.hold(() => calls.push(2));
    expect(calls).toEqual([1]);
    expect(box.retained).toBe(2500);
    link.status = 'ready';
    box.pump();
    box.release();
    // Connected again, the bound is the socket's: 2500 buffered is under 3000.
    expect(calls).toEqual([1, 2]);
  });

  it('without reconnecting (no replay bound) a write during an outage is held until the stream fails it', () => {
    const link = new ScriptedLink();
    link.status = 'waiting';
    const { box } = outbox(link, { maxReplayBytes: undefined });
    const calls: Array<Error | null | undefined> = [];
    box.accept(randomBytes(100));
    box.hold((error) => calls.push(error));
    expect(calls).toEqual([]);
    const failure = new Error('gone');
    box.abandon(failure);
    expect(calls).toEqual([failure]);
    box.abandon(null); // nothing held: nothing called twice
    expect(calls).toHaveLength(1);
  });
});

describe('AudioOutbox: what is kept for a replay', () => {
  it('without a replay bound, sent audio is forgotten at once', () => {
    const link = new ScriptedLink();
    const { box } = outbox(link, { maxReplayBytes: undefined });
    box.accept(randomBytes(2000));
    expect(box.sent).toBe(2000);
    expect(box.retained).toBe(0);
  });

  it('keeps sent audio from keepFrom(), and never more than maxReplayBytes of it', () => {
    const link = new ScriptedLink();
    const { box } = outbox(link, { maxReplayBytes: 3000, maxSocketBufferBytes: 100_000 });
    box.accept(randomBytes(2000));
    expect(box.retained).toBe(2000);
    box.keepFrom(500);
    expect(box.start).toBe(500);
    expect(box.retained).toBe(1500);
    box.accept(randomBytes(4000));
    // 6000 sent; at most 3000 of it kept.
    expect(box.start).toBe(3000);
    expect(box.retained).toBe(3000);
  });

  it('rewind sends the kept audio again, byte for byte, and says how much', () => {
    const link = new ScriptedLink();
    const { box, handed } = outbox(link, { maxSocketBufferBytes: 100_000 });
    const data = randomBytes(3000);
    box.accept(data);
    link.take();
    box.keepFrom(1000);
    link.status = 'waiting';
    expect(box.rewind(400)).toBe(2000); // clamped to what is kept
    expect(box.sent).toBe(1000);
    expect(box.unsent).toBe(2000);
    link.messages.length = 0;
    link.status = 'ready';
    box.pump();
    expect(link.bytes.equals(data.subarray(1000))).toBe(true);
    expect(handed.at(-1)).toBe(3000);
  });
});

describe('AudioOutbox: sends that report their completion', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a live source's message on an idle socket asks for no callback and counts as sent at once", async () => {
    const link = new ScriptedLink();
    link.instant = true;
    const { box, sent } = outbox(link);
    for (let i = 0; i < 5; i++) {
      box.accept(randomBytes(200));
      await microtask();
    }
    expect(link.reported).toEqual([false, false, false, false, false]);
    expect(sent).toEqual([200, 200, 200, 200, 200]);
    expect(box.drained).toBe(true);
  });

  it('a message the socket could not write out at once is confirmed by the next send, which reports', async () => {
    const link = new ScriptedLink();
    const { box, sent } = outbox(link);
    box.accept(randomBytes(200));
    await microtask();
    expect(link.reported).toEqual([false]);
    expect(sent).toEqual([]); // still in the socket's buffer: not counted
    box.accept(randomBytes(300));
    await microtask();
    expect(link.reported).toEqual([false, true]);
    link.take(1); // the first: nothing reports it
    expect(sent).toEqual([]);
    link.take(1); // the second's completion: both were written, in order
    expect(sent).toEqual([500]);
    box.accept(randomBytes(200));
    await microtask();
    expect(link.reported).toEqual([false, true, false]); // nothing in flight or unconfirmed: quiet again
  });

  it('asks for completions while a write is held, once every send must report, and for messages of half the bound', async () => {
    const held = new ScriptedLink();
    const a = outbox(held, { maxSocketBufferBytes: 2000, maxPieceBytes: 500 });
    a.box.accept(randomBytes(2500)); // five pieces leave at once: the first quiet, then in flight
    a.box.hold(() => {});
    a.box.accept(randomBytes(500));
    held.take(3);
    expect(held.reported).toEqual([false, true, true, true, true, true]);

    const ending = new ScriptedLink();
    ending.instant = true;
    const b = outbox(ending);
    b.box.reportEverySend();
    b.box.accept(randomBytes(200));
    await microtask();
    expect(ending.reported).toEqual([true]);
    expect(b.sent).toEqual([]);
    ending.take(1);
    expect(b.sent).toEqual([200]);

    const large = new ScriptedLink();
    large.instant = true;
    const c = outbox(large, { maxSocketBufferBytes: 1999 });
    c.box.accept(randomBytes(1000)); // 1000 bytes is more than half of 1999
    expect(large.reported).toEqual([true]);
  });

  it('once every send must report, a message still in the socket is confirmed when the socket has written it, with nothing sent after it', async () => {
    vi.useFakeTimers();
    const link = new ScriptedLink();
    const { box, sent } = outbox(link);
    box.accept(randomBytes(200));
    await microtask();
    box.reportEverySend();
    await vi.advanceTimersByTimeAsync(100);
    expect(sent).toEqual([]); // still buffered: it keeps looking
    link.take(1);
    await vi.advanceTimersByTimeAsync(10);
    expect(sent).toEqual([200]);
  });
});
