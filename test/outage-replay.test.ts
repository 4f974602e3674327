/**
 * OutageReplay with a real SpeechLedger and AudioOutbox over a link that takes everything: what
 * a lost session sends again, what it could not, and the `reconnected` figures and stats.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionError } from '../lib/errors.js';
import { AudioOutbox, type OutboxLink } from '../lib/realtime/audio-outbox.js';
import { OutageReplay } from '../lib/realtime/outage-replay.js';
import { SpeechLedger } from '../lib/realtime/speech-ledger.js';
import { speechThenSilence } from './helpers/speech.js';

const BYTES_PER_MS = 48;

/** Two seconds sent (one of speech, one of silence), nothing answered yet. */
function sentSession(maxReplayBytes: number) {
  const link: OutboxLink = { status: 'ready', bufferedAmount: 0, send: () => true };
  const ledger = new SpeechLedger();
  const outbox = new AudioOutbox(link, { maxPieceBytes: 4800, maxSocketBufferBytes: 1 << 20, maxReplayBytes, encode: (piece) => piece, binary: true });
  const pcm = speechThenSilence();
  ledger.accept(pcm);
  outbox.accept(pcm);
  ledger.recordSent(outbox.sent, Date.now());
  const replay = new OutageReplay(ledger, outbox, { prerollMs: 300, bytesPerMs: BYTES_PER_MS });
  return { outbox, replay, ledger, pcm };
}

describe('OutageReplay', () => {
  it('a lost session sends again from before its unanswered speech; the next session reports it', () => {
    const { outbox, replay, pcm } = sentSession(10 * 48_000);
    expect(outbox.sent).toBe(pcm.length);
    expect(replay.active).toBe(false);
    replay.begin();
    replay.rewind();
    expect(replay.active).toBe(true);
    expect(outbox.sent).toBe(0);
    expect(outbox.unsent).toBe(pcm.length);
    expect(replay.recovered('s2', { attempt: 2, gapMs: 700 })).toEqual({ sessionId: 's2', attempt: 2, replayedMs: 2000, notReplayedMs: 0, outageMs: 700 });
    expect(replay.active).toBe(false);
    expect(replay.stats).toEqual({ reconnects: 1, outageMs: 700, longestOutageMs: 700, bytesReplayed: pcm.length });
  });

  it('what is no longer kept (past maxReplayBytes) is counted as not replayed', () => {
    const { replay } = sentSession(48_000);
    replay.begin();
    replay.rewind();
    expect(replay.recovered('s2', { attempt: 1, gapMs: 100 })).toMatchObject({ replayedMs: 1000, notReplayedMs: 1000 });
  });

  it('once the speech is answered, only the preroll before what was sent is kept', () => {
    const { outbox, replay, ledger, pcm } = sentSession(10 * 48_000);
    replay.forgetAnswered(outbox.sent);
    expect(outbox.retained).toBe(pcm.length); // the speech is unanswered: all of it is kept
    ledger.responseActivity('audio', Date.now(), outbox.sent, 48_000);
    ledger.responseCompleted(Date.now(), true);
    replay.forgetAnswered(outbox.sent);
    expect(outbox.retained).toBe(300 * BYTES_PER_MS);
  });

  it('as input is handed over, what no replay needs is looked for once per 100 ms sent, not on every send', () => {
    const { outbox, replay, ledger } = sentSession(10 * 48_000);
    ledger.responseActivity('audio', Date.now(), outbox.sent, 48_000);
    ledger.responseCompleted(Date.now(), true);
    replay.handed(outbox.sent);
    expect(outbox.retained).toBe(300 * BYTES_PER_MS);
    const more = (ms: number) => {
      const silence = Buffer.alloc(ms * BYTES_PER_MS);
      ledger.accept(silence);
      outbox.accept(silence);
      replay.handed(outbox.sent);
    };
    more(60);
    expect(outbox.retained).toBe(360 * BYTES_PER_MS); // 60 ms since the last look: kept
    more(40);
    expect(outbox.retained).toBe(300 * BYTES_PER_MS); // 100 ms: looked again
  });

  it('the first session (no recovery) reports nothing and ends no outage figures', () => {
    const { replay } = sentSession(48_000);
    expect(replay.recovered('s1', undefined)).toBeUndefined();
    expect(replay.stats.reconnects).toBe(0);
  });

  it('unprocessed input is what no answer has covered; an error is told how much', () => {
    const { replay } = sentSession(48_000);
    expect(replay.unprocessedMs()).toBe(2000);
    const error = replay.explain(new ConnectionError('The connection was reset.'), ' while reconnecting');
    expect(error.message).toBe('The connection was reset while reconnecting. Up to 2.0 s of input audio may not have been processed.');
    expect(error.unprocessedInputMs).toBe(2000);
  });
});
