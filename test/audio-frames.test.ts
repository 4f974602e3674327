import { describe, expect, it } from 'vitest';
import { FrameCutter } from '../lib/audio/frames.js';
import { ValidationError } from '../lib/errors.js';

function bytes(length: number, seed: number): Buffer {
  const b = Buffer.alloc(length);
  let s = seed;
  for (let i = 0; i < length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    b[i] = s >>> 24;
  }
  return b;
}

function randomPieces(data: Buffer, seed: number, max: number): Buffer[] {
  const out: Buffer[] = [];
  let s = seed;
  for (let at = 0; at < data.length;) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const n = 1 + ((s >>> 8) % max);
    out.push(data.subarray(at, at + n));
    at += n;
  }
  return out;
}

describe('FrameCutter', () => {
  it.each([
    [1920, 1, 37],
    [1920, 2, 5000],
    [160, 3, 160],
    [3840, 4, 4096],
    [3, 5, 7],
  ])('frames of %i bytes from random pieces: every frame in order, the rest pending (seed %i)', (fb, seed, max) => {
    const rest = Math.min(17, fb - 1);
    const data = bytes(fb * 50 + rest, seed);
    const cutter = new FrameCutter(fb);
    const frames: Buffer[] = [];
    for (const piece of randomPieces(data, seed, max)) cutter.forEachFrame(piece, (f) => frames.push(f));
    expect(frames.length).toBe(50);
    expect(frames.every((f) => f.length === fb)).toBe(true);
    // Frames handed out stay as they were: assembly memory is never reused.
    expect(Buffer.concat(frames).equals(data.subarray(0, fb * 50))).toBe(true);
    expect(cutter.pendingBytes).toBe(rest);
    expect(cutter.takePending().equals(data.subarray(fb * 50))).toBe(true);
    expect(cutter.pendingBytes).toBe(0);
  });

  it('hands out frames inside one piece as views of it, and copies only a split frame', () => {
    const first = bytes(1000, 1);
    const second = bytes(1000, 2);
    const cutter = new FrameCutter(300);
    const runs: Array<{ buf: Buffer; offset: number; frames: number }> = [];
    cutter.cut(first, (buf, offset, frames) => runs.push({ buf, offset, frames }));
    cutter.cut(second, (buf, offset, frames) => runs.push({ buf, offset, frames }));
    expect(runs.map((r) => [r.buf === first ? 'first' : r.buf === second ? 'second' : 'copy', r.offset, r.frames])).toEqual([
      ['first', 0, 3],
      ['copy', expect.any(Number), 1],
      ['second', 200, 2],
    ]);
    const split = runs[1]!;
    expect(split.buf.subarray(split.offset, split.offset + 300).equals(Buffer.concat([first.subarray(900), second.subarray(0, 200)]))).toBe(true);
    expect(cutter.pendingBytes).toBe(200);
  });

  it('takePending pads to a size with a fill byte (a last frame of mu-law silence)', () => {
    const cutter = new FrameCutter(160);
    cutter.cut(Buffer.from([1, 2, 3]), () => {
      throw new Error('no whole frame yet');
    });
    const padded = cutter.takePending(160, 0xff);
    expect(padded.length).toBe(160);
    expect([...padded.subarray(0, 4)]).toEqual([1, 2, 3, 0xff]);
    expect(padded.subarray(3).every((b) => b === 0xff)).toBe(true);
  });

  it('lazyTail keeps the rest of a piece as a view until the next piece', () => {
    const cutter = new FrameCutter(4, { lazyTail: true });
    const piece = Buffer.from([1, 2, 3, 4, 5, 6]);
    cutter.cut(piece, () => {});
    const tail = cutter.takePending();
    expect(tail.buffer).toBe(piece.buffer);
    expect([...tail]).toEqual([5, 6]);
    // Pending bytes are copied as soon as another piece arrives.
    const frames: number[][] = [];
    cutter.cut(piece.subarray(4), () => {});
    cutter.cut(Buffer.from([7]), () => {});
    piece[4] = 50;
    cutter.forEachFrame(Buffer.from([8]), (f) => frames.push([...f]));
    expect(frames).toEqual([[5, 6, 7, 8]]);
  });

  it('reuse assembles every split frame in the same memory (for receivers that only read)', () => {
    const cutter = new FrameCutter(4, { reuse: true });
    const seen: Buffer[] = [];
    const values: number[][] = [];
    for (const piece of [[1, 2], [3, 4, 5], [6, 7, 8, 9], [10]]) {
      cutter.cut(Buffer.from(piece), (buf, offset) => {
        seen.push(buf);
        values.push([...buf.subarray(offset, offset + 4)]);
      });
    }
    expect(values).toEqual([
      [1, 2, 3, 4],
      [5, 6, 7, 8],
    ]);
    expect(seen[0]).toBe(seen[1]);
  });

  it('refuses a frame size that is not a positive integer, naming it', () => {
    expect(() => new FrameCutter(0)).toThrow(ValidationError);
    expect(() => new FrameCutter(1.5)).toThrow('Invalid frameBytes: expected an integer >= 1 (got 1.5).');
  });
});
