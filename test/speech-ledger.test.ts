/**
 * SpeechLedger: the speech sent against the responses received, with plain audio and clock
 * values (no sockets, no timers).
 */
import { describe, expect, it } from 'vitest';
import { SharedFrameLevels } from '../lib/audio/level.js';
import { LatencySeries, SpeechLedger } from '../lib/realtime/speech-ledger.js';

/** Bytes per millisecond of PCM16 mono 24 kHz. */
const MS = 48;

function tone(ms: number): Buffer {
  const out = Buffer.alloc(ms * MS);
  for (let i = 0; i < ms * 24; i++) out.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return out;
}

const zeros = (ms: number): Buffer => Buffer.alloc(ms * MS);

/** Three utterances: 1000 ms, 500 ms and 800 ms of speech, 1 s apart, then 1 s of silence. */
const THREE = Buffer.concat([zeros(200), tone(1000), zeros(1000), tone(500), zeros(1000), tone(800), zeros(1000)]);
const ENDS = [1200, 2700, 4500].map((ms) => ms * MS);

/** Feeds `pcm` in writes of `writeBytes` (the last may be shorter), as if every byte was handed to the socket at once. */
function fed(pcm: Buffer, options = {}, writeBytes = pcm.length): SpeechLedger {
  const ledger = new SpeechLedger(options);
  for (let at = 0; at < pcm.length; at += writeBytes) ledger.accept(pcm.subarray(at, at + writeBytes));
  ledger.recordSent(pcm.length, 1_000);
  return ledger;
}

/** One complete response: opened with `sent` bytes handed over, `audioMs` of audio, completed at `now`. */
function respond(ledger: SpeechLedger, sent: number, audioMs: number, now = 2_000, audioExpected = true) {
  ledger.responseActivity('transcript', now - 30, sent);
  if (audioMs > 0) ledger.responseActivity('audio', now - 20, sent, audioMs * MS);
  return ledger.responseCompleted(now, audioExpected)!;
}

describe('SpeechLedger', () => {
  it('finds the speech sent: where the latest ends, and where the latest that silence closed ends', () => {
    const ledger = new SpeechLedger();
    ledger.accept(Buffer.concat([zeros(200), tone(1000)]));
    expect(ledger.lastSpeechEnd).toBe(1200 * MS);
    expect(ledger.endedSpeechEnd).toBe(0); // still speaking
    ledger.accept(zeros(1000));
    expect(ledger.endedSpeechEnd).toBe(1200 * MS);
    const three = fed(THREE);
    expect([three.lastSpeechEnd, three.endedSpeechEnd]).toEqual([ENDS[2], ENDS[2]]);
  });

  it('before the session answers anything, all the speech sent is owed an answer', () => {
    const ledger = fed(THREE);
    expect(ledger.answeredInSession).toBe(false);
    expect(ledger.speechSinceLastResponse).toBe((1000 + 500 + 800) * MS);
    expect(ledger.frontier).toBe(0);
  });

  it('speech sent after the latest response began is owed; speech sent before it is not, however many segments it has', () => {
    const ledger = new SpeechLedger();
    ledger.accept(THREE.subarray(0, 2200 * MS)); // the first utterance and its silence
    respond(ledger, 2200 * MS, 300); // one short answer, begun before the rest was sent
    ledger.accept(THREE.subarray(2200 * MS));
    expect(ledger.speechSinceLastResponse).toBe((500 + 800) * MS);
    // One response for both, begun once they were sent, with audio far shorter than them.
    ledger.responseActivity('transcript', 3_000, THREE.length);
    expect(ledger.speechSinceLastResponse).toBe(0);
    ledger.responseCompleted(3_100, true);
    expect(ledger.speechSinceLastResponse).toBe(0);
    expect(ledger.answeredInSession).toBe(true);
  });

  it('a response begun in the middle of speech leaves the rest of that speech owed', () => {
    const ledger = new SpeechLedger();
    ledger.accept(Buffer.concat([zeros(100), tone(3000)]));
    respond(ledger, 2100 * MS, 2000); // the service split the long speech: its answer began 2 s into it
    ledger.accept(zeros(1000));
    expect(ledger.speechSinceLastResponse).toBe(1000 * MS);
  });

  it('a lost session answers nothing: what its responses did not cover is owed again, from the frontier', () => {
    const ledger = fed(THREE);
    respond(ledger, THREE.length, 1000);
    expect(ledger.speechSinceLastResponse).toBe(0);
    ledger.responseActivity('audio', 2_500, THREE.length, 500 * MS);
    ledger.sessionLost();
    expect(ledger.responseOpen).toBe(false);
    expect(ledger.answeredInSession).toBe(false);
    expect(ledger.responseCompleted(3_000, true)).toBeUndefined();
    expect(ledger.speechSinceLastResponse).toBe((500 + 800) * MS);
  });

  it('a response answers the first segment sent before it started: the frontier moves past its speech', () => {
    const ledger = fed(THREE);
    const timing = respond(ledger, THREE.length, 1000);
    expect(timing.segments).toBe(1);
    expect(ledger.frontier).toBe(ENDS[0]);
    expect(timing.speechEndMediaMs).toBe(1200);
  });

  it('several utterances answered as one response (audio as long as all of them) are all answered', () => {
    const ledger = fed(THREE);
    const timing = respond(ledger, THREE.length, 2300);
    expect(timing.segments).toBe(3);
    expect(ledger.frontier).toBe(ENDS[2]);
  });

  it('answers of their own length move the frontier one utterance each', () => {
    const ledger = fed(THREE);
    expect(respond(ledger, THREE.length, 1000).segments).toBe(1);
    expect(respond(ledger, THREE.length, 500).segments).toBe(1);
    expect(ledger.frontier).toBe(ENDS[1]);
    expect(respond(ledger, THREE.length, 800, 9_000).segments).toBe(1);
    expect(ledger.frontier).toBe(ENDS[2]);
  });

  it('a response that starts while its speech is still being sent is a piece of it and moves nothing', () => {
    const ledger = new SpeechLedger();
    ledger.accept(Buffer.concat([zeros(100), tone(3000)]));
    const piece = respond(ledger, 2100 * MS, 2000);
    expect(piece.segments).toBe(0);
    expect(ledger.frontier).toBe(0);
    ledger.accept(zeros(1000));
    // The rest of it, answered once the whole speech was sent.
    expect(respond(ledger, 4100 * MS, 1000).segments).toBe(1);
    expect(ledger.frontier).toBe(3100 * MS);
  });

  it('text-only: one response answers one segment', () => {
    const ledger = fed(THREE);
    expect(respond(ledger, THREE.length, 0, 2_000, false).segments).toBe(1);
    expect(ledger.frontier).toBe(ENDS[0]);
  });

  it('clicks shorter than minSpeechMs are not speech anyone owes an answer to', () => {
    const ledger = fed(Buffer.concat([zeros(200), tone(60), zeros(1000), tone(500), zeros(1000)]));
    expect(ledger.speechSinceLastResponse).toBe(500 * MS);
    expect(ledger.lastSpeechEnd).toBe(1760 * MS);
    expect(respond(ledger, 3000 * MS, 500).segments).toBe(1);
    expect(ledger.frontier).toBe(1760 * MS);
  });

  it('clicks are forgotten as they end: a replay starts before the speech after them, not before the click', () => {
    const ledger = fed(Buffer.concat([zeros(200), tone(60), zeros(1000), tone(500), zeros(1000)]));
    expect(ledger.replayStart(2760 * MS, 300)).toBe((1260 - 300) * MS);
  });

  it('speech no answer ever covers is kept for 4096 stretches; older ones count as answered', () => {
    const ledger = new SpeechLedger();
    const stretch = Buffer.concat([tone(200), zeros(700)]);
    for (let i = 0; i < 4096; i++) ledger.accept(stretch);
    expect(ledger.frontier).toBe(0);
    ledger.accept(stretch);
    // The first stretch is now behind the frontier; the speech past it is the 4096 newest.
    expect(ledger.frontier).toBe(200 * MS);
    expect(ledger.speechPastFrontier).toBe(4096 * 200 * MS);
  });

  it('replay starts 300 ms before the first unanswered speech, on a 20 ms frame, never before the frontier', () => {
    const ledger = fed(THREE);
    expect(ledger.replayStart(THREE.length, 300)).toBe(0); // 200 ms of silence, then speech: from the start
    respond(ledger, THREE.length, 1000);
    expect(ledger.replayStart(THREE.length, 300)).toBe((2200 - 300) * MS);
    respond(ledger, THREE.length, 500);
    respond(ledger, THREE.length, 800);
    // Nothing owed: only the preroll before what was sent, aligned down.
    expect(ledger.replayStart(THREE.length, 300)).toBe(THREE.length - 300 * MS);
    // Never before the frontier, even with a long preroll.
    expect(ledger.replayStart(THREE.length, 5_000)).toBe(ENDS[2]);
    expect(ledger.replayStart(1001, 0) % 960).toBe(0);
  });

  it('times a response from the first time its speech end was handed to the socket', () => {
    const ledger = new SpeechLedger();
    ledger.accept(THREE);
    ledger.recordSent(1000 * MS, 10_000);
    ledger.recordSent(1300 * MS, 10_300); // the end of the first speech
    ledger.recordSent(THREE.length, 14_000);
    ledger.recordSent(1300 * MS, 20_000); // a replay: the first send counts
    ledger.responseActivity('transcript', 10_900, THREE.length);
    ledger.responseActivity('text', 11_000, THREE.length);
    ledger.responseActivity('audio', 11_400, THREE.length, 500 * MS);
    ledger.responseActivity('audio', 11_600, THREE.length, 500 * MS);
    const timing = ledger.responseCompleted(12_000, true)!;
    expect(timing).toMatchObject({
      index: 1,
      segments: 1,
      speechEndMediaMs: 1200,
      speechEndAt: 10_300,
      transcriptMs: 600,
      firstTextMs: 700,
      firstAudioMs: 1100,
      doneMs: 1700,
      audioBytes: 1000 * MS,
    });
  });
});

describe('SpeechLedger: hearing in batches', () => {
  /** What a ledger says of the speech, read the way the stream reads it. */
  function findings(ledger: SpeechLedger, sent: number) {
    return {
      keep: ledger.keepStart(sent, 300),
      replay: ledger.replayStart(sent, 300),
      last: ledger.lastSpeechEnd,
      ended: ledger.endedSpeechEnd,
      past: ledger.speechPastFrontier,
      owed: ledger.speechSinceLastResponse,
    };
  }

  it('finds the same speech whatever the writes: 20 ms, odd sizes, or one block', () => {
    for (const size of [960, 333, 4801, THREE.length]) {
      const ledger = fed(THREE, {}, size);
      expect(findings(ledger, THREE.length)).toEqual({ keep: 0, replay: 0, last: ENDS[2], ended: ENDS[2], past: 2300 * MS, owed: 2300 * MS });
      const first = respond(ledger, THREE.length, 1000);
      expect([first.segments, first.speechEndMediaMs]).toEqual([1, 1200]);
      expect(findings(ledger, THREE.length)).toMatchObject({ keep: (2200 - 300) * MS, replay: (2200 - 300) * MS, past: 1300 * MS });
    }
  });

  it('what it found is read whole: speech in a batch not heard yet counts', () => {
    const pcm = Buffer.concat([zeros(200), tone(1020)]); // 12 batches, then one 20 ms frame batched
    const readers: Array<[string, (ledger: SpeechLedger) => number, number]> = [
      ['lastSpeechEnd', (l) => l.lastSpeechEnd, 1220 * MS],
      ['speechPastFrontier', (l) => l.speechPastFrontier, 1020 * MS],
      ['speechSinceLastResponse', (l) => l.speechSinceLastResponse, 1020 * MS],
    ];
    for (const [name, read, expected] of readers) expect([name, read(fed(pcm, {}, 960))]).toEqual([name, expected]);
  });

  it('from 20 ms writes, the end of speech shows at most one batch (100 ms) after the detector found it', () => {
    const batched = new SpeechLedger();
    const eager = new SpeechLedger();
    let foundAt: number | undefined;
    let shownAt: number | undefined;
    for (let at = 0; at < THREE.length; at += 960) {
      const frame = THREE.subarray(at, at + 960);
      batched.accept(frame);
      eager.accept(frame);
      void eager.lastSpeechEnd; // reading what it found has it hear everything first
      if (foundAt === undefined && eager.endedSpeechEnd > 0) foundAt = at + 960;
      if (shownAt === undefined && batched.endedSpeechEnd > 0) shownAt = at + 960;
      // Never ahead of what the detector found, never behind by a whole batch or more.
      expect(batched.endedSpeechEnd).toBeLessThanOrEqual(eager.endedSpeechEnd);
    }
    expect(foundAt).toBe(1800 * MS); // 600 ms of silence after the speech that ends at 1200 ms
    expect(shownAt! - foundAt!).toBeGreaterThanOrEqual(0);
    expect(shownAt! - foundAt!).toBeLessThan(100 * MS);
  });

  it('where input is kept from is never after where a replay starts, at any point of a session', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let run = 0; run < 20; run++) {
      const ledger = new SpeechLedger();
      const pcm = Buffer.concat(
        Array.from({ length: 12 }, () => (random() < 0.5 ? tone(100 + Math.floor(random() * 900)) : zeros(100 + Math.floor(random() * 900)))),
      );
      let at = 0;
      while (at < pcm.length) {
        const size = 2 * (1 + Math.floor(random() * 3000));
        ledger.accept(pcm.subarray(at, at + size));
        at = Math.min(pcm.length, at + size);
        const sent = Math.max(0, at - 2 * Math.floor(random() * 2000));
        ledger.recordSent(sent, 1_000 + at);
        if (random() < 0.1) respond(ledger, sent, Math.floor(random() * 1500));
        // Kept-from first: the replay start has the ledger hear what is batched.
        const keep = ledger.keepStart(sent, 300);
        expect(keep).toBeLessThanOrEqual(ledger.replayStart(sent, 300));
        expect(keep % 960).toBe(0);
      }
    }
  });

  it('a ledger whose frame levels are shared hears each piece as it is accepted', () => {
    const ledger = new SpeechLedger();
    ledger.shareLevels(new SharedFrameLevels());
    for (let at = 0; at < 1900 * MS; at += 960) ledger.accept(THREE.subarray(at, at + 960));
    expect(ledger.endedSpeechEnd).toBe(1200 * MS); // no batch: found at 1800 ms, shown at once
  });
});

describe('LatencySeries', () => {
  it('gives p50, p95 and max over the samples it keeps', () => {
    const series = new LatencySeries();
    for (let i = 1; i <= 100; i++) series.add(i);
    series.add(undefined);
    expect(series.summary()).toEqual({ count: 100, p50: 50, p95: 95, max: 100 });
  });

  it('keeps the most recent samples within its limit, and the max of all', () => {
    const series = new LatencySeries(10);
    series.add(1_000);
    for (let i = 0; i < 20; i++) series.add(i);
    expect(series.summary()).toEqual({ count: 21, p50: 14, p95: 19, max: 1_000 });
  });

  it('a summary read again reflects a sample added since, and a caller that changes one changes no other', () => {
    const series = new LatencySeries();
    series.add(10);
    const first = series.summary();
    first.max = -1;
    expect(series.summary()).toEqual({ count: 1, p50: 10, p95: 10, max: 10 });
    series.add(30);
    expect(series.summary()).toEqual({ count: 2, p50: 10, p95: 30, max: 30 });
  });

  it('is empty before any sample', () => {
    expect(new LatencySeries().summary()).toEqual({ count: 0, p50: undefined, p95: undefined, max: undefined });
  });
});
