import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Pacer, type PacerOptions } from '../lib/audio/pacer.js';
import { ValidationError } from '../lib/errors.js';

/** 20 ms of 24 kHz mono PCM16. */
const FRAME = 960;

/** `frames` frames whose bytes say which frame they belong to (frame i is filled with i + 1). */
function numberedFrames(frames: number, frameBytes = FRAME): Buffer {
  const b = Buffer.alloc(frames * frameBytes);
  for (let i = 0; i < frames; i++) b.fill(i + 1, i * frameBytes, (i + 1) * frameBytes);
  return b;
}

/** Lets queued nextTick callbacks run (stream events); nextTick is not faked. */
async function ticks(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => process.nextTick(r));
}

interface Sent {
  at: number;
  frame: Buffer;
}

/** A pacer whose output is recorded with the clock time of each frame. */
function recorded(options: PacerOptions, clock: () => number = () => performance.now()): { pacer: Pacer; sent: Sent[]; start: number } {
  const pacer = new Pacer(options);
  const sent: Sent[] = [];
  const start = clock();
  pacer.on('data', (frame: Buffer) => sent.push({ at: clock() - start, frame }));
  return { pacer, sent, start };
}

/** Which numbered frame (1-based) a frame holds, 0 for silence, -1 for mixed content. */
function label(frame: Buffer): number {
  const first = frame[0]!;
  return frame.every((b) => b === first) ? first : -1;
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('pacing on an absolute schedule', () => {
  it('releases one 20 ms frame every 20 ms of the (faked) performance clock', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000 });
    pacer.write(numberedFrames(5));
    await ticks();
    expect(sent.map((s) => s.at)).toEqual([0]);
    await vi.advanceTimersByTimeAsync(19);
    expect(sent.length).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent.length).toBe(2);
    await vi.advanceTimersByTimeAsync(100);
    expect(sent.map((s) => s.at)).toEqual([0, 20, 40, 60, 80]);
    expect(sent.map((s) => s.frame.length)).toEqual([FRAME, FRAME, FRAME, FRAME, FRAME]);
    expect(sent.map((s) => label(s.frame))).toEqual([1, 2, 3, 4, 5]);
    pacer.destroy();
  });

  it.each([1, 7, 500, FRAME, 3 * FRAME + 11])('frames are the same bytes whatever the input chunking (%i bytes)', async (size) => {
    const input = Buffer.alloc(6 * FRAME);
    for (let i = 0; i < input.length; i++) input[i] = (i * 7 + (i >> 8)) & 0xff;
    const { pacer, sent } = recorded({ sampleRate: 24000 });
    for (let i = 0; i < input.length; i += size) pacer.write(input.subarray(i, i + size));
    pacer.end();
    await vi.advanceTimersByTimeAsync(200);
    await ticks();
    expect(sent.length).toBe(6);
    expect(Buffer.concat(sent.map((s) => s.frame)).equals(input)).toBe(true);
    expect(sent.map((s) => s.at)).toEqual([0, 20, 40, 60, 80, 100]);
  });

  it('corrects drift: after a late timer, due frames go out at once and the next deadline stays on the grid', async () => {
    let lag = 0;
    const clock = (): number => performance.now() + lag;
    const { pacer, sent } = recorded({ sampleRate: 24000, now: clock }, clock);
    pacer.write(numberedFrames(20));
    await ticks();
    expect(sent.length).toBe(1); // frame 0 at clock 0
    lag = 30; // the event loop was blocked: the timer for 20 fires when the clock says 50
    await vi.advanceTimersByTimeAsync(20);
    expect(sent.map((s) => s.at)).toEqual([0, 50, 50]); // frames due at 20 and 40
    await vi.advanceTimersByTimeAsync(10); // clock 60: the frame due at 60, not at 50 + 20
    expect(sent.length).toBe(4);
    expect(sent[3]!.at).toBe(60);
    await vi.advanceTimersByTimeAsync(40); // clock 100
    expect(sent.map((s) => s.at).slice(4)).toEqual([80, 100]);
    // The count of frames sent always matches the clock: floor(t / 20) + 1.
    expect(sent.length).toBe(Math.floor(100 / 20) + 1);
    expect(sent.map((s) => label(s.frame))).toEqual([1, 2, 3, 4, 5, 6]);
    pacer.destroy();
  });

  it('works in other layouts: 48 kHz stereo 10 ms frames, and mu-law 8 kHz 20 ms frames', async () => {
    const stereo = recorded({ sampleRate: 48000, channels: 2, frameMs: 10 });
    stereo.pacer.write(numberedFrames(3, 1920));
    const mulaw = recorded({ sampleRate: 8000, format: 'mulaw' });
    mulaw.pacer.write(numberedFrames(3, 160));
    await vi.advanceTimersByTimeAsync(60);
    expect(stereo.sent.map((s) => [s.at, s.frame.length, label(s.frame)])).toEqual([
      [0, 1920, 1],
      [10, 1920, 2],
      [20, 1920, 3],
    ]);
    expect(mulaw.sent.map((s) => [s.at, s.frame.length, label(s.frame)])).toEqual([
      [0, 160, 1],
      [20, 160, 2],
      [40, 160, 3],
    ]);
    stereo.pacer.destroy();
    mulaw.pacer.destroy();
  });
});

describe('gaps in the source', () => {
  it('fillGaps: empty slots get silence, and data after a hole plays from the next slot', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000, fillGaps: true });
    pacer.write(numberedFrames(2));
    await vi.advanceTimersByTimeAsync(100); // slots 0..5: two frames, then silence at 40, 60, 80, 100
    expect(sent.map((s) => [s.at, label(s.frame)])).toEqual([
      [0, 1],
      [20, 2],
      [40, 0],
      [60, 0],
      [80, 0],
      [100, 0],
    ]);
    expect(pacer.silentFramesSent).toBe(4);
    await vi.advanceTimersByTimeAsync(10); // t = 110: the source resumes
    pacer.write(Buffer.alloc(FRAME, 9));
    await ticks();
    expect(sent.length).toBe(6); // nothing ahead of the clock
    await vi.advanceTimersByTimeAsync(10); // t = 120: next slot plays it
    expect(sent.slice(6).map((s) => [s.at, label(s.frame)])).toEqual([[120, 9]]);
    await vi.advanceTimersByTimeAsync(20);
    expect(sent.slice(7).map((s) => [s.at, label(s.frame)])).toEqual([[140, 0]]);
    pacer.destroy();
  });

  it('fillGaps: a frame only half there at its deadline is delayed one slot, never dropped', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000, fillGaps: true });
    pacer.write(Buffer.alloc(FRAME, 1));
    await ticks();
    await vi.advanceTimersByTimeAsync(5);
    pacer.write(Buffer.alloc(FRAME / 2, 2)); // half of frame 2 arrives early ...
    await vi.advanceTimersByTimeAsync(20); // t = 25: slot 20 had only half a frame -> silence
    pacer.write(Buffer.alloc(FRAME / 2, 2)); // ... the rest late
    await vi.advanceTimersByTimeAsync(20); // t = 45: slot 40 plays frame 2 whole
    expect(sent.map((s) => [s.at, label(s.frame)])).toEqual([
      [0, 1],
      [20, 0],
      [40, 2],
    ]);
    pacer.destroy();
  });

  it('without fillGaps: an underrun stops the schedule, which restarts when data comes', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000 });
    pacer.write(numberedFrames(2));
    await vi.advanceTimersByTimeAsync(100);
    expect(sent.map((s) => s.at)).toEqual([0, 20]);
    expect(vi.getTimerCount()).toBe(0); // idle: no timer spinning
    await vi.advanceTimersByTimeAsync(33);
    pacer.write(Buffer.alloc(2 * FRAME, 7));
    await vi.advanceTimersByTimeAsync(40);
    expect(sent.map((s) => [s.at, label(s.frame)]).slice(2)).toEqual([
      [133, 7],
      [153, 7],
    ]);
    expect(pacer.silentFramesSent).toBe(0);
    pacer.destroy();
  });
});

describe('end of input', () => {
  it('plays out the queue on schedule, pads the last partial frame with silence, then ends', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000 });
    let ended = false;
    let finished = false;
    pacer.on('end', () => (ended = true));
    pacer.on('finish', () => (finished = true));
    pacer.write(Buffer.alloc(FRAME + 100, 5));
    pacer.end();
    await ticks();
    expect(sent.length).toBe(1);
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(20);
    await ticks();
    expect(sent.map((s) => s.at)).toEqual([0, 20]);
    const last = sent[1]!.frame;
    expect(last.length).toBe(FRAME);
    expect(last.subarray(0, 100).every((b) => b === 5)).toBe(true);
    expect(last.subarray(100).every((b) => b === 0)).toBe(true);
    expect(ended).toBe(true);
    expect(finished).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("pads with the format's silence: 0xFF for mu-law", async () => {
    const { pacer, sent } = recorded({ sampleRate: 8000, format: 'mulaw' });
    pacer.end(Buffer.from([1, 2, 3]));
    await vi.advanceTimersByTimeAsync(0);
    await ticks();
    expect(sent.length).toBe(1);
    expect([...sent[0]!.frame.subarray(0, 4)]).toEqual([1, 2, 3, 0xff]);
    expect(sent[0]!.frame.length).toBe(160);
  });

  it('ends at once when nothing was written', async () => {
    const pacer = new Pacer({ sampleRate: 24000, fillGaps: true });
    const events: string[] = [];
    pacer.on('data', () => events.push('data'));
    pacer.on('end', () => events.push('end'));
    pacer.end();
    await ticks();
    expect(events).toEqual(['end']);
  });
});

describe('bounds', () => {
  it('holds the write callback while more than highWaterMs is queued', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000, highWaterMs: 40 });
    let released = -1;
    pacer.write(numberedFrames(6), () => (released = performance.now()));
    const start = performance.now();
    await ticks();
    expect(released).toBe(-1); // 5 frames queued after the first went out: above 2 frames
    await vi.advanceTimersByTimeAsync(60); // frames at 20, 40, 60 leave 2 queued
    await ticks();
    expect(released - start).toBe(60);
    expect(sent.length).toBe(4);
    pacer.destroy();
  });

  it('pauses when the reader does not read, and resumes from the moment it reads, without a burst', async () => {
    const pacer = new Pacer({ sampleRate: 24000, fillGaps: true });
    pacer.write(numberedFrames(1));
    await vi.advanceTimersByTimeAsync(2000);
    const stalled = pacer.framesSent;
    expect(stalled).toBeGreaterThan(5);
    expect(pacer.readableLength).toBeLessThanOrEqual(pacer.readableHighWaterMark + FRAME);
    await vi.advanceTimersByTimeAsync(1000);
    expect(pacer.framesSent).toBe(stalled); // paused: not filling a buffer nobody reads
    const times: number[] = [];
    const start = performance.now();
    pacer.on('data', () => times.push(performance.now() - start));
    await ticks();
    const buffered = times.length;
    expect(buffered).toBe(stalled); // what was buffered comes out now ...
    await vi.advanceTimersByTimeAsync(60);
    // ... then one frame per 20 ms again, the first one frame after the resume.
    expect(times.slice(buffered)).toEqual([20, 40, 60]);
    pacer.destroy();
  });

  it('a queued file is not pulled out in a burst when a stalled reader comes back', async () => {
    const pacer = new Pacer({ sampleRate: 24000, highWaterMs: 10_000 });
    pacer.write(numberedFrames(60));
    await vi.advanceTimersByTimeAsync(1000);
    const stalled = pacer.framesSent;
    expect(stalled).toBeLessThan(30); // stopped at the readable buffer's limit
    const times: number[] = [];
    const start = performance.now();
    pacer.on('data', () => times.push(performance.now() - start));
    await ticks();
    expect(times.length).toBe(stalled);
    await vi.advanceTimersByTimeAsync(100);
    expect(times.slice(stalled)).toEqual([20, 40, 60, 80, 100]);
    expect(pacer.framesSent).toBe(stalled + 5);
    pacer.destroy();
  });

  it('destroy clears the timer and stops output', async () => {
    const { pacer, sent } = recorded({ sampleRate: 24000, fillGaps: true });
    pacer.write(numberedFrames(3));
    await ticks();
    expect(vi.getTimerCount()).toBe(1);
    pacer.destroy();
    await vi.advanceTimersByTimeAsync(200);
    expect(sent.length).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('options', () => {
  it.each<[Partial<PacerOptions>, string, string]>([
    [{ sampleRate: 22050, frameMs: 10 }, 'frameMs', 'whole number of samples at 22050 Hz'],
    [{ sampleRate: 0 }, 'sampleRate', 'positive integer'],
    [{ sampleRate: 24000, channels: 0 }, 'channels', 'positive integer'],
    [{ sampleRate: 24000, format: 'opus' as never }, 'format', 'one of s16le, s16be, f32le, mulaw, alaw'],
    [{ sampleRate: 24000, highWaterMs: -1 }, 'highWaterMs', '0 or more'],
  ])('%j is refused naming %s', (options, field, accepted) => {
    let error: unknown;
    try {
      new Pacer(options as PacerOptions);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect((error as ValidationError).accepted).toContain(accepted);
  });

  it('does not modify the options object', () => {
    const options = Object.freeze({ sampleRate: 48000, channels: 2 });
    const pacer = new Pacer(options);
    expect(pacer.frameBytes).toBe(960 * 4);
    expect(options).toEqual({ sampleRate: 48000, channels: 2 });
    pacer.destroy();
  });
});
