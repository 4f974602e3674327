/**
 * The relay's rooms over real sockets on loopback: one speaker, listeners who each pick a
 * language, one upstream session per language however many listen (counted at the reference
 * server, which shares no code with the library), each listener's audio byte for byte what its
 * language's session sent, a listener that reads nothing dropped without holding anyone back, a
 * listener that sends refused, the last listener of a language closing its session, and the
 * credentials of both roles checked before any upgrade.
 */
import { describe, expect, it } from 'vitest';
import { BrowserClient, type BrowserOptions } from './helpers/browser-client.js';
import { RELAY_SECRET, SERVICE_KEY, closedAfterEachTest, listen, startRelay, until, type Closers, type RunningRelay } from './helpers/relay-setup.js';
import { startReferenceServer } from './reference-server/index.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { mintToken, resolveTokenSecret } from '../lib/relay/relay-tokens.js';
import type { FakePeer } from './helpers/fake-realtime-server.js';
import { createRealtimeRelay, ValidationError, type RealtimeRelayOptions } from '../lib/index.js';

const closers = closedAfterEachTest();

const fixture = loadSpeechFixture();
const ROOM = 'keynote';

/** A connection to the relay's rooms with `query`, the token in a subprotocol (as the browser module sends it). */
async function roomClient(r: RunningRelay, query: string, token: string | undefined, options: BrowserOptions = {}): Promise<BrowserClient> {
  const url = `${r.host}${r.relay.roomsPath}?${query}`;
  const client = await BrowserClient.connect(url, { ...options, protocols: token === undefined ? [] : ['rt-translate', `rt-translate.token.${token}`] });
  closers.add(() => client.ws.terminate());
  return client;
}

function speaker(r: RunningRelay, query = 'from=en-us'): Promise<BrowserClient> {
  return roomClient(r, query, r.relay.mintToken({ room: ROOM, role: 'speaker' }));
}

function listener(r: RunningRelay, lang: string): Promise<BrowserClient> {
  return roomClient(r, `lang=${lang}`, r.relay.mintToken({ room: ROOM, role: 'listener' }));
}

async function relayFor(realtimeUrl: string, options: Partial<RealtimeRelayOptions> = {}): Promise<RunningRelay> {
  return startRelay(closers, { realtimeUrl, rooms: true, ...options });
}

/** The fake service's next connection, its session created; returns it with the language it translates to. */
async function acceptPeer(service: Awaited<ReturnType<Closers['fake']>>): Promise<{ peer: FakePeer; lang: string; id: string }> {
  const peer = await service.nextPeer();
  const update = await peer.waitForEvent('session.update');
  const id = peer.sendSessionCreated();
  return { peer, lang: (update.session as { target_language: string }).target_language, id };
}

/* ------------------------------------------------------------------------------------------- */

describe('one speaker, listeners in two languages', () => {
  it("exactly one upstream session per language; every listener gets its language's audio and text as the session sent them", async () => {
    const reference = await startReferenceServer({ apiKey: SERVICE_KEY });
    closers.add(() => reference.close());
    const r = await relayFor(reference.realtimeUrl);
    const talker = await speaker(r);
    expect(await talker.waitForEvent('room.opened')).toEqual({ type: 'room.opened', room: ROOM, from: 'en-us', languages: null });
    const listeners = await Promise.all(['es-es', 'fr-fr', 'es-es', 'fr-fr', 'es-es'].map(async (lang) => ({ lang, client: await listener(r, lang) })));
    for (const { client } of listeners) await client.waitForEvent('session.created');
    expect(reference.sessions).toBe(2);
    expect(r.relay.stats.rooms).toEqual({ rooms: 1, speakers: 1, listeners: 5, languages: 2 });

    for (let at = 0; at < fixture.pcm.length; at += 9600) talker.send(fixture.pcm.subarray(at, at + 9600));
    // The speaker leaves: each language translates what it heard, then its listeners are closed.
    talker.ws.close();
    const closes = await Promise.all(listeners.map(({ client }) => client.closed));
    expect(closes.map((c) => c.code)).toEqual([1000, 1000, 1000, 1000, 1000]);
    expect(reference.sessions).toBe(2);

    for (const lang of ['es-es', 'fr-fr']) {
      const answers = reference.responses.filter((response) => response.text.startsWith(`[${lang}]`));
      expect(answers.length).toBeGreaterThan(0);
      const audio = Buffer.concat(answers.map((a) => a.audio));
      for (const { client } of listeners.filter((l) => l.lang === lang)) {
        expect(client.audio().equals(audio)).toBe(true);
        expect(client.ofType('response.text.done').map((e) => e.text)).toEqual(answers.map((a) => a.text));
        // The room's notices and the service's events; never the key.
        expect(client.texts.join('\n')).not.toContain(SERVICE_KEY);
      }
    }
    await until(() => r.relay.stats.rooms?.rooms === 0, 'the room to be forgotten');
  });

  it('the last listener of a language leaving closes its session; the other language goes on and a new listener reopens it', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const talker = await speaker(r);
    await talker.waitForEvent('room.opened');
    const spanish = await listener(r, 'es-es');
    const es = await acceptPeer(service);
    const french = await listener(r, 'fr-fr');
    const fr = await acceptPeer(service);
    expect([es.lang, fr.lang]).toEqual(['es-es', 'fr-fr']);
    await spanish.waitForEvent('session.created');
    await french.waitForEvent('session.created');
    expect(r.relay.stats.rooms?.languages).toBe(2);

    spanish.ws.close();
    await es.peer.closed;
    expect(fr.peer.isClosed).toBe(false);
    await until(() => r.relay.stats.rooms?.languages === 1, 'one language left');
    const speech = Buffer.alloc(4800, 7);
    talker.send(speech);
    await fr.peer.waitForAudioBytes(speech.length);
    expect(service.connections).toBe(2);

    // Spanish again: a new session, its input from now on.
    const again = await listener(r, 'es-es');
    const es2 = await acceptPeer(service);
    expect(es2.lang).toBe('es-es');
    await again.waitForEvent('session.created');
    talker.send(speech);
    await es2.peer.waitForAudioBytes(speech.length);
    await fr.peer.waitForAudioBytes(2 * speech.length);
    // The speaker is told who listens to what.
    const last = talker.ofType('room.languages').at(-1)!;
    expect(last).toMatchObject({
      listeners: 2,
      languages: [
        { lang: 'fr-fr', listeners: 1 },
        { lang: 'es-es', listeners: 1 },
      ],
    });
  });

  it('a listener who comes just after the last one of its language left gets a new session, not the old one', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const talker = await speaker(r);
    const first = await listener(r, 'es-es');
    const old = await acceptPeer(service);
    await first.waitForEvent('session.created');
    first.ws.close();
    await until(() => r.relay.stats.rooms?.listeners === 0, 'the first listener to be gone');
    const second = await listener(r, 'es-es');
    await old.peer.closed;
    const fresh = await acceptPeer(service);
    expect(fresh.lang).toBe('es-es');
    const created = await second.waitForEvent('session.created');
    // The new session's, not the old one's.
    expect((created.session as { id: string }).id).toBe(fresh.id);
    expect(fresh.id).not.toBe(old.id);
    expect(second.ofType('session.created')).toHaveLength(1);
    talker.send(Buffer.alloc(4800, 2));
    await fresh.peer.waitForAudioBytes(4800);
    expect(old.peer.audioBytes).toBe(0);
  });

  it('a listener that reads nothing is dropped (slowListener); the one beside it gets every byte, and the speaker is never paused for it', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl, { rooms: { maxListenerBufferBytes: 512 * 1024 } });
    const talker = await speaker(r);
    await talker.waitForEvent('room.opened');
    const reader = await listener(r, 'es-es');
    const { peer } = await acceptPeer(service);
    const stalled = await listener(r, 'es-es');
    await reader.waitForEvent('session.created');
    await stalled.waitForEvent('session.created');
    stalled.ws.pause();

    const piece = Buffer.alloc(128 * 1024);
    let sent = 0;
    // Piece by piece, each read by the reader before the next: until the stalled one is dropped
    // (its kernel buffers full, then the relay's bound), and a few more after.
    let after = 0;
    while (after < 4) {
      piece.fill(sent / piece.length);
      peer.ws.send(piece, { binary: true });
      sent += piece.length;
      await reader.waitForAudio(sent);
      if (r.relay.stats.refused.slowListener > 0) after += 1;
      expect(sent).toBeLessThan(256 * 1024 * 1024);
    }
    const expected = Buffer.concat(Array.from({ length: sent / piece.length }, (_, i) => Buffer.alloc(piece.length, i)));
    expect(reader.audio().equals(expected)).toBe(true);
    expect(r.relay.stats.refused.slowListener).toBe(1);
    expect(r.relay.stats.clientsPaused).toBe(0);
    // Reading again, it finds its connection closed.
    stalled.ws.resume();
    await stalled.closed;
    await until(() => r.relay.stats.rooms?.listeners === 1, 'the dropped listener to be gone');
  });

  it('a listener that sends is refused (error 403, close 1008); nothing it sent reaches the service', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const talker = await speaker(r);
    await talker.waitForEvent('room.opened');
    const client = await listener(r, 'es-es');
    const { peer } = await acceptPeer(service);
    await client.waitForEvent('session.created');
    client.send(Buffer.alloc(4800, 1));
    expect((await client.waitForEvent('error')).error).toEqual({
      message: "A room listener receives only: it may not send audio or events. Connect as the room's speaker to send audio.",
      code: 403,
    });
    expect((await client.closed).code).toBe(1008);
    expect(r.relay.stats.refused.listenerSent).toBe(1);
    // The session was closed with its last listener; nothing of the listener's went up.
    await peer.closed;
    expect(peer.audioBytes).toBe(0);
  });

  it("the speaker's other events are refused with an error event and go nowhere; its audio goes on", async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const talker = await speaker(r);
    const client = await listener(r, 'de-de');
    const { peer } = await acceptPeer(service);
    await client.waitForEvent('session.created');
    talker.send({ type: 'session.update', session: { target_language: 'ja-jp' } });
    expect((await talker.waitForEvent('error')).error).toMatchObject({ code: 400 });
    talker.send(Buffer.alloc(960, 3));
    await peer.waitForAudioBytes(960);
    expect(peer.events.map((e) => e.type)).toEqual(['session.update']);
    expect(peer.audioBytes).toBe(960);
    expect(r.relay.stats.refusedEvents).toBe(1);
  });

  it('a language whose session fails ends alone: its listeners get the error and 1011; the other language goes on', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const talker = await speaker(r);
    const spanish = await listener(r, 'es-es');
    const es = await acceptPeer(service);
    const french = await listener(r, 'fr-fr');
    const fr = await acceptPeer(service);
    await spanish.waitForEvent('session.created');
    await french.waitForEvent('session.created');
    fr.peer.sendError('Voice not available for fr-fr.', 403);
    fr.peer.close(1008, 'voice');
    const closed = await french.closed;
    expect(closed.code).toBe(1011);
    expect(french.ofType('error').at(-1)).toMatchObject({ error: { code: 403 } });
    expect(spanish.isClosed).toBe(false);
    const speech = Buffer.alloc(9600, 5);
    talker.send(speech);
    await es.peer.waitForAudioBytes(speech.length);
    const answer = Buffer.alloc(4800, 9);
    es.peer.sendResponse(answer, 'hola');
    expect((await spanish.waitForAudio(answer.length)).equals(answer)).toBe(true);
    expect(talker.isClosed).toBe(false);
  });

  it("a service that stops reading pauses the speaker's socket (the sessions' sending sides bound the relay's memory)", async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl, { maxSocketBufferBytes: 64 * 1024 });
    const talker = await speaker(r);
    const client = await listener(r, 'es-es');
    const { peer } = await acceptPeer(service);
    await client.waitForEvent('session.created');
    peer.pauseReading();
    // More than the kernel's buffers and the sessions' bounds can hold: the relay must stop reading the speaker.
    const piece = Buffer.alloc(96_000, 1);
    const sent = 32 * 1024 * 1024 - ((32 * 1024 * 1024) % piece.length);
    for (let at = 0; at < sent; at += piece.length) talker.send(piece);
    await until(() => r.relay.stats.clientsPaused === 1, 'the speaker to be paused');
    // Nothing was lost meanwhile, and the speaker was not cut.
    expect(talker.isClosed).toBe(false);
    expect(r.relay.stats.clientsPaused).toBe(1);
    peer.resumeReading();
    await peer.waitForAudioBytes(sent);
    await until(() => r.relay.stats.clientsPaused === 0, 'the speaker to be read again');
  });

  it('listeners who come before the speaker wait for it, and their languages start when it arrives', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const early = await Promise.all(['ja-jp', 'ja-jp', 'ko-kr'].map((lang) => listener(r, lang)));
    expect(await early[0]!.waitForEvent('room.waiting')).toEqual({ type: 'room.waiting', room: ROOM, lang: 'ja-jp' });
    for (const client of early) await client.waitForEvent('room.waiting');
    expect(service.connections).toBe(0);
    const talker = await speaker(r);
    await talker.waitForEvent('room.opened');
    const peers = [await acceptPeer(service), await acceptPeer(service)];
    expect(peers.map((p) => p.lang)).toEqual(['ja-jp', 'ko-kr']);
    for (const client of early) await client.waitForEvent('session.created');
    expect(service.connections).toBe(2);
    expect(talker.isClosed).toBe(false);
  });
});

/* ------------------------------------------------------------------------------------------- */

describe('credentials and caps, before any upgrade', () => {
  it.for([
    [
      'a listener token as the speaker',
      (r: RunningRelay) => ({ query: 'role=speaker&from=en-us', token: r.relay.mintToken({ room: ROOM, role: 'listener' }) }),
      403,
      'This token admits a listener only.',
    ],
    [
      'a speaker token as a listener',
      (r: RunningRelay) => ({ query: 'role=listener&lang=es-es', token: r.relay.mintToken({ room: ROOM, role: 'speaker' }) }),
      403,
      'This token admits a speaker only.',
    ],
    [
      'another room',
      (r: RunningRelay) => ({ query: 'room=other&lang=es-es', token: r.relay.mintToken({ room: ROOM, role: 'listener' }) }),
      403,
      'This token is for another room.',
    ],
    [
      'a session token',
      (r: RunningRelay) => ({ query: 'lang=es-es', token: r.relay.mintToken() }),
      401,
      'This token opens sessions, not rooms: the application mints a room token with { room, role }.',
    ],
    [
      'no token',
      () => ({ query: 'room=keynote&role=listener&lang=es-es', token: undefined }),
      401,
      'No room token: pass it as ?token= or in the subprotocol rt-translate.token.<token>.',
    ],
    [
      'a forged token',
      () => ({ query: 'lang=es-es', token: mintToken(resolveTokenSecret('another-secret-of-at-least-32-bytes!'), { room: ROOM, role: 'listener' }, 10) }),
      401,
      'The relay token is not valid.',
    ],
    [
      'an expired token',
      () => ({ query: 'lang=es-es', token: mintToken(resolveTokenSecret(RELAY_SECRET), { room: ROOM, role: 'listener', ttlMs: 1 }, 10, Date.now() - 10) }),
      401,
      'The relay token has expired: get a new one.',
    ],
    [
      'a listener without a language',
      (r: RunningRelay) => ({ query: '', token: r.relay.mintToken({ room: ROOM, role: 'listener' }) }),
      400,
      expect.stringContaining('lang'),
    ],
    [
      'a speaker without a source language',
      (r: RunningRelay) => ({ query: 'from=xx-yy', token: r.relay.mintToken({ room: ROOM, role: 'speaker' }) }),
      400,
      expect.stringContaining('from'),
    ],
  ] as const)('%s: refused', async ([, make, status, message]) => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const { query, token } = make(r);
    const url = `${r.host}${r.relay.roomsPath}?${query}`;
    const refusal = await BrowserClient.refusal(url, { protocols: token === undefined ? [] : ['rt-translate', `rt-translate.token.${token}`] });
    expect(refusal.status).toBe(status);
    expect(JSON.parse(refusal.body)).toEqual({ error: message, status });
    expect(service.upgradeRequests).toBe(0);
  });

  it("a room token on the relay's session path is refused (401): it opens no session of its own", async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl);
    const refusal = await BrowserClient.refusal(`${r.url}?token=${r.relay.mintToken({ room: ROOM, role: 'speaker' })}`);
    expect(refusal.status).toBe(401);
    expect(service.upgradeRequests).toBe(0);
  });

  it("a page from another origin is refused (403) in either role; authorize's no is a 401", async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl, { allowedOrigins: ['https://app.example.com'], authorize: (req) => !req.url?.includes('banned') });
    for (const role of ['speaker', 'listener'] as const) {
      const token = r.relay.mintToken({ room: ROOM, role });
      const url = `${r.host}${r.relay.roomsPath}?from=en-us&lang=es-es`;
      expect(
        (await BrowserClient.refusal(url, { origin: 'https://evil.example.com', protocols: ['rt-translate', `rt-translate.token.${token}`] })).status,
      ).toBe(403);
      expect(
        (await BrowserClient.refusal(`${url}&banned`, { origin: 'https://app.example.com', protocols: ['rt-translate', `rt-translate.token.${token}`] }))
          .status,
      ).toBe(401);
    }
    expect(r.relay.stats.refused.origin).toBe(2);
  });

  it('a second speaker (409), a language the speaker does not offer (403), one language too many (429), listeners over the cap (429)', async () => {
    const service = await closers.fake();
    const r = await relayFor(service.realtimeUrl, { rooms: { maxLanguagesPerRoom: 1, maxListenersPerRoom: 2 } });
    const talker = await speaker(r, 'from=en-us&languages=es-es,fr-fr');
    await talker.waitForEvent('room.opened');
    const url = (query: string) => `${r.host}${r.relay.roomsPath}?${query}`;
    const as = (role: 'speaker' | 'listener') => ({ protocols: ['rt-translate', `rt-translate.token.${r.relay.mintToken({ room: ROOM, role })}`] });
    expect((await BrowserClient.refusal(url('from=en-us'), as('speaker'))).status).toBe(409);
    const refusedLanguage = await BrowserClient.refusal(url('lang=de-de'), as('listener'));
    expect(refusedLanguage).toEqual({ status: 403, body: JSON.stringify({ error: 'The speaker of this room offers es-es, fr-fr; not de-de.', status: 403 }) });
    await listener(r, 'es-es');
    await acceptPeer(service);
    expect((await BrowserClient.refusal(url('lang=fr-fr'), as('listener'))).status).toBe(429);
    await listener(r, 'es-es');
    expect((await BrowserClient.refusal(url('lang=es-es'), as('listener'))).status).toBe(429);
    expect(r.relay.stats.refused).toMatchObject({ speakerPresent: 1, language: 1, maxLanguagesPerRoom: 1, maxListenersPerRoom: 1 });
    expect(service.connections).toBe(1);
  });
});

describe('room options, checked before the relay attaches', () => {
  it.for([
    [{ maxLanguagesPerRoom: 65 }, 'rooms.maxLanguagesPerRoom'],
    [{ maxListenersPerRoom: 0 }, 'rooms.maxListenersPerRoom'],
    [{ path: '/v1/realtime' }, 'rooms.path'],
    [{ path: 'rooms' }, 'rooms.path'],
    [{ maxListenerBufferBytes: 10 }, 'rooms.maxListenerBufferBytes'],
    ['yes', 'rooms'],
  ] as const)('rooms %o: a ValidationError naming %s, and nothing attached', async ([rooms, field]) => {
    const { server } = await listen(closers);
    let caught: unknown;
    try {
      createRealtimeRelay({ server, apiKey: SERVICE_KEY, realtimeUrl: 'ws://127.0.0.1:1', rooms: rooms as never });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).field).toBe(field);
    expect(server.listenerCount('upgrade')).toBe(0);
  });

  it("without rooms, the rooms path is not the relay's: 404 when nothing else answers it", async () => {
    const service = await closers.fake();
    const r = await startRelay(closers, { realtimeUrl: service.realtimeUrl });
    expect(r.relay.roomsPath).toBeUndefined();
    expect((await BrowserClient.refusal(`${r.host}/v1/rooms?lang=es-es`)).status).toBe(404);
  });
});
