/**
 * The input side of a translation session that survives drops: audio accepted is heard by a
 * `SpeechLedger` and kept by an `AudioOutbox`, which sends it in append events while the socket
 * has room; what the service has answered is forgotten, and after a drop the rest is sent again
 * from just before its first unanswered speech (`OutageReplay`). The browser relay drives a
 * session this way; the translation stream does the same through the realtime Duplex core
 * (`realtime-duplex.ts`), with the same append framing (`APPEND_FRAMING`).
 */
import { encodeAudioAppendFrame, releaseAppendFrame } from './append-frame.js';
import { AudioOutbox, type AudioOutboxOptions } from './audio-outbox.js';
import { REALTIME_BYTES_PER_FRAME, REALTIME_SAMPLE_RATE } from './codec.js';
import { OutageReplay, REPLAY_PREROLL_MS } from './outage-replay.js';
import type { SessionLink } from './session-link.js';
import type { SpeechLedger } from './speech-ledger.js';

/** Bytes of PCM16 mono 24 kHz per millisecond. */
export const BYTES_PER_MS = (REALTIME_SAMPLE_RATE * REALTIME_BYTES_PER_FRAME) / 1000;

/** Input audio on the translation wire: base64 in JSON append events, each a text frame of its own bytes. */
export const APPEND_FRAMING = {
  encode: encodeAudioAppendFrame,
  binary: false, // a Buffer is the bytes of a text frame
  encodeCopies: true, // base64 text
  release: releaseAppendFrame,
} as const satisfies Partial<AudioOutboxOptions>;

export interface TranslationInputOptions {
  /** Largest audio payload of one append, in bytes (even). */
  maxPieceBytes: number;
  /** The socket's send buffer above which nothing more is handed over (and writers wait). */
  maxSocketBufferBytes: number;
  /** Input kept for a replay, in ms; undefined when drops are not reconnected. */
  maxReplayMs: number | undefined;
  /** Input up to offset `end` was just handed to the socket (after the ledger noted it). */
  handed?(end: number): void;
  /** `length` bytes were taken by the kernel. */
  sent?(length: number): void;
}

export class TranslationInput {
  readonly outbox: AudioOutbox;
  readonly outage: OutageReplay;
  readonly #ledger: SpeechLedger;
  readonly #link: SessionLink;

  constructor(link: SessionLink, ledger: SpeechLedger, o: TranslationInputOptions) {
    this.#link = link;
    this.#ledger = ledger;
    this.outbox = new AudioOutbox(link, {
      maxPieceBytes: o.maxPieceBytes,
      maxSocketBufferBytes: o.maxSocketBufferBytes,
      maxReplayBytes: o.maxReplayMs === undefined ? undefined : o.maxReplayMs * BYTES_PER_MS,
      ...APPEND_FRAMING,
      handed: (end) => {
        ledger.recordSent(end, Date.now());
        this.outage.handed(end);
        o.handed?.(end);
      },
      sent: (length) => o.sent?.(length),
    });
    this.outage = new OutageReplay(ledger, this.outbox, { prerollMs: REPLAY_PREROLL_MS, bytesPerMs: BYTES_PER_MS });
  }

  /** Takes input audio (whole samples): the ledger hears it, the outbox keeps it and sends it when it can. */
  accept(pcm: Buffer): void {
    if (pcm.length === 0) return;
    this.#ledger.accept(pcm);
    this.outbox.accept(pcm);
  }

  /** A response completed: a drop from now on is a new outage, and the input it answered is not sent again. */
  answered(): void {
    this.#link.progress();
    this.outage.forgetAnswered(this.outbox.sent);
  }
}
