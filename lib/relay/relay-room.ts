/**
 * A room: one speaker, any number of listeners, one upstream session per language someone
 * listens to. The speaker's audio goes into a `RealtimeFanout` (one input, one session per
 * target language), so it is sent once per language however many listen; each language's
 * events are written to each of its listeners as they happen, in the service's order (audio as
 * binary frames, the rest as the service's JSON, the key scrubbed).
 *
 * - A language's session opens when its first listener joins while the speaker talks (or when
 *   the speaker arrives, for the listeners already waiting), its input starting then; it is
 *   closed when its last listener leaves (after `keepLanguageMs`).
 * - A listener too far behind is dropped (see `RoomListener`), never waited for: the sessions
 *   read the service at its own pace, and the speaker waits only for the sessions' sending
 *   sides (the fan-out's bound, and `maxLagMs` for one language that lags the others).
 * - A language that fails ends alone: its listeners get the error and close 1011; the others
 *   go on. When the speaker leaves, each language translates what it was sent, then its
 *   listeners are closed (1000). Listeners who come while no speaker talks wait for one, up to
 *   `listenerWaitMs`.
 */
import type { WebSocket } from 'ws';
import type { RtTranslateError } from '../errors.js';
import { RealtimeFanout, type FanoutEvent } from '../realtime/fanout.js';
import type { RealtimeLanguage } from '../realtime/languages.js';
import type { ResolvedRelayOptions, ResolvedRoomsOptions } from './relay-options.js';
import { RoomListener, type ListenerDrop } from './room-listener.js';
import { RoomSpeaker } from './room-speaker.js';
import { scrubFrame, scrubText } from './scrub.js';

/** What a room needs of its relay. */
export interface RoomContext {
  options: ResolvedRelayOptions;
  rooms: ResolvedRoomsOptions;
  /** A listener was let go by the relay. */
  dropped(reason: ListenerDrop): void;
  /** A speaker's event was refused. */
  refusedEvent(): void;
  /** A speaker stopped reading. */
  unresponsive(): void;
  /** Nobody is left in the room and nothing runs: the relay forgets it. */
  emptied(room: RelayRoom): void;
}

/** The speaker's choices, from its handshake. */
export interface SpeakerSetup {
  from: RealtimeLanguage;
  /** The languages listeners may pick; undefined: any realtime language. */
  languages: ReadonlySet<RealtimeLanguage> | undefined;
  /** Beta model and mode selectors, passed on to the service. */
  model: string | undefined;
  mode: string | undefined;
}

/** A talk: the speaker's fan-out, from the speaker's arrival until every language is over. */
interface Talk {
  speaker: RoomSpeaker;
  setup: SpeakerSetup;
  fanout: RealtimeFanout;
  /** The speaker has left: the fan-out's input has ended. */
  ended: boolean;
  /** Each running language's `session.created`, as sent, for listeners who join later. */
  created: Map<RealtimeLanguage, Buffer>;
  /** Languages stopped because their last listener left, until their session is over. */
  stopping: Set<RealtimeLanguage>;
  closed: Promise<void>;
}

const BINARY_WIRE = 'binary';

export class RelayRoom {
  readonly id: string;
  readonly #ctx: RoomContext;
  readonly #listeners = new Map<RealtimeLanguage, Set<RoomListener>>();
  /** Listeners waiting for a speaker, each with its bound. */
  readonly #waiting = new Map<RoomListener, NodeJS.Timeout>();
  /** Languages kept after their last listener left, until the timer. */
  readonly #idle = new Map<RealtimeLanguage, NodeJS.Timeout>();
  #talk: Talk | undefined;
  #listenerCount = 0;
  #shutdown = false;

  constructor(id: string, ctx: RoomContext) {
    this.id = id;
    this.#ctx = ctx;
  }

  /** Listener connections in the room. */
  get listeners(): number {
    return this.#listenerCount;
  }

  /** Whether a speaker is connected, or its talk is still finishing (no other speaker may start). */
  get speaking(): boolean {
    return this.#talk !== undefined;
  }

  /** Whether a speaker is connected now. */
  get speakerConnected(): boolean {
    return this.#talk !== undefined && !this.#talk.ended;
  }

  /** Upstream sessions running (one per language). */
  get languages(): number {
    return this.#talk?.fanout.targets.filter((t) => t.outcome === undefined).length ?? 0;
  }

  /** Bytes held for the room: the listeners' and the speaker's unsent bytes. */
  get bufferedBytes(): number {
    let bytes = this.#talk?.speaker.bufferedBytes ?? 0;
    for (const set of this.#listeners.values()) for (const l of set) bytes += l.bufferedBytes;
    return bytes;
  }

  /** Whether the speaker's socket is paused because a language's sending side is full. */
  get speakerPaused(): boolean {
    return this.#talk?.speaker.paused === true;
  }

  /** Reconnects of the running languages' sessions. */
  get reconnects(): number {
    return this.#talk?.fanout.stats.targets.reduce((n, t) => n + t.reconnects, 0) ?? 0;
  }

  /**
   * Why a listener of `lang` would be refused now (before its upgrade), or undefined: a language
   * the speaker did not offer (403), or one language too many while the speaker talks (429).
   */
  listenerRefusal(lang: RealtimeLanguage): { status: number; message: string; reason: 'language' | 'maxLanguagesPerRoom' } | undefined {
    const talk = this.#talk;
    if (!talk || talk.ended) return undefined;
    if (talk.setup.languages && !talk.setup.languages.has(lang)) {
      return { status: 403, reason: 'language', message: `The speaker of this room offers ${[...talk.setup.languages].join(', ')}; not ${lang}.` };
    }
    if (!this.#running(lang) && this.languages >= this.#ctx.rooms.maxLanguagesPerRoom) {
      return {
        status: 429,
        reason: 'maxLanguagesPerRoom',
        message: `This room translates its most languages at once (${this.#ctx.rooms.maxLanguagesPerRoom}); pick one already offered.`,
      };
    }
    return undefined;
  }

  /* ------------------------------------------------------------------ the speaker */

  /** The speaker's socket, upgraded (the relay checked that none talks). */
  addSpeaker(ws: WebSocket, setup: SpeakerSetup): RoomSpeaker {
    const { options: o, rooms } = this.#ctx;
    const u = o.upstream;
    const fanout = new RealtimeFanout({
      ...u,
      from: setup.from,
      to: [],
      maxTargets: rooms.maxLanguagesPerRoom,
      maxLagMs: rooms.maxLagMs,
      ...(setup.model === undefined ? {} : { model: setup.model }),
      ...(setup.mode === undefined ? {} : { mode: setup.mode }),
    });
    const speaker: RoomSpeaker = new RoomSpeaker(
      ws,
      { pingIntervalMs: o.clientPingIntervalMs, maxBufferBytes: o.maxClientBufferBytes },
      {
        audio: (pcm) => {
          if (talk.ended) return true;
          return fanout.write(pcm);
        },
        refused: () => this.#ctx.refusedEvent(),
        unresponsive: () => this.#ctx.unresponsive(),
        gone: () => this.#speakerLeft(talk),
      },
    );
    const closed = new Promise<void>((resolve) => fanout.once('close', resolve));
    const talk: Talk = { speaker, setup, fanout, ended: false, created: new Map(), stopping: new Set(), closed };
    this.#talk = talk;
    fanout.on('drain', () => speaker.resume());
    fanout.on('error', () => {
      // Only an abort destroys the fan-out with an error (the relay closing): its targets say why.
    });
    fanout.on('event', (event: FanoutEvent) => this.#onEvent(talk, event));
    void closed.then(() => this.#talkOver(talk));
    speaker.notice({ type: 'room.opened', room: this.id, from: setup.from, languages: setup.languages ? [...setup.languages] : null });
    // The listeners who waited for a speaker: their languages start now.
    for (const [listener, timer] of this.#waiting) {
      clearTimeout(timer);
      this.#waiting.delete(listener);
      this.#join(talk, listener);
    }
    this.#announce();
    return speaker;
  }

  #speakerLeft(talk: Talk): void {
    if (talk.ended) return;
    talk.ended = true;
    // Each language translates what it was sent, then its listeners are closed.
    talk.fanout.end();
    this.#announce();
  }

  /** The talk's fan-out has closed: its listeners are closed; a new speaker may start. */
  #talkOver(talk: Talk): void {
    if (this.#talk !== talk) return;
    this.#talk = undefined;
    for (const timer of this.#idle.values()) clearTimeout(timer);
    this.#idle.clear();
    for (const set of this.#listeners.values()) {
      for (const listener of set) if (!this.#waiting.has(listener)) listener.close(1000, 'The speaker has left and the translation is complete.');
    }
    this.#checkEmpty();
  }

  /* ------------------------------------------------------------------ listeners */

  /** A listener's socket, upgraded. */
  addListener(ws: WebSocket, lang: RealtimeLanguage): RoomListener {
    const rooms = this.#ctx.rooms;
    const listener = new RoomListener(
      ws,
      lang,
      { maxBufferBytes: rooms.maxListenerBufferBytes, pingIntervalMs: this.#ctx.options.clientPingIntervalMs },
      (l) => this.#listenerLeft(l),
      (reason) => this.#ctx.dropped(reason),
    );
    let set = this.#listeners.get(lang);
    if (!set) this.#listeners.set(lang, (set = new Set()));
    set.add(listener);
    this.#listenerCount += 1;
    const talk = this.#talk;
    if (talk && !talk.ended) {
      this.#join(talk, listener);
    } else {
      listener.notice({ type: 'room.waiting', room: this.id, lang });
      const ms = rooms.listenerWaitMs;
      this.#waiting.set(
        listener,
        setTimeout(() => listener.close(1000, `No speaker in the room within ${ms} ms; reconnect to wait again.`), ms),
      );
    }
    this.#announce();
    return listener;
  }

  /** A listener joins a talk: its language runs (started if need be), and it hears it from now on. */
  #join(talk: Talk, listener: RoomListener): void {
    const lang = listener.lang;
    const refusal = this.listenerRefusal(lang);
    if (refusal) {
      listener.send(JSON.stringify({ type: 'error', error: { message: refusal.message, code: refusal.status } }), false);
      listener.close(1008, refusal.message);
      return;
    }
    const idle = this.#idle.get(lang);
    if (idle) {
      clearTimeout(idle);
      this.#idle.delete(lang);
    }
    if (!this.#running(lang)) {
      this.#startLanguage(talk, lang);
      return;
    }
    // Stopped a moment ago (its last listener left): it starts again once that session is over.
    if (talk.stopping.has(lang)) return;
    const created = talk.created.get(lang);
    if (created) listener.send(created, false);
  }

  #startLanguage(talk: Talk, lang: RealtimeLanguage): void {
    const target = talk.fanout.addTarget(lang);
    talk.created.delete(lang);
    // The audio reaches the listeners through the events, in order with the rest: the target's
    // own Readable is drained so that it never holds the session back.
    target.output.resume();
  }

  #listenerLeft(listener: RoomListener): void {
    const set = this.#listeners.get(listener.lang);
    if (!set?.delete(listener)) return;
    this.#listenerCount -= 1;
    const timer = this.#waiting.get(listener);
    if (timer) {
      clearTimeout(timer);
      this.#waiting.delete(listener);
    }
    if (set.size === 0) {
      this.#listeners.delete(listener.lang);
      this.#languageIdle(listener.lang);
    }
    this.#announce();
    this.#checkEmpty();
  }

  /** The last listener of `lang` left: its session is closed (after `keepLanguageMs`). */
  #languageIdle(lang: RealtimeLanguage): void {
    const talk = this.#talk;
    if (!talk || !this.#running(lang)) return;
    const stop = (): void => {
      this.#idle.delete(lang);
      if (this.#listeners.has(lang)) return;
      // At once: nobody hears the rest.
      talk.stopping.add(lang);
      talk.fanout.target(lang)?.output.destroy();
    };
    const ms = this.#ctx.rooms.keepLanguageMs;
    if (ms === 0) stop();
    else this.#idle.set(lang, setTimeout(stop, ms));
  }

  /** Whether `lang` has a session that is not over (starting, running, or stopping). */
  #running(lang: RealtimeLanguage): boolean {
    const target = this.#talk?.fanout.target(lang);
    return target !== undefined && target.outcome === undefined;
  }

  /* ------------------------------------------------------------------ what the sessions say */

  #onEvent(talk: Talk, event: FanoutEvent): void {
    if (event.lang === undefined) return;
    const lang = event.lang;
    const secret = this.#ctx.options.connection.apiKey;
    switch (event.type) {
      case 'target.added':
        return;
      case 'target.done':
        this.#languageDone(talk, lang, event.error);
        return;
      case 'audio.delta':
        this.#broadcast(lang, scrubFrame(event.audio, true, secret), true);
        return;
      case 'reconnecting':
        this.#broadcast(lang, JSON.stringify({ type: 'relay.reconnecting', attempt: event.attempt, delay_ms: event.delayMs }), false);
        return;
      case 'reconnected':
        this.#broadcast(lang, JSON.stringify({ type: 'relay.reconnected', session_id: event.sessionId }), false);
        return;
      case 'response':
      case 'warning':
      case 'ended':
        return;
      default: {
        if (event.wireType === BINARY_WIRE) return;
        const frame = scrubFrame(Buffer.from(JSON.stringify(event.raw)), false, secret);
        if (event.type === 'session.created') {
          // A session re-established after a drop says it again: listeners heard it once.
          if (talk.created.has(lang)) return;
          talk.created.set(lang, frame);
        }
        this.#broadcast(lang, frame, false);
      }
    }
  }

  #broadcast(lang: RealtimeLanguage, data: Buffer | string, binary: boolean): void {
    const set = this.#listeners.get(lang);
    if (!set) return;
    for (const listener of set) if (!this.#waiting.has(listener)) listener.send(data, binary);
  }

  /** A language is over: its listeners are told why when it failed, and closed. */
  #languageDone(talk: Talk, lang: RealtimeLanguage, error: RtTranslateError | undefined): void {
    talk.created.delete(lang);
    const set = this.#listeners.get(lang);
    if (talk.stopping.delete(lang) && set && !talk.ended) {
      // Listeners came while it stopped: it starts again for them.
      this.#startLanguage(talk, lang);
      this.#announce();
      return;
    }
    const secret = this.#ctx.options.connection.apiKey;
    if (set) {
      for (const listener of [...set]) {
        if (this.#waiting.has(listener)) continue;
        if (error) {
          const message = scrubText(error.message, secret);
          listener.send(JSON.stringify({ type: 'error', error: { message, code: error.status ?? 500 } }), false);
          listener.close(1011, message);
        } else if (talk.ended) {
          listener.close(1000, 'The speaker has left and the translation is complete.');
        } else {
          listener.close(1011, 'The translation of this language ended; reconnect to listen again.');
        }
      }
    }
    this.#announce();
  }

  /** The speaker learns who listens to what. */
  #announce(): void {
    const talk = this.#talk;
    if (!talk || talk.ended) return;
    const languages = talk.fanout.targets
      .filter((t) => t.outcome === undefined)
      .map((t) => ({ lang: t.lang, status: t.status, listeners: this.#listeners.get(t.lang)?.size ?? 0 }));
    talk.speaker.notice({ type: 'room.languages', room: this.id, listeners: this.#listenerCount, languages });
  }

  #checkEmpty(): void {
    if (!this.#shutdown && this.#talk === undefined && this.#listenerCount === 0) this.#ctx.emptied(this);
  }

  /** Closes everyone (1001) and stops every session at once; resolves once all is closed. */
  async shutdown(): Promise<void> {
    this.#shutdown = true;
    const closing: Array<Promise<void>> = [];
    const talk = this.#talk;
    if (talk) {
      talk.speaker.close(1001, 'relay closing');
      closing.push(talk.speaker.closed);
      talk.fanout.destroy();
      closing.push(talk.closed);
    }
    for (const set of this.#listeners.values()) {
      for (const listener of set) {
        listener.close(1001, 'relay closing');
        closing.push(listener.closed);
      }
    }
    for (const timer of [...this.#waiting.values(), ...this.#idle.values()]) clearTimeout(timer);
    await Promise.all(closing);
  }
}
