/**
 * ReplayBuffer: what is kept for a replay after a reconnect, as offsets of the input timeline.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { REPLAY_BLOCK_BYTES, ReplayBuffer } from '../lib/realtime/replay-buffer.js';

/** Takes every unsent byte in pieces of at most `max`, marking them sent. */
function drain(buffer: ReplayBuffer, max: number): Buffer {
  const out: Buffer[] = [];
  for (let piece = buffer.peek(max); piece; piece = buffer.peek(max)) {
    out.push(Buffer.from(piece));
    buffer.advance(piece.length);
  }
  return Buffer.concat(out);
}

describe('ReplayBuffer', () => {
  it('gives back exactly what was pushed, in pieces that never cross a block, whatever the write sizes', () => {
    const data = randomBytes(10_000);
    const buffer = new ReplayBuffer(1024);
    for (let at = 0, size = 1; at < data.length; at += size, size = ((size * 7) % 997) + 1) buffer.push(data.subarray(at, at + size));
    expect(buffer.end).toBe(data.length);
    const pieces: number[] = [];
    const out: Buffer[] = [];
    for (let piece = buffer.peek(600); piece; piece = buffer.peek(600)) {
      pieces.push(piece.length);
      out.push(Buffer.from(piece));
      buffer.advance(piece.length);
    }
    expect(Buffer.concat(out).equals(data)).toBe(true);
    expect(Math.max(...pieces)).toBeLessThanOrEqual(600);
    // A piece ends at a block boundary when the next byte lives in another block.
    let offset = 0;
    for (const length of pieces) {
      expect(Math.floor(offset / 1024)).toBe(Math.floor((offset + length - 1) / 1024));
      offset += length;
    }
  });

  it('copies what it is given: the writer may reuse its buffer after the write', () => {
    const buffer = new ReplayBuffer(64);
    const reused = Buffer.from([1, 2, 3, 4]);
    buffer.push(reused);
    reused.fill(9);
    expect([...drain(buffer, 64)]).toEqual([1, 2, 3, 4]);
  });

  it('release forgets sent bytes only, and frees whole blocks', () => {
    const data = randomBytes(5000);
    const buffer = new ReplayBuffer(1000);
    buffer.push(data);
    buffer.advance(3000);
    expect(buffer.release(4000)).toBe(3000); // only what was sent
    expect(buffer.start).toBe(3000);
    expect(buffer.retained).toBe(2000);
    expect(buffer.unsent).toBe(2000);
    expect(drain(buffer, 4096).equals(data.subarray(3000))).toBe(true);
  });

  it('with recycle, a released block carries the next audio (of any stream), which reads back intact', () => {
    const first = new ReplayBuffer(REPLAY_BLOCK_BYTES, { recycle: true });
    const old = randomBytes(2 * REPLAY_BLOCK_BYTES + 100);
    first.push(old);
    const released = first.peek(REPLAY_BLOCK_BYTES)!; // a view of the first block
    drain(first, REPLAY_BLOCK_BYTES);
    first.release(REPLAY_BLOCK_BYTES);
    const second = new ReplayBuffer(REPLAY_BLOCK_BYTES, { recycle: true });
    const fresh = randomBytes(1000);
    second.push(fresh);
    const piece = second.peek(REPLAY_BLOCK_BYTES)!;
    expect(piece.buffer).toBe(released.buffer); // the same memory, reused
    expect(piece.equals(fresh)).toBe(true);
    // Cleared when it was released: none of the first stream's audio is left in it.
    expect(released.subarray(fresh.length).every((b) => b === 0)).toBe(true);
    // The first stream still has what it kept, untouched.
    expect(first.rewind(0)).toBe(REPLAY_BLOCK_BYTES + 100);
    expect(drain(first, 4096).equals(old.subarray(REPLAY_BLOCK_BYTES))).toBe(true);
  });

  it('without recycle, released memory is never handed out again (a sent view may still be queued)', () => {
    const first = new ReplayBuffer(REPLAY_BLOCK_BYTES);
    first.push(randomBytes(2 * REPLAY_BLOCK_BYTES));
    const view = first.peek(REPLAY_BLOCK_BYTES)!;
    const before = Buffer.from(view);
    drain(first, REPLAY_BLOCK_BYTES);
    first.release(REPLAY_BLOCK_BYTES);
    for (const recycle of [false, true]) {
      const other = new ReplayBuffer(REPLAY_BLOCK_BYTES, { recycle });
      other.push(randomBytes(REPLAY_BLOCK_BYTES));
      expect(other.peek(REPLAY_BLOCK_BYTES)!.buffer).not.toBe(view.buffer);
    }
    expect(view.equals(before)).toBe(true);
  });

  it('rewind sends again from an offset, clamped to what is kept', () => {
    const data = randomBytes(4096);
    const buffer = new ReplayBuffer(1024);
    buffer.push(data);
    drain(buffer, 4096);
    buffer.release(1000);
    expect(buffer.rewind(2500)).toBe(4096 - 2500);
    expect(drain(buffer, 300).equals(data.subarray(2500))).toBe(true);
    // Before what is kept: from the first kept byte.
    expect(buffer.rewind(0)).toBe(4096 - 1000);
    expect(buffer.sent).toBe(1000);
    expect(drain(buffer, 4096).equals(data.subarray(1000))).toBe(true);
  });

  it('holds memory in proportion to what is retained, however long the stream', () => {
    const buffer = new ReplayBuffer(1024);
    const chunk = Buffer.alloc(100, 7);
    for (let i = 0; i < 100_000; i++) {
      buffer.push(chunk);
      drain(buffer, 1024);
      buffer.release(buffer.sent - 2048);
    }
    expect(buffer.end).toBe(10_000_000);
    expect(buffer.retained).toBeLessThanOrEqual(2048);
    expect(buffer.allocatedBytes).toBeLessThanOrEqual(2048 + 2 * 1024);
    buffer.rewind(0);
    expect(drain(buffer, 4096).length).toBe(2048);
  });
});
