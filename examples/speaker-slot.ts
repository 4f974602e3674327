/**
 * One speaker translated at a time, as the Discord example bots do it (`discord-bot.ts`,
 * `discord-fanout-bot.ts`).
 *
 * The slot starts a translation only while it is free: it subscribes to the speaker's packets,
 * hands them to the bot's translation path (`translateSpeaker`, or a fan-out into several
 * languages) and holds both. As soon as the path's `done` settles, ended or failed (the service
 * closed the session, a network error), the slot is free again and the packet stream destroyed,
 * so that the voice receiver drops that subscription and a later `subscribe()` gets a fresh one:
 * the next person who speaks is translated. A path that cannot start (bad options) destroys its
 * subscription at once.
 */
import type { Readable } from 'node:stream';

/** A translation path and the packet stream feeding it (a receiver subscription). */
export interface SpeakerPath<P extends { done: Promise<unknown> }> {
  path: P;
  packets: Readable;
}

export class SpeakerSlot<P extends { done: Promise<unknown> } = { done: Promise<unknown> }> {
  #active: { speaker: string; entry: SpeakerPath<P> } | undefined;

  /** The speaker being translated and their path, or undefined when the slot is free. */
  get active(): { speaker: string; entry: SpeakerPath<P> } | undefined {
    return this.#active;
  }

  /**
   * When the slot is free: `subscribe()` to the speaker's packets and `translate` them, held for
   * `speaker` until the path's `done` settles. Undefined when someone else holds the slot; throws
   * what `translate` throws (the subscription destroyed first).
   */
  take(speaker: string, subscribe: () => Readable, translate: (packets: Readable) => P): SpeakerPath<P> | undefined {
    if (this.#active !== undefined) return undefined;
    const packets = subscribe();
    let path: P;
    try {
      path = translate(packets);
    } catch (error) {
      packets.destroy();
      throw error;
    }
    const entry = { path, packets };
    const active = { speaker, entry };
    this.#active = active;
    const release = (): void => {
      if (this.#active === active) this.#active = undefined;
      if (!packets.destroyed) packets.destroy();
    };
    path.done.then(release, release);
    return entry;
  }
}
