/**
 * What the relay does with a session once it is open, over real sockets on loopback: the
 * service's limits applied before anything is forwarded, the key scrubbed from everything a
 * browser gets (even when the service echoes it), audio both ways (JSON and binary) with its
 * order and bytes kept, backpressure when the service stops reading, each side's end closing the
 * other, upstream drops reconnected with the unanswered input replayed (against the reference
 * server, which shares no code with the library) or reported, and `close()`.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MAX_APPEND_AUDIO_BYTES, MAX_CLIENT_EVENT_BYTES } from '../lib/realtime/codec.js';
import { BrowserClient } from './helpers/browser-client.js';
import { SERVICE_KEY, SESSION, closedAfterEachTest, openSession, startRelay, until } from './helpers/relay-setup.js';
import type { RealtimeRelayOptions } from '../lib/index.js';
import { startReferenceServer } from './reference-server/index.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';
import { waitFor } from './helpers/wait-for.js';

const closers = closedAfterEachTest();

const fixture = loadSpeechFixture();

/** `pcm` as JSON appends of `pieceBytes`. */
function appends(pcm: Buffer, pieceBytes = 9600): string[] {
  const out: string[] = [];
  for (let at = 0; at < pcm.length; at += pieceBytes) {
    out.push(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm.subarray(at, at + pieceBytes).toString('base64') }));
  }
  return out;
}

/** A JSON event of exactly `bytes` bytes. */
function eventOfSize(bytes: number): string {
  const shell = JSON.stringify({ type: 'x.padding', pad: '' });
  return JSON.stringify({ type: 'x.padding', pad: 'a'.repeat(bytes - shell.length) });
}

/** Audio whose bytes all differ from their neighbours' (so order and loss show in a digest). */
function ramp(bytes: number): Buffer {
  const pcm = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) pcm[i] = (i * 7 + (i >> 8)) & 0xff;
  return pcm;
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

const opened = (options: Partial<RealtimeRelayOptions> = {}) => openSession(closers, options);

/* ------------------------------------------------------------------------------------------- */

describe("the service's limits, applied before forwarding", () => {
  it('a text event over 1 MiB: the error event (413), not forwarded; one of exactly 1 MiB is; the session goes on', async () => {
    const { r, browser, peer } = await opened();
    browser.send(eventOfSize(MAX_CLIENT_EVENT_BYTES + 1));
    const error = await browser.waitForEvent('error');
    expect(error).toEqual({
      type: 'error',
      error: {
        message: `The event is ${MAX_CLIENT_EVENT_BYTES + 1} bytes; a client event may be at most 1048576 bytes (1 MiB) of JSON text. It was not forwarded.`,
        code: 413,
      },
    });
    browser.send(eventOfSize(MAX_CLIENT_EVENT_BYTES));
    browser.send({ type: 'response.cancel' });
    await peer.waitForEvent('response.cancel');
    expect(peer.events.map((e) => [e.type, JSON.stringify(e).length])).toEqual([
      ['session.update', expect.any(Number)],
      ['x.padding', MAX_CLIENT_EVENT_BYTES],
      ['response.cancel', expect.any(Number)],
    ]);
    expect(r.relay.stats.refusedEvents).toBe(1);
    expect(browser.isClosed).toBe(false);
  });

  it('a frame over twice the limit is not read at all: closed with 1009, and the upstream session with it', async () => {
    const { browser, peer } = await opened();
    browser.send(eventOfSize(2 * MAX_CLIENT_EVENT_BYTES + 1));
    expect((await browser.closed).code).toBe(1009);
    expect((await peer.closed).code).toBe(1000);
  });

  it('an append of more than 256 KiB of audio: the error event (413), not forwarded; 256 KiB exactly is', async () => {
    const { r, browser, peer } = await opened();
    const over = ramp(MAX_APPEND_AUDIO_BYTES + 2);
    browser.send({ type: 'input_audio_buffer.append', audio: over.toString('base64') });
    expect((await browser.waitForEvent('error')).error).toEqual({
      message: `input_audio_buffer.append carries ${MAX_APPEND_AUDIO_BYTES + 2} bytes of audio; at most 262144 bytes (256 KiB) of decoded audio per event. It was not forwarded.`,
      code: 413,
    });
    const exact = ramp(MAX_APPEND_AUDIO_BYTES);
    browser.send({ type: 'input_audio_buffer.append', audio: exact.toString('base64') });
    await peer.waitForAudioBytes(MAX_APPEND_AUDIO_BYTES);
    expect(peer.audioDigest()).toBe(sha256(exact));
    expect(r.relay.stats.refusedEvents).toBe(1);
  });

  it('binary audio from the browser: over 256 KiB refused (413), up to it sent on as appends, bytes and order kept', async () => {
    const { browser, peer } = await opened();
    browser.send(ramp(MAX_APPEND_AUDIO_BYTES + 2));
    expect((await browser.waitForEvent('error')).error).toMatchObject({ code: 413 });
    const audio = ramp(3 * MAX_APPEND_AUDIO_BYTES + 1001);
    for (let at = 0; at < audio.length; at += MAX_APPEND_AUDIO_BYTES) browser.send(audio.subarray(at, at + MAX_APPEND_AUDIO_BYTES));
    // The odd byte at the end waits for its sample's other half.
    await peer.waitForAudioBytes(audio.length - 1);
    expect(peer.binaryFrames).toBe(0);
    expect(peer.audioDigest()).toBe(sha256(audio.subarray(0, audio.length - 1)));
  });

  it.for([
    [
      'not base64',
      JSON.stringify({ type: 'input_audio_buffer.append', audio: 'not base64!' }),
      'input_audio_buffer.append "audio" is not valid base64. It was not forwarded.',
    ],
    [
      'no audio field',
      JSON.stringify({ type: 'input_audio_buffer.append' }),
      'input_audio_buffer.append needs an "audio" field: a base64 string of PCM16 audio.',
    ],
    ['not JSON', 'hello', 'The event is not valid JSON. It was not forwarded.'],
    ['no type', '{"audio":"AAAA"}', 'The event is not a JSON object with a string "type" field. It was not forwarded.'],
  ] as const)('%s: the error event (400), nothing forwarded', async ([, text, message]) => {
    const { browser, peer } = await opened();
    browser.send(text);
    expect((await browser.waitForEvent('error')).error).toEqual({ message, code: 400 });
    browser.send({ type: 'response.cancel' });
    await peer.waitForEvent('response.cancel');
    expect(peer.events.map((e) => e.type)).toEqual(['session.update', 'response.cancel']);
    expect(peer.appendEvents).toBe(0);
  });
});

/* ------------------------------------------------------------------------------------------- */

describe('the service key never reaches a browser', () => {
  it('a service that echoes the key in session.created and in its error messages: scrubbed from every frame', async () => {
    const service = await closers.emulator({ faults: { echoKey: true } });
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browser = await r.connect();
    browser.send({ type: 'session.update', session: SESSION });
    const created = await browser.waitForEvent('session.created');
    expect((created.session as Record<string, unknown>).api_key).toBe('[redacted]');
    browser.send({ type: 'input_audio_buffer.commit' });
    const error = await browser.waitForEvent('error');
    expect((error.error as { message: string }).message).toContain('(key [redacted])');
    expect(browser.texts.join('\n')).not.toContain(SERVICE_KEY);
  });

  it('the key escaped inside JSON text, in a binary frame, and in the close reason after an error: all scrubbed', async () => {
    const { browser, peer } = await opened();
    const escaped = `\\u${SERVICE_KEY.charCodeAt(0).toString(16).padStart(4, '0')}${SERVICE_KEY.slice(1)}`;
    peer.send(`{"type":"response.text.delta","delta":"say ${escaped} twice: ${escaped}"}`);
    peer.ws.send(Buffer.concat([Buffer.from([1, 2]), Buffer.from(SERVICE_KEY), Buffer.from([3, 4])]), { binary: true });
    peer.sendError(`Quota exhausted for ${SERVICE_KEY}.`, 402);
    peer.close(1008, `billing: ${SERVICE_KEY}`);
    const closed = await browser.closed;
    expect(browser.ofType('response.text.delta')).toEqual([{ type: 'response.text.delta', delta: 'say [redacted] twice: [redacted]' }]);
    expect(browser.binary).toEqual([Buffer.concat([Buffer.from([1, 2]), Buffer.alloc(SERVICE_KEY.length), Buffer.from([3, 4])])]);
    // The service's own error event, passed on (once), then its close code; no second error from the relay.
    expect(browser.ofType('error')).toEqual([{ type: 'error', error: { message: 'Quota exhausted for [redacted].', code: 402 } }]);
    expect(closed.code).toBe(1008);
    expect(closed.reason).not.toContain(SERVICE_KEY);
    expect(browser.texts.join('\n')).not.toContain(SERVICE_KEY);
  });

  it('a refused upstream handshake whose body quotes the key: the error event says why, the key redacted', async () => {
    const refusing = createServer();
    refusing.on('upgrade', (_req, socket) => {
      const body = JSON.stringify({ error: `Key ${SERVICE_KEY} is not valid.`, status: 401 });
      socket.end(`HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    closers.add(() => new Promise((resolve) => refusing.close(resolve)));
    const r = await startRelay(closers, { realtimeUrl: `ws://127.0.0.1:${(refusing.address() as AddressInfo).port}` });
    const browser = await r.connect();
    browser.send({ type: 'session.update', session: SESSION });
    const closed = await browser.closed;
    expect(browser.events).toEqual([
      { type: 'error', error: { message: 'The realtime service refused the API key (HTTP 401): Key [redacted] is not valid.', code: 401 } },
    ]);
    expect(closed).toEqual({ code: 1011, reason: 'The realtime service refused the API key (HTTP 401): Key [redacted] is not valid.' });
  });
});

/* ------------------------------------------------------------------------------------------- */

describe('relaying both ways', () => {
  it('binary output audio from the service reaches the browser as binary frames, bit for bit', async () => {
    const service = await closers.emulator({ audioFrames: 'binary' });
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browser = await r.connect();
    browser.send({ type: 'session.update', session: SESSION });
    await browser.waitForEvent('session.created');
    for (const text of appends(fixture.pcm)) browser.send(text);
    const expected = expectedTranslation(fixture.pcm, fixture.utterances);
    expect((await browser.waitForAudio(expected.length)).equals(expected)).toBe(true);
    expect(browser.binary.length).toBeGreaterThan(0);
    expect(browser.ofType('response.audio.delta')).toEqual([]);
  });

  it('an event between two stretches of audio reaches the service between them', async () => {
    const { browser, peer } = await opened();
    const first = ramp(5 * 64 * 1024 + 4000);
    const second = ramp(70_000);
    let audioAtCancel = -1;
    peer.ws.on('message', (data, isBinary) => {
      if (!isBinary && (data as Buffer).includes('response.cancel')) audioAtCancel = peer.audioBytes;
    });
    for (const text of appends(first, 50_000)) browser.send(text);
    browser.send({ type: 'response.cancel' });
    browser.send(second);
    await peer.waitForAudioBytes(first.length + second.length);
    expect(audioAtCancel).toBe(first.length);
    expect(peer.audioDigest()).toBe(sha256(Buffer.concat([first, second])));
  });

  it('audio sent before session.created is held and sent once the session is up, not lost', async () => {
    const service = await closers.fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browser = await r.connect();
    const early = ramp(48_000);
    browser.send({ type: 'session.update', session: SESSION });
    browser.send(early);
    const peer = await service.nextPeer();
    await peer.waitForEvent('session.update');
    expect(peer.audioBytes).toBe(0);
    peer.sendSessionCreated();
    await peer.waitForAudioBytes(early.length);
    expect(peer.audioDigest()).toBe(sha256(early));
  });

  it('a service that stops reading: the browser is paused (its frames wait in its own buffers); what the relay holds stays bounded; nothing is lost', async () => {
    const maxSocketBufferBytes = 64 * 1024;
    const { r, browser, peer } = await opened({ maxSocketBufferBytes, reconnect: { maxReplayMs: 1000 } });
    peer.pauseReading();
    // More than the kernel's buffers both ways can take: the rest must wait in the browser's.
    const audio = ramp(48 * 1024 * 1024);
    const piece = 128 * 1024;
    for (let at = 0; at < audio.length; at += piece) browser.ws.send(audio.subarray(at, at + piece));
    let peak = 0;
    // Stuck: the relay no longer reads the browser, and its socket to the service is over its bound.
    await until(() => {
      const stats = r.relay.stats;
      peak = Math.max(peak, stats.bufferedBytes);
      return stats.clientsPaused === 1 && stats.bufferedBytes > maxSocketBufferBytes;
    }, 'the relay to stop reading the browser');
    // Bounded by the replay (1 s, 48 000 bytes), the socket bound and the frames read before the pause, not by the 48 MiB sent.
    expect(peak).toBeLessThan(48_000 + maxSocketBufferBytes + 2 * piece + 64 * 1024);
    expect(browser.ws.bufferedAmount).toBeGreaterThan(0);
    peer.resumeReading();
    await peer.waitForAudioBytes(audio.length);
    expect(peer.audioDigest()).toBe(sha256(audio));
  }, 60_000);

  it('pings from the browser are answered', async () => {
    const { browser } = await opened();
    const pong = new Promise<Buffer>((resolve) => browser.ws.once('pong', resolve));
    browser.ws.ping(Buffer.from('are you there'));
    expect((await pong).toString()).toBe('are you there');
  });

  it('a browser that vanishes (no close frame): its upstream session is closed, its slot freed', async () => {
    const { r, browser, peer } = await opened();
    browser.ws.terminate();
    expect((await peer.closed).code).toBe(1000);
    await until(() => r.relay.stats.sessions === 0, 'the slot to be freed');
    expect(r.relay.stats).toMatchObject({ sessions: 0, upstream: 0 });
  });

  it('the service ends the session normally: the browser is closed with 1000 and its reason', async () => {
    const { browser, peer } = await opened();
    peer.close(1000, 'session over');
    expect(await browser.closed).toEqual({ code: 1000, reason: 'session over' });
    expect(browser.ofType('error')).toEqual([]);
  });
});

/* ------------------------------------------------------------------------------------------- */

describe('upstream drops', () => {
  it('reconnected, the unanswered speech replayed (reference server): one session.created, relay.reconnecting and relay.reconnected, every answer once', async () => {
    const service = await startReferenceServer({ apiKey: SERVICE_KEY, answer: 'utterance', dropAfterInputMs: 4000 });
    closers.add(() => service.close());
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl, reconnect: { initialDelayMs: 10, maxDelayMs: 40 } });
    const browser = await r.connect();
    browser.send({ type: 'session.update', session: SESSION });
    await browser.waitForEvent('session.created');
    for (const text of appends(fixture.pcm)) browser.send(text);
    await waitFor(
      () =>
        service.sessions === 2 &&
        service.responses.length >= fixture.utterances.length &&
        browser.ofType('response.audio.done').length === service.responses.length,
      { onEvent: [browser.emitter, 'frame'] },
    );
    expect(browser.ofType('session.created')).toHaveLength(1);
    expect(browser.ofType('relay.reconnecting')).toEqual([
      { type: 'relay.reconnecting', attempt: 1, delay_ms: expect.any(Number), reason: expect.stringContaining('closed') },
    ]);
    expect(browser.ofType('relay.reconnected')).toEqual([
      {
        type: 'relay.reconnected',
        session_id: expect.any(String),
        attempt: 1,
        outage_ms: expect.any(Number),
        replayed_ms: expect.any(Number),
        not_replayed_ms: 0,
      },
    ]);
    expect(browser.ofType('relay.reconnected')[0]!.replayed_ms).toBeGreaterThan(0);
    // Every byte the service sent, delivered once, in order; the second session answered what the first did not.
    expect(browser.audio().equals(service.sentAudio())).toBe(true);
    expect(service.responses.filter((response) => response.session === 2).length).toBeGreaterThan(0);
    expect(r.relay.stats.reconnects).toBe(1);
  });

  it('reconnect: false: a drop is reported to the browser as the error event, then 1013; nothing reconnected', async () => {
    const { r, service, browser, peer } = await opened({ reconnect: false });
    peer.terminate();
    const closed = await browser.closed;
    expect(browser.ofType('error')).toEqual([
      { type: 'error', error: { message: expect.stringMatching(/^The realtime service closed the connection \(code 1006\)|^Realtime connection failed/) } },
    ]);
    expect(closed.code).toBe(1013);
    expect(service.upgradeRequests).toBe(1);
    expect(r.relay.stats.reconnects).toBe(0);
  });

  it("a billing stop (the service's error, then its close 1008): passed on once, closed with 1008, not reconnected", async () => {
    const service = await closers.emulator({ creditSeconds: 1 });
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browser = await r.connect();
    browser.send({ type: 'session.update', session: SESSION });
    await browser.waitForEvent('session.created');
    for (const text of appends(fixture.pcm)) browser.send(text);
    const closed = await browser.closed;
    expect(browser.ofType('error')).toEqual([{ type: 'error', error: { message: expect.any(String), code: 402 } }]);
    expect(closed.code).toBe(1008);
    expect(browser.ofType('relay.reconnecting')).toEqual([]);
  });
});

describe('close()', () => {
  it('closes every browser with 1001 and every upstream session, then takes no more connections', async () => {
    const service = await closers.emulator();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    const browsers = [await r.connect(), await r.connect()];
    for (const browser of browsers) {
      browser.send({ type: 'session.update', session: SESSION });
      await browser.waitForEvent('session.created');
    }
    const waiting = await r.connect();
    expect(r.relay.stats).toMatchObject({ sessions: 3, upstream: 2 });
    await r.relay.close();
    for (const browser of [...browsers, waiting]) expect(await browser.closed).toEqual({ code: 1001, reason: 'relay closing' });
    expect(service.realtimeSessions()).toEqual([]);
    expect(r.relay.stats).toMatchObject({ sessions: 0, upstream: 0 });
    expect(r.server.listenerCount('upgrade')).toBe(0);
    await expect(BrowserClient.connect(`${r.url}?token=${r.relay.mintToken()}`)).rejects.toBeDefined();
  });
});
