/**
 * The browser module's response timing (`ResponseClock`): each response timed from the end of
 * the speech it answers, found by level in the audio as it was sent, in the Node stream's
 * `ResponseTiming` shape.
 */
import { describe, expect, it } from 'vitest';
import { ResponseClock } from '../lib/browser/response-clock.js';

/** `ms` of a square wave at `amplitude` (0: silence), PCM16 24 kHz. */
function tone(ms: number, amplitude: number): Int16Array {
  const pcm = new Int16Array(ms * 24);
  for (let i = 0; i < pcm.length; i++) pcm[i] = i % 40 < 20 ? amplitude : -amplitude;
  return pcm;
}

/** Sends `pcm` in 40 ms chunks, the chunk starting at media time t sent at epoch `t0 + t`; returns the time after the last. */
function send(clock: ResponseClock, pcm: Int16Array, t0: number, mediaMs: number): number {
  for (let at = 0; at < pcm.length; at += 960, mediaMs += 40) clock.sent(pcm.subarray(at, at + 960), t0 + mediaMs);
  return mediaMs;
}

describe('ResponseClock', () => {
  it('times a response from the end of the speech it answers, in the Node stream`s ResponseTiming shape', () => {
    const clock = new ResponseClock(-40, 600);
    let t = send(clock, tone(1000, 0), 10_000, 0);
    t = send(clock, tone(1200, 12_000), 10_000, t); // speech from 1000 to 2200 ms
    send(clock, tone(1000, 0), 10_000, t); // 600 ms of it ends the stretch
    clock.event('transcript', 13_000);
    clock.event('text', 13_050);
    clock.event('audio', 13_100, 4800);
    clock.event('audio', 13_300, 4800);
    expect(clock.done(13_500)).toEqual({
      index: 1,
      segments: 1,
      speechEndMediaMs: 2200,
      // The last voiced 20 ms frame (2180 to 2200 ms) went in the chunk sent at media time 2160.
      speechEndAt: 12_160,
      startedAt: 13_000,
      transcriptAt: 13_000,
      firstTextAt: 13_050,
      firstAudioAt: 13_100,
      doneAt: 13_500,
      transcriptMs: 840,
      firstTextMs: 890,
      firstAudioMs: 940,
      doneMs: 1340,
      audioBytes: 9600,
    });
    expect(clock.done(14_000)).toBeUndefined();
  });

  it('answers every stretch ended before the response began; the next response answers the later ones', () => {
    const clock = new ResponseClock(-40, 600);
    let t = 0;
    for (let i = 0; i < 2; i++) {
      t = send(clock, tone(400, 12_000), 0, t);
      t = send(clock, tone(800, 0), 0, t);
    }
    clock.event('transcript', 5000);
    expect(clock.done(5100)).toMatchObject({ index: 1, segments: 2, speechEndMediaMs: 1600 });
    t = send(clock, tone(400, 12_000), 0, t);
    send(clock, tone(800, 0), 0, t);
    clock.event('audio', 7000, 2);
    expect(clock.done(7100)).toMatchObject({ index: 2, segments: 1, speechEndMediaMs: 2800, firstAudioMs: 7000 - 2760 });
  });

  it('a response that begins while the speech goes on is a piece of it: its latency is unknown', () => {
    const clock = new ResponseClock(-40, 600);
    send(clock, tone(3000, 12_000), 0, 0);
    clock.event('audio', 3100, 480);
    expect(clock.done(3200)).toMatchObject({ segments: 0, speechEndAt: undefined, firstAudioMs: undefined, doneMs: undefined, audioBytes: 480 });
  });

  it('audio below the threshold is not speech', () => {
    const clock = new ResponseClock(-40, 600);
    // -46 dBFS (RMS 164): under -40 dBFS, over the -50 of a more sensitive clock.
    const quiet = tone(1000, 164);
    const silence = tone(1000, 0);
    send(clock, silence, 0, send(clock, quiet, 0, 0));
    clock.event('transcript', 3000);
    expect(clock.done(3000)).toMatchObject({ segments: 0 });
    const sensitive = new ResponseClock(-50, 600);
    send(sensitive, silence, 0, send(sensitive, quiet, 0, 0));
    sensitive.event('transcript', 3000);
    expect(sensitive.done(3000)).toMatchObject({ segments: 1, speechEndMediaMs: 1000 });
  });
});
