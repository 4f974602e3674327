/**
 * `withEvents`: one declaration types a class's events. Checked twice: by the compiler (the
 * `expectTypeOf` lines fail `tsc --noEmit`, which `npm test` runs, if a listener's arguments
 * fall back to `any`) and at run time (the base class is the very same constructor).
 */
import { Duplex, PassThrough, Transform } from 'node:stream';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { withEvents } from '../lib/typed-events.js';
import { PcmChunker, type PartialFrameInfo } from '../lib/audio/pcm-chunker.js';
import { WavReader, type WavFormat } from '../lib/audio/wav.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import type { RealtimeTranslateEvents } from '../lib/realtime/realtime-translate-stream.js';

interface PingEvents {
  ping: [count: number, label: string];
  done: [];
}

class Pinger extends withEvents<PingEvents>()(PassThrough) {
  count = 0;
  ping(): void {
    this.count += 1;
    this.emit('ping', this.count, `ping ${this.count}`);
  }
}

describe('withEvents', () => {
  it('returns the base class itself: instances are streams of that class, with its behaviour', async () => {
    const pinger = new Pinger();
    expect(Object.getPrototypeOf(Pinger)).toBe(PassThrough);
    expect(pinger).toBeInstanceOf(PassThrough);
    expect(pinger).toBeInstanceOf(Duplex);
    pinger.end('bytes');
    const chunks: Buffer[] = [];
    for await (const chunk of pinger) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('bytes');
  });

  it("hands the map's events to their listeners with their arguments, and keeps the base's events", () => {
    const pinger = new Pinger();
    const seen: string[] = [];
    pinger.on('ping', (count, label) => {
      expectTypeOf(count).toEqualTypeOf<number>();
      expectTypeOf(label).toEqualTypeOf<string>();
      seen.push(`${count}:${label}`);
    });
    pinger.once('done', () => seen.push('done'));
    pinger.on('close', () => seen.push('close'));
    pinger.ping();
    pinger.ping();
    pinger.emit('done');
    pinger.emit('done');
    expect(seen).toEqual(['1:ping 1', '2:ping 2', 'done']);
    // `emit` of a map's event takes its arguments (not checked as strictly as listeners: the
    // base class's `emit(event: string, ...args: any[])` stays behind the typed one).
    expectTypeOf(pinger.emit<'ping'>).parameters.toEqualTypeOf<['ping', number, string]>();
  });

  it("types the library's streams' events from their maps", () => {
    const chunker = new PcmChunker();
    chunker.on('partial-frame', (info) => expectTypeOf(info).toEqualTypeOf<PartialFrameInfo>());
    const reader = new WavReader();
    reader.once('format', (format) => expectTypeOf(format).toEqualTypeOf<WavFormat>());
    reader.on('data', (chunk) => expectTypeOf(chunk).toBeAny());
    // A stream that needs a service is typed without opening one.
    const listen = (stream: RealtimeTranslateStream): void => {
      stream.on('ended', (...args) => expectTypeOf(args).toEqualTypeOf<RealtimeTranslateEvents['ended']>());
      stream.on('reconnecting', (info) => expectTypeOf(info).toEqualTypeOf<RealtimeTranslateEvents['reconnecting'][0]>());
    };
    expect(listen).toBeTypeOf('function');
    expect(chunker).toBeInstanceOf(Transform);
    expect(reader).toBeInstanceOf(Duplex);
    chunker.destroy();
    reader.destroy();
  });
});
