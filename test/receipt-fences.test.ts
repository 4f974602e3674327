/**
 * ReceiptFences: where each ping behind the input stands and when the service answered it, with
 * plain numbers (the pings themselves are tested with the connection in session-link.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { ReceiptFences } from '../lib/realtime/receipt-fences.js';

describe('ReceiptFences', () => {
  it('the fence covering an offset is the first one at or past it, answered or not', () => {
    const fences = new ReceiptFences();
    fences.sent(1, 1000, 10);
    fences.sent(2, 5000, 20);
    expect(fences.lastOffset).toBe(5000);
    expect(fences.covering(0)).toEqual({ offset: 1000, sentAt: 10, receivedAt: undefined });
    expect(fences.covering(1001)).toEqual({ offset: 5000, sentAt: 20, receivedAt: undefined });
    expect(fences.covering(5001)).toBeUndefined();
  });

  it('a pong passes its fence and every earlier one (ids grow along a connection), once', () => {
    const fences = new ReceiptFences();
    fences.sent(3, 1000, 10);
    fences.sent(5, 2000, 20);
    fences.sent(8, 3000, 30);
    expect(fences.answered(4, 100)).toBe(true); // a liveness ping's pong: fence 3 was read before it
    expect(fences.covering(1000)?.receivedAt).toBe(100);
    expect(fences.covering(2000)?.receivedAt).toBeUndefined();
    expect(fences.answered(5, 200)).toBe(true);
    expect(fences.answered(5, 300)).toBe(false);
    expect(fences.covering(2000)?.receivedAt).toBe(200);
    expect(fences.answered(2, 400)).toBe(false);
  });

  it('a new connection forgets the fences of the last one', () => {
    const fences = new ReceiptFences();
    fences.sent(1, 1000, 10);
    fences.reset();
    expect(fences.lastOffset).toBe(0);
    expect(fences.covering(0)).toBeUndefined();
    expect(fences.answered(1, 20)).toBe(false);
  });

  it('keeps a bounded number of fences, the newest', () => {
    const fences = new ReceiptFences();
    for (let id = 1; id <= 1000; id++) fences.sent(id, id * 10, id);
    expect(fences.covering(0)?.offset).toBe(7450);
    expect(fences.lastOffset).toBe(10_000);
  });
});
