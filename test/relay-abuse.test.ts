/**
 * The relay against browsers that are not well behaved, over real sockets on loopback: hundreds
 * of connections that never speak, oversized frames, a browser that never reads. Each test
 * asserts the figures the abuse is measured by: the memory the process holds per connection,
 * the relay's own count of what it holds (`stats.bufferedBytes`), how and when each connection
 * was closed, and that nothing reached the service. The 10 s bounds run on fake clocks; the
 * sockets stay real, so between steps the tests wait for what the sockets deliver.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_CLIENT_EVENT_BYTES } from '../lib/realtime/codec.js';
import { BrowserClient } from './helpers/browser-client.js';
import { Closers, openSession, startRelay, until } from './helpers/relay-setup.js';

const closers = new Closers();
afterEach(async () => {
  vi.useRealTimers();
  await closers.closeAll();
});

/** Fake clocks for the long bounds; sockets, `setImmediate` and `nextTick` stay real. */
function fakeClock(): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap and external memory after a full collection, in bytes. */
function memory(): number {
  gc();
  gc();
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external;
}

describe('connections that never speak', () => {
  it('500 of them (400 with a token, 100 waiting for one): bounded memory each, all closed at the 10 s first-message limit, nothing opened upstream', async () => {
    fakeClock();
    const service = await closers.fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, maxSessions: 1000, maxPendingConnections: 100 });
    const token = r.relay.mintToken({ maxSessions: 400 });
    const before = memory();
    const browsers: BrowserClient[] = [];
    for (let i = 0; i < 500; i++) browsers.push(await r.connect({ token: i < 400 ? token : null }));
    // One more without a token is over maxPendingConnections, and one more with it over its maxSessions.
    expect((await BrowserClient.refusal(r.url)).status).toBe(429);
    expect((await BrowserClient.refusal(`${r.url}?token=${token}`)).status).toBe(429);
    const held = memory() - before;
    expect(r.relay.stats).toMatchObject({ sessions: 400, pending: 100, upstream: 0, bufferedBytes: 0 });
    // Both ends of each connection live in this process: the browser's `ws` client and the relay's side.
    const perConnection = held / 500;
    console.log(`relay abuse: 500 idle connections held ${(held / 1024 / 1024).toFixed(1)} MiB (${(perConnection / 1024).toFixed(1)} KiB each, both ends)`);
    expect(perConnection).toBeLessThan(48 * 1024);

    await vi.advanceTimersByTimeAsync(9_999);
    expect(browsers.filter((b) => b.isClosed)).toHaveLength(0);
    const started = performance.now();
    await vi.advanceTimersByTimeAsync(1);
    const closes = await Promise.all(browsers.map((b) => b.closed));
    const closedInMs = performance.now() - started;
    console.log(`relay abuse: all 500 closed ${closedInMs.toFixed(0)} ms (real time) after the 10 s limit`);
    expect(new Set(closes.map((c) => `${c.code} ${c.reason}`))).toEqual(new Set(['1008 No session.update within 10000 ms of connecting.']));
    await until(() => r.relay.stats.sessions === 0 && r.relay.stats.pending === 0, 'every slot to be freed');
    expect(r.relay.stats.refused).toMatchObject({ firstMessage: 500, maxPendingConnections: 1, maxSessionsPerToken: 1 });
    expect(service.upgradeRequests).toBe(0);
  }, 120_000);
});

describe('oversized frames', () => {
  it('events over 1 MiB, again and again: each answered with the error event, none forwarded, nothing kept', async () => {
    const { r, browser, peer } = await openSession(closers);
    const big = JSON.stringify({ type: 'x.padding', pad: 'a'.repeat(MAX_CLIENT_EVENT_BYTES + 100_000) });
    let peak = 0;
    browser.emitter.on('frame', () => (peak = Math.max(peak, r.relay.stats.bufferedBytes)));
    for (let i = 0; i < 40; i++) browser.send(big);
    await browser.waitForEvent('error', 40);
    expect(browser.ofType('error').every((e) => (e.error as { code: number }).code === 413)).toBe(true);
    expect(peer.events.map((e) => e.type)).toEqual(['session.update']);
    // Frames wait their turn only while one is held back; an oversized one never is.
    expect(peak).toBeLessThan(2 * MAX_CLIENT_EVENT_BYTES);
    expect(r.relay.stats.refusedEvents).toBe(40);
  });

  it('frames over twice the limit from 20 browsers: each closed with 1009 unread', async () => {
    const service = await closers.fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, maxSessionsPerToken: 20 });
    const huge = Buffer.alloc(2 * MAX_CLIENT_EVENT_BYTES + 1, 0x61);
    const token = r.relay.mintToken();
    const browsers = await Promise.all(Array.from({ length: 20 }, () => r.connect({ token })));
    for (const browser of browsers) browser.send(huge);
    const closes = await Promise.all(browsers.map((b) => b.closed));
    expect(closes.map((c) => c.code)).toEqual(Array.from({ length: 20 }, () => 1009));
    await until(() => r.relay.stats.sessions === 0, 'every slot to be freed');
    expect(service.upgradeRequests).toBe(0);
  });
});

describe('a browser that never reads', () => {
  it("refused events, sent without end: each reply waits on the browser's socket, so the relay stops reading it, holds at most maxClientBufferBytes, and cuts it after two ping intervals", async () => {
    fakeClock();
    const maxClientBufferBytes = 64 * 1024;
    const { r, browser, peer } = await openSession(closers, { maxClientBufferBytes });
    browser.ws.pause();
    // One-byte text frames that are not JSON: 7 bytes each on the wire, each answered with a
    // ~130-byte error event. Far more than the kernel's buffers both ways can take.
    let peak = 0;
    for (let round = 0; round < 100; round++) {
      for (let i = 0; i < 4000; i++) browser.ws.send('x');
      await new Promise((resolve) => setImmediate(resolve));
      peak = Math.max(peak, r.relay.stats.bufferedBytes);
    }
    await until(() => {
      peak = Math.max(peak, r.relay.stats.bufferedBytes);
      return r.relay.stats.clientsPaused === 1;
    }, 'the relay to stop reading the browser');
    const refused = r.relay.stats.refusedEvents;
    console.log(`relay abuse: refused events unread: the relay answered ${refused} of 400000 and held at most ${(peak / 1024).toFixed(0)} KiB`);
    expect(refused).toBeLessThan(400_000);
    // The replies it holds, one more, and the frames read before the pause (a byte each).
    expect(peak).toBeLessThan(maxClientBufferBytes + 64 * 1024);
    expect(peer.events.map((e) => e.type)).toEqual(['session.update']);

    await vi.advanceTimersByTimeAsync(19_999);
    expect(r.relay.stats.refused.unresponsive).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.relay.stats.refused.unresponsive).toBe(1);
    expect((await peer.closed).code).toBe(1000);
    await until(() => r.relay.stats.sessions === 0, 'the slot to be freed');
    expect(r.relay.stats.bufferedBytes).toBe(0);
  }, 60_000);

  it('a browser that reads its replies, however many it provokes, keeps its session', async () => {
    const { r, browser, peer } = await openSession(closers, { maxClientBufferBytes: 4096 });
    for (let i = 0; i < 2000; i++) browser.send('x');
    await browser.waitForEvent('error', 2000);
    browser.send({ type: 'response.cancel' });
    await peer.waitForEvent('response.cancel');
    expect(r.relay.stats).toMatchObject({ refusedEvents: 2000, refused: { unresponsive: 0 } });
    expect(browser.isClosed).toBe(false);
  });

  it('the service is paused once the browser holds maxClientBufferBytes; the browser is cut at the second unanswered ping; the upstream session closed', async () => {
    fakeClock();
    const maxClientBufferBytes = 256 * 1024;
    const { r, browser, peer } = await openSession(closers, { maxClientBufferBytes });
    // The browser stops reading: nothing it is sent is taken from its socket any more.
    browser.ws.pause();
    // 48 MiB of translated audio, sent at once: more than the kernel's buffers both ways can take.
    const piece = Buffer.alloc(19_200, 1);
    const event = JSON.stringify({ type: 'response.audio.delta', delta: piece.toString('base64') });
    for (let i = 0; i < 2000; i++) peer.send(event);
    let peak = 0;
    // Stuck: the relay holds the browser's share, and the rest waits on the service's side.
    await until(() => {
      peak = Math.max(peak, r.relay.stats.bufferedBytes);
      return r.relay.stats.bufferedBytes > maxClientBufferBytes && peer.bufferedAmount > 8 * 1024 * 1024;
    }, 'the relay to stop reading the service');
    expect(peak).toBeLessThan(maxClientBufferBytes + 2 * event.length);
    console.log(
      `relay abuse: a browser that never reads: the relay held at most ${(peak / 1024).toFixed(0)} KiB while the service had ${(peer.bufferedAmount / 1024 / 1024).toFixed(1)} MiB waiting`,
    );

    await vi.advanceTimersByTimeAsync(10_000);
    expect(r.relay.stats.refused.unresponsive).toBe(0);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(r.relay.stats.refused.unresponsive).toBe(1);
    peer.resumeReading();
    expect((await peer.closed).code).toBe(1000);
    await until(() => r.relay.stats.sessions === 0, 'the slot to be freed');
    expect(r.relay.stats.bufferedBytes).toBe(0);
  }, 60_000);
});
