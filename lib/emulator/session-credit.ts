/**
 * The credit of one realtime session of the emulator: how much input audio its account lets it
 * process (the `creditSeconds` option, counted in bytes of PCM16 at 24 kHz).
 *
 * Each append is billed as it is read. The append that uses the credit up is cut at the limit,
 * and what follows is not processed: the session stops billing, answers what it has heard and
 * ends with a 402 error that says how much was used. Without a credit every append is processed.
 *
 * The decision of when to stop and what to answer is the session's; this class only counts
 * bytes and words the message of the billing stop.
 */
import { BYTES_PER_SECOND, type RealtimeSessionSettings } from './session-settings.js';

export class SessionCredit {
  readonly #creditBytes: number | undefined;
  readonly #creditSeconds: number | undefined;
  #billedBytes = 0;

  constructor(settings: Pick<RealtimeSessionSettings, 'creditBytes' | 'creditSeconds'>) {
    this.#creditBytes = settings.creditBytes;
    this.#creditSeconds = settings.creditSeconds;
  }

  /** The part of `pcm` the credit covers, billed, and whether the credit is used up with it. */
  bill(pcm: Buffer): { covered: Buffer; exhausted: boolean } {
    if (this.#creditBytes === undefined) return { covered: pcm, exhausted: false };
    const allowed = Math.max(0, this.#creditBytes - this.#billedBytes);
    const exhausted = pcm.length >= allowed;
    const covered = exhausted ? pcm.subarray(0, allowed) : pcm;
    this.#billedBytes += covered.length;
    return { covered, exhausted };
  }

  /** The message of the 402 error that ends a session whose credit is used up. */
  stopMessage(): string {
    const used = (this.#billedBytes / BYTES_PER_SECOND).toFixed(1);
    const credit = (this.#creditSeconds ?? 0).toFixed(1);
    return `Session stopped: the account has no credits left (used ${used} s of ${credit} s).`;
  }
}
