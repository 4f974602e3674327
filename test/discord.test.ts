import { afterEach, describe, expect, it, vi } from 'vitest';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fromServiceFormat, toServiceFormat } from '../lib/audio/convert.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { IntegrityError, RtTranslateError, UnsupportedError, ValidationError } from '../lib/errors.js';
import {
  DISCORD_FRAME_BYTES,
  DiscordPlaybackAdapter,
  DiscordReceiveAdapter,
  createDiscordPacer,
  translateSpeaker,
  type DiscordReceiveOptions,
  type GapInfo,
  type OpusPacketInput,
  type ReceiveWarningDetail,
  type SpeakerTranslation,
} from '../lib/integrations/discord.js';
import { OPUS_FRAME_BYTES, OpusPacketEncoder, createOpusCodec, isOpusBackendAvailable, loadOpusBackend, type OpusBackend } from '../lib/audio/opus.js';
import { SpeakerSlot } from '../examples/speaker-slot.js';
import { countHandles, expectNoLeakedHandles } from './helpers/handles.js';
import { FIRST_SENT, FRAMES, LAST_SENT, packets, pcm48, sentFrames } from './helpers/discord-speaker.js';
import { answerVariants, answersIn, emulatorUtterances, loadSpeechFixture } from './helpers/speech.js';
import { collector, runChunked } from './helpers/streams.js';

const fixture = loadSpeechFixture();
const BACKENDS = (['native', 'opusscript'] as const).filter((b) => isOpusBackendAvailable(b));
const KEY = 'test-key-0123456789';

/** Runs of missing frames between sent ones (the gaps), in order. */
function gapRuns(sent: number[]): number[] {
  const runs: number[] = [];
  for (let k = 1; k < sent.length; k++) if (sent[k]! - sent[k - 1]! > 1) runs.push(sent[k]! - sent[k - 1]! - 1);
  return runs;
}

/**
 * What the receive path must produce: the timeline `slots` (a packet to decode, or null for a
 * 20 ms frame of silence) decoded by a fresh decoder in order and converted with the library's
 * `toServiceFormat` in one piece.
 */
async function reference(slots: Array<Buffer | null>, backend: OpusBackend): Promise<Buffer> {
  const codec = createOpusCodec({ backend });
  const pcm = Buffer.concat(slots.map((p) => (p === null ? Buffer.alloc(OPUS_FRAME_BYTES) : codec.decode(p))));
  codec.close();
  return runChunked(toServiceFormat({ rate: 48000, channels: 2 }), pcm, pcm.length);
}

/** Slots from the first to the last sent frame, each gap run shortened to at most `cap` frames. */
function timeline(list: Buffer[], sent: number[], cap = Infinity): Array<Buffer | null> {
  const slots: Array<Buffer | null> = [list[sent[0]!]!];
  for (let k = 1; k < sent.length; k++) {
    const run = sent[k]! - sent[k - 1]! - 1;
    for (let j = 0; j < Math.min(run, cap); j++) slots.push(null);
    slots.push(list[sent[k]!]!);
  }
  return slots;
}

interface Received {
  pcm: Buffer;
  gaps: GapInfo[];
  warnings: Array<{ error: RtTranslateError; detail: ReceiveWarningDetail }>;
}

function observe(adapter: DiscordReceiveAdapter): Received & { chunks: Buffer[] } {
  const r = { pcm: Buffer.alloc(0), gaps: [] as GapInfo[], warnings: [] as Received['warnings'], chunks: [] as Buffer[] };
  adapter.on('data', (c: Buffer) => r.chunks.push(c));
  adapter.on('gap', (g) => r.gaps.push(g));
  adapter.on('warning', (error, detail) => r.warnings.push({ error, detail }));
  return r;
}

/** Writes packets one at a time, each at the clock time `at(k)`, waiting for each write. */
async function feedWithClock(
  options: DiscordReceiveOptions,
  items: Array<{ packet: Buffer; at: number }>,
): Promise<Received & { adapter: DiscordReceiveAdapter }> {
  let clock = 0;
  const adapter = new DiscordReceiveAdapter({ ...options, gaps: 'clock', now: () => clock, idleFillMs: 0 });
  const r = observe(adapter);
  const ended = new Promise<void>((resolve, reject) => {
    adapter.on('end', resolve);
    adapter.on('error', reject);
  });
  for (const item of items) {
    clock = item.at;
    await new Promise<void>((resolve, reject) => adapter.write(item.packet, (err) => (err ? reject(err) : resolve())));
  }
  adapter.end();
  await ended;
  return { ...r, pcm: Buffer.concat(r.chunks), adapter };
}

/** Runs objects through a receive adapter with pipeline(). */
async function feedObjects(options: DiscordReceiveOptions, items: OpusPacketInput[]): Promise<Received & { adapter: DiscordReceiveAdapter }> {
  const adapter = new DiscordReceiveAdapter(options);
  const r = observe(adapter);
  await pipeline(Readable.from(items), adapter, collector([]));
  return { ...r, pcm: Buffer.concat(r.chunks), adapter };
}

/** A deterministic jitter of 0 to 9 ms for packet `i`. */
function jitter(i: number): number {
  return (i * 7919) % 10;
}

function int16(b: Buffer): Int16Array {
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}

/** SNR (dB) of `y` delayed by `lag` against `x`, and their correlation coefficient, over `[from, to)` of `x`. */
function snrAt(x: Int16Array, y: Int16Array, lag: number, from = 0, to = Math.min(x.length, y.length - lag)): { snrDb: number; correlation: number } {
  let sx = 0;
  let sy = 0;
  let sxy = 0;
  let se = 0;
  for (let i = from; i < to; i++) {
    const a = x[i]!;
    const b = y[i + lag]!;
    sx += a * a;
    sy += b * b;
    sxy += a * b;
    se += (a - b) * (a - b);
  }
  return { snrDb: 10 * Math.log10(sx / se), correlation: sxy / Math.sqrt(sx * sy) };
}

/**
 * Signal-to-noise ratio of `y` against the reference `x`, in dB, and their correlation, over
 * the whole signal, at the delay of `y` (0 to `maxLag` values) found best on a 1 s excerpt of
 * speech (the first sentence of the fixture).
 */
function compareSignals(x: Int16Array, y: Int16Array, maxLag: number, valuesPerSecond = 24_000): { snrDb: number; lag: number; correlation: number } {
  const from = Math.round(valuesPerSecond * 0.5);
  let lag = 0;
  let best = -Infinity;
  for (let l = 0; l <= maxLag; l++) {
    const { snrDb } = snrAt(x, y, l, from, from + valuesPerSecond);
    if (snrDb > best) {
      best = snrDb;
      lag = l;
    }
  }
  return { lag, ...snrAt(x, y, lag) };
}

// --- backends ------------------------------------------------------------------------------------

describe('Opus backends', () => {
  it('at least one backend loads here, and auto prefers the native one', () => {
    expect(BACKENDS.length).toBeGreaterThan(0);
    const adapter = new DiscordReceiveAdapter();
    expect(adapter.opusBackend).toBe(BACKENDS[0]);
    adapter.destroy();
  });

  it.each(BACKENDS)('a forced backend is the one used (%s)', (backend) => {
    const receive = new DiscordReceiveAdapter({ opusBackend: backend });
    const play = new DiscordPlaybackAdapter({ output: 'opus', opusBackend: backend });
    expect(receive.opusBackend).toBe(backend);
    expect(play.opusBackend).toBe(backend);
    receive.destroy();
    play.destroy();
  });

  it('neither module loading is an UnsupportedError naming both packages', () => {
    const missing = (name: string): never => {
      throw new Error(`Cannot find module '${name}'`);
    };
    let caught: unknown;
    try {
      loadOpusBackend('auto', missing);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(UnsupportedError);
    expect((caught as UnsupportedError).code).toBe('RTT_UNSUPPORTED');
    expect((caught as Error).message).toMatch(/install @discordjs\/opus .* or opusscript/);
    expect((caught as Error).message).toContain("Cannot find module 'opusscript'");
  });

  it('falls back to opusscript when the native module is absent, and a forced native fails naming it', () => {
    const withoutNative = (name: string): unknown => {
      if (name === '@discordjs/opus') throw new Error('native binding not built');
      return loadOpusBackend('opusscript').module;
    };
    expect(loadOpusBackend('auto', withoutNative).backend).toBe('opusscript');
    expect(() => loadOpusBackend('native', withoutNative)).toThrow(/backend 'native' could not be loaded: install @discordjs\/opus/);
  });

  it('rejects an unknown backend and a bad option with ValidationErrors naming the field', () => {
    expect(() => new DiscordReceiveAdapter({ opusBackend: 'ffmpeg' as never })).toThrow(ValidationError);
    expect(() => new DiscordReceiveAdapter({ opusBackend: 'ffmpeg' as never })).toThrow(/opusBackend.*'auto', 'native', 'opusscript'/);
    expect(() => new DiscordReceiveAdapter({ maxGapMs: -1 })).toThrow(/Invalid maxGapMs/);
    expect(() => new DiscordReceiveAdapter({ gaps: 'rtp' as never })).toThrow(/Invalid gaps/);
    expect(() => new DiscordPlaybackAdapter({ output: 'wav' as never })).toThrow(/Invalid output: expected 'pcm' or 'opus'/);
    expect(() => new DiscordPlaybackAdapter({ output: 'opus', bitrate: 1 })).toThrow(/Invalid bitrate/);
  });
});

describe('opusscript: many codecs in one process (a bot with many speakers)', () => {
  /** A distinct 20 ms frame of 48 kHz stereo for speaker `who`, frame `n`. */
  function frame(who: number, n: number): Buffer {
    const pcm = Buffer.alloc(OPUS_FRAME_BYTES);
    for (let i = 0; i < OPUS_FRAME_BYTES / 4; i++) {
      const t = n * (OPUS_FRAME_BYTES / 4) + i;
      const v = Math.round(6000 * Math.sin((2 * Math.PI * (200 + 37 * who) * t) / 48_000));
      pcm.writeInt16LE(v, i * 4);
      pcm.writeInt16LE(-v, i * 4 + 2);
    }
    return pcm;
  }

  it('300 codecs used in turn each give exactly what one codec alone gives, and close cleanly', () => {
    const SPEAKERS = 300;
    const FRAMES = 5;
    // Reference: each speaker's stream through a codec of its own, one speaker at a time.
    const alone: Buffer[][] = [];
    for (let who = 0; who < SPEAKERS; who += 37) {
      const codec = createOpusCodec({ backend: 'opusscript' });
      const out: Buffer[] = [];
      for (let n = 0; n < FRAMES; n++) out.push(codec.decode(codec.encode(frame(who, n))));
      alone[who] = out;
      codec.close();
    }
    // The same streams through 300 live codecs, interleaved frame by frame.
    const codecs = Array.from({ length: SPEAKERS }, () => createOpusCodec({ backend: 'opusscript' }));
    const mixed: Buffer[][] = codecs.map(() => []);
    for (let n = 0; n < FRAMES; n++) {
      codecs.forEach((codec, who) => mixed[who]!.push(codec.decode(codec.encode(frame(who, n)))));
    }
    for (let who = 0; who < SPEAKERS; who += 37) {
      expect(mixed[who]!.map((b) => b.length)).toEqual(alone[who]!.map(() => OPUS_FRAME_BYTES));
      expect(Buffer.concat(mixed[who]!).equals(Buffer.concat(alone[who]!))).toBe(true);
    }
    for (const codec of codecs) codec.close();
    expect(() => codecs[0]!.decode(Buffer.alloc(3))).toThrow(/closed/);
  });
});

describe.each(BACKENDS)('OpusCodec.decodeTransient (%s)', (backend) => {
  it('gives the bytes decode gives, packet after packet, and fails the same way', () => {
    const list = packets(backend);
    const a = createOpusCodec({ backend });
    const b = createOpusCodec({ backend });
    for (const packet of list.slice(0, 50)) {
      const transient = a.decodeTransient(packet);
      expect(transient.length).toBe(OPUS_FRAME_BYTES);
      expect(transient.equals(b.decode(packet))).toBe(true);
    }
    // A packet longer than any Opus packet: refused by both calls with the same message.
    const bad = Buffer.alloc(OPUS_FRAME_BYTES * 2);
    let message = '';
    try {
      b.decode(bad);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).not.toBe('');
    expect(() => a.decodeTransient(bad)).toThrow(message);
    a.close();
    b.close();
    expect(() => a.decodeTransient(list[0]!)).toThrow(/closed/);
  });

  it.runIf(backend === 'opusscript')('opusscript: reuses one buffer, while decode hands out a new one each time', () => {
    const list = packets(backend);
    const codec = createOpusCodec({ backend });
    const first = codec.decodeTransient(list[10]!);
    const second = codec.decodeTransient(list[11]!);
    expect(second.buffer).toBe(first.buffer);
    expect(second.byteOffset).toBe(first.byteOffset);
    const fresh = codec.decode(list[12]!);
    const again = codec.decode(list[13]!);
    expect(fresh.buffer).not.toBe(second.buffer);
    expect(again.buffer === fresh.buffer && again.byteOffset === fresh.byteOffset).toBe(false);
    codec.close();
  });
});

describe.each(BACKENDS)('DiscordReceiveAdapter (%s)', (backend) => {
  const list = packets(backend);
  const sent = sentFrames();
  const runs = gapRuns(sent);
  const span = LAST_SENT - FIRST_SENT + 1;

  it('the test material has real gaps: the pauses between sentences send no packets', () => {
    expect(sent.length).toBeLessThan(span);
    expect(Math.max(...runs)).toBeGreaterThanOrEqual(55); // the 1.2 s pauses, minus the resampler's ringing
    expect(runs.filter((r) => r >= 55)).toHaveLength(2);
  });

  it('clock mode: the timeline is real, sample for sample, with up to 9 ms of arrival jitter', async () => {
    // A tolerance of 10 ms with jitter of 0 to 9 ms: on-time packets are at most 9 ms late, and
    // a single missing packet makes the next one 11 to 29 ms late, so every gap is found.
    const r = await feedWithClock(
      { opusBackend: backend, toleranceMs: 10 },
      sent.map((i) => ({ packet: list[i]!, at: i * 20 + jitter(i) })),
    );
    // Total = packets + gaps, 20 ms each, 480 samples per frame at 24 kHz.
    expect(r.pcm.length).toBe(span * 480 * 2);
    expect(r.pcm.equals(await reference(timeline(list, sent), backend))).toBe(true);
    expect(r.gaps.map((g) => g.durationMs)).toEqual(runs.map((n) => n * 20));
    expect(r.gaps.every((g) => g.mode === 'clock' && !g.capped)).toBe(true);
    expect(r.adapter.stats).toMatchObject({ packets: sent.length, decodedPackets: sent.length, corruptPackets: 0, gaps: runs.length });
    expect(r.adapter.silenceMs).toBe((span - sent.length) * 20);
    expect(r.warnings).toEqual([]);
  });

  it('clock mode: a gap longer than maxGapMs is shortened to it and the timeline restarts at the next packet', async () => {
    const cap = 10; // frames
    const r = await feedWithClock(
      { opusBackend: backend, toleranceMs: 10, maxGapMs: cap * 20 },
      sent.map((i) => ({ packet: list[i]!, at: i * 20 + jitter(i) })),
    );
    const kept = runs.reduce((sum, n) => sum + Math.min(n, cap), 0);
    expect(r.pcm.length).toBe((sent.length + kept) * 480 * 2);
    expect(r.pcm.equals(await reference(timeline(list, sent, cap), backend))).toBe(true);
    expect(r.gaps).toEqual(runs.map((n) => ({ mode: 'clock', durationMs: Math.min(n, cap) * 20, capped: n > cap })));
    expect(r.adapter.stats.cappedGaps).toBe(runs.filter((n) => n > cap).length);
  });

  it('maxGapMs 0 (filling off): no silence, no gap event, no gap counted, in clock, timestamp and sequence modes', async () => {
    const clock = await feedWithClock(
      { opusBackend: backend, toleranceMs: 10, maxGapMs: 0 },
      sent.map((i) => ({ packet: list[i]!, at: i * 20 + jitter(i) })),
    );
    const stamped = await feedObjects(
      { opusBackend: backend, maxGapMs: 0 },
      sent.map((i) => ({ packet: list[i]!, timestamp: i * 960 })),
    );
    const numbered = await feedObjects(
      { opusBackend: backend, maxGapMs: 0 },
      sent.map((i) => ({ packet: list[i]!, sequence: i })),
    );
    const backToBack = await reference(
      sent.map((i) => list[i]!),
      backend,
    );
    for (const r of [clock, stamped, numbered]) {
      expect(r.gaps).toEqual([]);
      expect(r.adapter.stats).toMatchObject({ gaps: 0, cappedGaps: 0, silenceSamples: 0, packets: sent.length });
      expect(r.pcm.equals(backToBack)).toBe(true);
    }
  });

  it('clock mode: lateness within the tolerance inserts nothing', async () => {
    // Every packet 30 ms late against the origin (tolerance 40): no silence.
    const items = sent.slice(0, 40).map((i, k) => ({ packet: list[i]!, at: k * 20 + (k === 0 ? 0 : 30) }));
    const r = await feedWithClock({ opusBackend: backend }, items);
    expect(r.adapter.stats.silenceSamples).toBe(0);
    expect(r.pcm.length).toBe(40 * 480 * 2);
  });

  it('timestamp mode: exactly the missing samples, across the 32-bit wrap', async () => {
    const base = 2 ** 32 - 960 * 200;
    const r = await feedObjects(
      { opusBackend: backend },
      sent.map((i) => ({ packet: list[i]!, timestamp: (base + i * 960) >>> 0 })),
    );
    expect(r.adapter.gapMode).toBe('timestamp');
    expect(r.pcm.length).toBe(span * 480 * 2);
    expect(r.pcm.equals(await reference(timeline(list, sent), backend))).toBe(true);
    expect(r.gaps.map((g) => g.durationMs)).toEqual(runs.map((n) => n * 20));
  });

  it('sequence mode: exactly the missing packets, across the 16-bit wrap', async () => {
    const r = await feedObjects(
      { opusBackend: backend },
      sent.map((i) => ({ packet: list[i]!, sequence: (65_400 + i) & 0xffff })),
    );
    expect(r.adapter.gapMode).toBe('sequence');
    expect(r.pcm.length).toBe(span * 480 * 2);
    expect(r.pcm.equals(await reference(timeline(list, sent), backend))).toBe(true);
  });

  it('timestamp mode: a repeated or late packet is dropped with a warning; a jump back in time restarts the timeline', async () => {
    const items: OpusPacketInput[] = [];
    for (let i = FIRST_SENT; i < FIRST_SENT + 20; i++) items.push({ packet: list[i]!, timestamp: i * 960 });
    items.splice(10, 0, { packet: list[FIRST_SENT + 9]!, timestamp: (FIRST_SENT + 9) * 960 }); // repeated
    items.splice(15, 0, { packet: list[FIRST_SENT + 3]!, timestamp: (FIRST_SENT + 3) * 960 }); // late
    const restart = ((FIRST_SENT + 20) * 960 - 480_000) >>> 0; // 10 s back: the sender restarted
    items.push({ packet: list[FIRST_SENT + 20]!, timestamp: restart });
    items.push({ packet: list[FIRST_SENT + 21]!, timestamp: (restart + 960) >>> 0 });
    const r = await feedObjects({ opusBackend: backend }, items);
    expect(r.warnings.map((w) => w.detail)).toEqual([
      { kind: 'late-packet', packetIndex: 10 },
      { kind: 'late-packet', packetIndex: 15 },
      { kind: 'discontinuity', packetIndex: 22 },
    ]);
    expect(r.warnings.every((w) => w.error instanceof IntegrityError)).toBe(true);
    expect(r.adapter.stats.droppedPackets).toBe(2);
    expect(r.pcm.equals(await reference(list.slice(FIRST_SENT, FIRST_SENT + 22), backend))).toBe(true);
  });

  it('a corrupt packet becomes 20 ms of silence and a warning; the stream goes on', async () => {
    const bad = Buffer.from([0xff, 0xff, 0xff, 0x01, 0x02, 0x03]);
    const k = sent.indexOf(FIRST_SENT + 30); // inside the first sentence
    expect(k).toBeGreaterThan(0);
    const items = sent.map((i) => ({ packet: i === sent[k] ? bad : list[i]!, at: i * 20 }));
    const r = await feedWithClock({ opusBackend: backend, toleranceMs: 10 }, items);
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings[0]!.error).toBeInstanceOf(IntegrityError);
    expect(r.warnings[0]!.error.code).toBe('RTT_INTEGRITY');
    expect(r.warnings[0]!.error.message).toMatch(/Opus packet \d+ \(6 bytes\) could not be decoded .*replaced by 20 ms of silence/);
    expect(r.warnings[0]!.detail).toEqual({ kind: 'corrupt-packet', packetIndex: k });
    expect(r.adapter.stats.corruptPackets).toBe(1);
    expect(r.pcm.length).toBe(span * 480 * 2);
    const slots = timeline(list, sent);
    slots[slots.indexOf(list[sent[k]!]!)] = null;
    expect(r.pcm.equals(await reference(slots, backend))).toBe(true);
  });

  it('an empty packet is handled like a corrupt one', async () => {
    const r = await feedObjects({ opusBackend: backend, gaps: 'none' }, [list[FIRST_SENT]!, Buffer.alloc(0), list[FIRST_SENT + 1]!]);
    expect(r.warnings.map((w) => w.detail.kind)).toEqual(['corrupt-packet']);
    expect(r.pcm.length).toBe(3 * 480 * 2);
  });

  it('a round trip PCM -> Opus -> PCM keeps the speech: SNR above 20 dB, correlation above 0.99, delay 6.5 ms', async () => {
    // Measured here (libopus defaults for 48 kHz stereo, codec-chosen bitrate): 23.5 dB and
    // 0.998 with both backends; the bounds leave margin for other libopus builds. The delay is
    // Opus's own look-ahead (312 samples at 48 kHz); the converter adds none.
    const all = list.map((packet, i) => ({ packet, timestamp: i * 960 }));
    const r = await feedObjects({ opusBackend: backend }, all);
    expect(r.pcm.length).toBe(FRAMES * 480 * 2);
    const m = compareSignals(int16(fixture.pcm), int16(r.pcm), 400);
    expect(m.lag).toBe(156);
    expect(m.snrDb).toBeGreaterThan(20);
    expect(m.correlation).toBeGreaterThan(0.99);
  });
});

describe('DiscordReceiveAdapter: input checks and idle filling', () => {
  const backend = BACKENDS[0]!;
  const list = packets(backend);

  afterEach(() => {
    vi.useRealTimers();
  });

  it('a write that is not a packet fails the stream with a ValidationError naming the field', async () => {
    await expect(feedObjects({ opusBackend: backend }, ['not a packet' as never])).rejects.toMatchObject({ code: 'RTT_VALIDATION', field: 'packet' });
    await expect(feedObjects({ opusBackend: backend }, [{ packet: list[FIRST_SENT]!, timestamp: 0 }, list[FIRST_SENT + 1]!])).rejects.toMatchObject({
      field: 'packet.timestamp',
    });
    await expect(feedObjects({ opusBackend: backend }, [{ packet: list[FIRST_SENT]!, sequence: 70_000 }])).rejects.toMatchObject({
      field: 'packet.sequence',
    });
  });

  it('clock mode with idle filling: the pause is sent while it lasts, and the total stays exact', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const adapter = new DiscordReceiveAdapter({ opusBackend: backend, gaps: 'clock', now: () => Date.now(), idleFillMs: 100, toleranceMs: 10 });
    const r = observe(adapter);
    const bytes = (): number => r.chunks.reduce((n, c) => n + c.length, 0);
    const speech = list.slice(FIRST_SENT, FIRST_SENT + 11);
    for (let k = 0; k < 10; k++) {
      adapter.write(speech[k]!);
      vi.advanceTimersByTime(20);
    }
    // 200 ms of packets. Idle checks at +100, +200, +300 ms after the last one insert the
    // silence due (80, 100, 100 ms). The 10 ms tolerance lets the last 20 ms of the pause be
    // filled when the next packet comes (with the default 40 it would be left out).
    vi.advanceTimersByTime(280);
    expect(adapter.silenceMs).toBe(280);
    // The resampler holds back at most ~4 ms until more input arrives.
    expect(bytes()).toBeGreaterThanOrEqual((480 - 5) * 48);
    expect(r.gaps).toEqual([]); // the gap is still open
    vi.advanceTimersByTime(220); // now 700 ms after the first packet
    adapter.write(speech[10]!);
    expect(r.gaps).toEqual([{ mode: 'clock', durationMs: 500, capped: false }]);
    adapter.end();
    await vi.runAllTimersAsync();
    expect(vi.getTimerCount()).toBe(0);
    const pcm = Buffer.concat(r.chunks);
    expect(pcm.length).toBe(36 * 480 * 2);
    const slots: Array<Buffer | null> = [...speech.slice(0, 10), ...Array<null>(25).fill(null), speech[10]!];
    expect(pcm.equals(await reference(slots, backend))).toBe(true);
  });

  it('clock mode with idle filling stops at maxGapMs and leaves no timer behind', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const adapter = new DiscordReceiveAdapter({ opusBackend: backend, now: () => Date.now(), idleFillMs: 100, maxGapMs: 200 });
    const r = observe(adapter);
    adapter.write(list[FIRST_SENT]!);
    vi.advanceTimersByTime(5000);
    expect(adapter.silenceMs).toBe(200);
    expect(vi.getTimerCount()).toBe(0);
    adapter.write(list[FIRST_SENT + 1]!);
    expect(r.gaps).toEqual([{ mode: 'clock', durationMs: 200, capped: true }]);
    // The timeline restarted at the second packet: a packet 20 ms later is on time.
    vi.advanceTimersByTime(20);
    adapter.write(list[FIRST_SENT + 2]!);
    adapter.destroy();
    expect(adapter.silenceMs).toBe(200);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the end of the input takes the idle timer with it at once: nothing is filled after the end, and the mode stays known', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const adapter = new DiscordReceiveAdapter({ opusBackend: backend, now: () => Date.now(), idleFillMs: 100 });
    const r = observe(adapter);
    adapter.write(list[FIRST_SENT]!);
    expect(vi.getTimerCount()).toBe(1);
    const finished = new Promise((resolve) => adapter.once('finish', resolve));
    adapter.end(); // `_flush` runs now: the timer is gone before the stream is destroyed
    expect(vi.getTimerCount()).toBe(0);
    await finished;
    vi.advanceTimersByTime(1000);
    expect(adapter.silenceMs).toBe(0);
    expect(r.gaps).toEqual([]);
    expect(adapter.gapMode).toBe('clock');
  });
});

// --- playing -------------------------------------------------------------------------------------

/** The fixture converted by the library's `fromServiceFormat`, padded with zeros to whole frames. */
const expectedPlayback = await (async () => {
  const converted = await runChunked(fromServiceFormat({ rate: 48000, channels: 2 }), fixture.pcm, fixture.pcm.length);
  const padded = Buffer.alloc(Math.ceil(converted.length / DISCORD_FRAME_BYTES) * DISCORD_FRAME_BYTES);
  converted.copy(padded);
  return { frames: padded, padding: padded.length - converted.length };
})();

async function playbackChunks(adapter: NodeJS.ReadWriteStream, input: Buffer, size: number): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  const pieces = function* () {
    for (let i = 0; i < input.length; i += size) yield input.subarray(i, i + size);
  };
  await pipeline(Readable.from(pieces(), { objectMode: false }), adapter, collector(chunks));
  return chunks;
}

describe('DiscordPlaybackAdapter', () => {
  it.each([1, 7, 960, 4801, 399_688])('PCM frames: 3840 bytes each, equal to fromServiceFormat output, padded at the end (%i-byte writes)', async (size) => {
    const adapter = new DiscordPlaybackAdapter();
    const frames = await playbackChunks(adapter, fixture.pcm, size);
    expect(frames.every((f) => f.length === 3840)).toBe(true);
    expect(frames.length).toBe(expectedPlayback.frames.length / 3840);
    expect(Buffer.concat(frames).equals(expectedPlayback.frames)).toBe(true);
    expect(adapter.framesOut).toBe(frames.length);
    expect(adapter.paddingBytes).toBe(expectedPlayback.padding);
    expect(adapter.paddingBytes).toBeGreaterThan(0);
  });

  it('48 kHz stereo: 20 ms of a 24 kHz input is one frame, the mono sample in both channels', async () => {
    const input = Buffer.alloc(480 * 2 * 5);
    for (let i = 0; i < 2400; i++) input.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 300 * i) / 24000)), i * 2);
    const frames = await playbackChunks(new DiscordPlaybackAdapter(), input, 960);
    expect(frames).toHaveLength(5);
    const all = Buffer.concat(frames);
    for (let s = 0; s < all.length; s += 4) expect(all.readInt16LE(s)).toBe(all.readInt16LE(s + 2));
  });

  it.each(BACKENDS)('Opus packets: one per 20 ms frame, decoding to the frames within the codec error (%s)', async (backend) => {
    const adapter = new DiscordPlaybackAdapter({ output: 'opus', opusBackend: backend });
    const out = await playbackChunks(adapter, fixture.pcm, 4800);
    expect(out.length).toBe(expectedPlayback.frames.length / 3840);
    const codec = createOpusCodec({ backend });
    const decoded = Buffer.concat(out.map((p) => codec.decode(p)));
    codec.close();
    expect(decoded.length).toBe(expectedPlayback.frames.length);
    // Interleaved stereo: the 312-sample look-ahead is 624 values. Measured: 23.5 dB, 0.998.
    const m = compareSignals(int16(expectedPlayback.frames), int16(decoded), 800, 96_000);
    expect(m.lag).toBe(624);
    expect(m.snrDb).toBeGreaterThan(20);
    expect(m.correlation).toBeGreaterThan(0.99);
  });

  it('OpusPacketEncoder: any chunking, a padded last packet', async () => {
    const encoder = new OpusPacketEncoder({ opusBackend: BACKENDS[0] });
    const out = await playbackChunks(encoder, pcm48.subarray(0, 3840 * 3 + 100), 999);
    expect(out).toHaveLength(4);
    expect(encoder.packets).toBe(4);
  });

  it('createDiscordPacer releases 3840-byte frames every 20 ms and fills silence while idle', async () => {
    vi.useFakeTimers();
    try {
      const pacer = createDiscordPacer();
      const frames: Buffer[] = [];
      pacer.on('data', (f: Buffer) => frames.push(f));
      pacer.write(pcm48.subarray(FIRST_SENT * 3840, (FIRST_SENT + 2) * 3840));
      await vi.advanceTimersByTimeAsync(100);
      expect(frames.map((f) => f.length)).toEqual([3840, 3840, 3840, 3840, 3840, 3840]);
      expect(frames[0]!.equals(pcm48.subarray(FIRST_SENT * 3840, (FIRST_SENT + 1) * 3840))).toBe(true);
      expect(frames.slice(2).every((f) => f.every((b) => b === 0))).toBe(true);
      pacer.destroy();
    } finally {
      vi.useRealTimers();
    }
  });
});

// --- end to end ----------------------------------------------------------------------------------

describe.each(BACKENDS)('Discord audio path end to end against the emulator (%s)', (backend) => {
  let emulator: RunningEmulator | undefined;
  afterEach(async () => {
    await emulator?.close();
    emulator = undefined;
  });

  const list = packets(backend);
  const sent = sentFrames();
  const items = (): OpusPacketInput[] => sent.map((i) => ({ packet: list[i]!, timestamp: i * 960 }));

  /** What the service hears: the receive output, then the 800 ms of silence the translator appends on end(). */
  async function heard(): Promise<Buffer> {
    return Buffer.concat([Buffer.from((await feedObjects({ opusBackend: backend }, items())).pcm), Buffer.alloc(800 * 48)]);
  }

  /** The answers as playback frames: 48 kHz stereo, 20 ms each, the last one padded with silence. */
  async function framesOf(pcm24: Buffer): Promise<Buffer> {
    const converted = await runChunked(fromServiceFormat({ rate: 48000, channels: 2 }), pcm24, pcm24.length);
    const frames = Buffer.alloc(Math.ceil(converted.length / 3840) * 3840);
    converted.copy(frames);
    return frames;
  }

  /**
   * The emulator answers each utterance of what it heard with that audio (the last one once the
   * audio stops arriving): compute it from the receive output.
   */
  async function expectedFrames(): Promise<{ pcm24: Buffer; frames: Buffer; utterances: number }> {
    const utterances = emulatorUtterances(await heard());
    const pcm24 = Buffer.concat(utterances.map((u) => u.audio));
    return { pcm24, frames: await framesOf(pcm24), utterances: utterances.length };
  }

  it('Opus packets with gaps in, translated 48 kHz stereo 20 ms frames out, bit for bit', async () => {
    const baseline = countHandles();
    emulator = await startEmulator({ apiKeys: [KEY] });
    const expected = await expectedFrames();
    expect(expected.utterances).toBe(3);
    const { playback, translator, receiver, done } = translateSpeaker({
      opusPackets: Readable.from(items()),
      from: 'en-us',
      to: 'es-es',
      apiKey: KEY,
      realtimeUrl: emulator.realtimeUrl,
      quietPeriodMs: 400,
      output: 'pcm',
      opusBackend: backend,
    });
    const transcripts: string[] = [];
    translator.on('transcript.done', (t) => transcripts.push(t));
    const frames: Buffer[] = [];
    playback.on('data', (f: Buffer) => frames.push(f));
    await done;
    await new Promise<void>((resolve) => (playback.readableEnded ? resolve() : playback.once('end', resolve)));
    expect(receiver.opusBackend).toBe(backend);
    expect(receiver.stats.gaps).toBe(gapRuns(sent).length);
    expect(transcripts).toHaveLength(3);
    expect(frames.every((f) => f.length === 3840)).toBe(true);
    // Duration: every translated sample, at 48 kHz, in whole frames.
    expect(frames.length).toBe(Math.ceil(expected.pcm24.length / 960));
    expect(Buffer.concat(frames).equals(expected.frames)).toBe(true);
    await emulator.close();
    emulator = undefined;
    await expectNoLeakedHandles(baseline);
  });

  /** A speaker translated as 48 kHz stereo PCM frames, reconnecting quickly after a drop. */
  function reconnectingSpeaker(emu: RunningEmulator, opusPackets: Readable, pace = false) {
    return translateSpeaker({
      opusPackets,
      from: 'en-us',
      to: 'es-es',
      apiKey: KEY,
      realtimeUrl: emu.realtimeUrl,
      quietPeriodMs: 400,
      reconnect: { initialDelayMs: 10, maxDelayMs: 40 },
      output: 'pcm',
      pace,
      opusBackend: backend,
    });
  }

  it('a speaker survives the service dropping after every answer: each answer once, its frames bit for bit, after two reconnects', async () => {
    emulator = await startEmulator({ apiKeys: [KEY], faults: { dropAfterResponses: 1 } });
    // Each session counts its frames from the replay's start, so an answer after a reconnect may
    // move by up to a frame (`answerVariants`): the answers are checked, then the frames made of them.
    const variants = answerVariants(await heard());
    const { playback, translator, done } = reconnectingSpeaker(emulator, Readable.from(items()));
    const answers: Buffer[] = [];
    translator.on('audio.delta', (audio: Buffer) => answers.push(audio));
    const frames: Buffer[] = [];
    playback.on('data', (f: Buffer) => frames.push(f));
    await done;
    await new Promise<void>((resolve) => (playback.readableEnded ? resolve() : playback.once('end', resolve)));
    expect(translator.stats.reconnects).toBe(2);
    const pcm24 = Buffer.concat(answers);
    expect(answersIn(pcm24, variants)).toEqual([0, expect.any(Number), expect.any(Number)]);
    expect(Buffer.concat(frames).equals(await framesOf(pcm24))).toBe(true);
  });

  it('paced playback keeps its timeline through a reconnect: silence frames at 20 ms while the service is away, then the answers', async () => {
    const baseline = countHandles();
    emulator = await startEmulator({ apiKeys: [KEY] });
    const source = new Readable({ objectMode: true, read() {} });
    const { playback, translator, done } = reconnectingSpeaker(emulator, source, true);
    const frames: Array<{ at: number; frame: Buffer }> = [];
    const silent = (f: Buffer) => f.every((b) => b === 0);
    // Resolves once most of the first answer has played (it is 115 frames at 48 kHz; the last
    // ones wait in the conversion for the next answer) and 100 ms of silence followed: a silent
    // slot can also come in the middle of an answer, when a piece reaches the pacer late.
    const firstAnswer = fixture.utterances[0]!;
    const mostOfIt = Math.floor(((firstAnswer.endSample - firstAnswer.startSample) * 2 * 4) / 3840) - 15;
    let audible = 0;
    let quiet = 0;
    const playedOut = new Promise<void>((resolve) => {
      playback.on('data', (frame: Buffer) => {
        frames.push({ at: performance.now(), frame });
        quiet = silent(frame) ? quiet + 1 : 0;
        if (!silent(frame)) audible += 1;
        if (audible >= mostOfIt && quiet >= 5) resolve();
      });
    });
    // The first sentence, then the first packet of the second (3.82 s): the receiver fills the
    // pause between them, so the service hears the first one end.
    const all = items();
    const split = sent.findIndex((i) => i >= 185) + 1;
    for (const item of all.slice(0, split)) source.push(item);
    await playedOut;
    let from = 0;
    let to = 0;
    translator.once('reconnecting', () => (from = frames.length));
    const reconnected = new Promise<void>((resolve) =>
      translator.once('reconnected', () => {
        to = frames.length;
        resolve();
      }),
    );
    const startedAt = performance.now();
    emulator.realtimeFaults.refuseNextHandshakes(1, 503, 1);
    emulator.realtimeFaults.drop();
    await reconnected;
    const gapMs = performance.now() - startedAt;
    for (const item of all.slice(split)) source.push(item);
    source.push(null);
    await done;
    await new Promise<void>((resolve) => (playback.readableEnded ? resolve() : playback.once('end', resolve)));
    expect(translator.stats.reconnects).toBe(1);
    // The outage lasted at least the 1 s asked for; playback went on meanwhile, one silent frame
    // per 20 ms of it (the pacer's schedule follows the clock), not a pause and not a burst.
    expect(gapMs).toBeGreaterThanOrEqual(1000);
    const during = frames.slice(from, to);
    expect(during.every((f) => silent(f.frame))).toBe(true);
    expect(during.length).toBeGreaterThanOrEqual(Math.floor(gapMs / 20) - 10);
    expect(during.length).toBeLessThanOrEqual(Math.ceil(gapMs / 20) + 1);
    // Then the other answers played, and the session ended complete.
    expect(translator.stats.responses).toBe(3);
    expect(translator.stats.ending).toMatchObject({ complete: true });
    expect(frames.slice(to).some((f) => !silent(f.frame))).toBe(true);
    await emulator.close();
    emulator = undefined;
    await expectNoLeakedHandles(baseline);
  });

  it('Opus output: one packet per translated 20 ms, decoding to the expected audio within the codec error', async () => {
    emulator = await startEmulator({ apiKeys: [KEY] });
    const expected = await expectedFrames();
    const { playback, done } = translateSpeaker({
      opusPackets: items(),
      from: 'en-us',
      to: 'es-es',
      apiKey: KEY,
      realtimeUrl: emulator.realtimeUrl,
      quietPeriodMs: 400,
      opusBackend: backend,
    });
    const out: Buffer[] = [];
    playback.on('data', (p: Buffer) => out.push(p));
    await done;
    await new Promise<void>((resolve) => (playback.readableEnded ? resolve() : playback.once('end', resolve)));
    expect(out.length).toBe(expected.frames.length / 3840);
    const codec = createOpusCodec({ backend });
    const decoded = Buffer.concat(out.map((p) => codec.decode(p)));
    codec.close();
    const m = compareSignals(int16(expected.frames), int16(decoded), 800, 96_000);
    expect(m.lag).toBe(624);
    expect(m.snrDb).toBeGreaterThan(20);
  });

  it('the example bot frees its speaker slot when a translation ends or fails: the next speaker is translated', async () => {
    emulator = await startEmulator({ apiKeys: [KEY] });
    const realtimeUrl = emulator.realtimeUrl;
    const short = items().slice(0, 60);
    const subscribe = () => Readable.from(short);
    const open = (apiKey: string) => (packets: Readable) => {
      const path = translateSpeaker({ opusPackets: packets, from: 'en-us', to: 'es-es', apiKey, realtimeUrl, quietPeriodMs: 200, opusBackend: backend });
      path.playback.on('error', () => undefined);
      path.playback.resume();
      return path;
    };
    const slot = new SpeakerSlot<SpeakerTranslation>();
    const first = slot.take('alice', subscribe, open(KEY))!;
    expect(slot.active?.speaker).toBe('alice');
    let opened = false;
    expect(
      slot.take(
        'bob',
        () => {
          opened = true;
          return subscribe();
        },
        open(KEY),
      ),
    ).toBeUndefined();
    expect(opened).toBe(false);
    await first.path.done;
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(slot.active).toBeUndefined();

    // A failing translation (a key the service refuses) frees the slot too, and releases its packets.
    const failing = slot.take('bob', subscribe, open('refused-key-0123456789'))!;
    expect(slot.active?.speaker).toBe('bob');
    await expect(failing.path.done).rejects.toBeInstanceOf(RtTranslateError);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(slot.active).toBeUndefined();
    expect(failing.packets.destroyed).toBe(true);

    const third = slot.take('carol', subscribe, open(KEY))!;
    expect(slot.active?.speaker).toBe('carol');
    await third.path.done;
  });

  it('a failing session rejects done and destroys playback with the same typed error', async () => {
    emulator = await startEmulator({ apiKeys: ['another-key-0123456789'] });
    const { playback, done } = translateSpeaker({
      opusPackets: items(),
      from: 'en-us',
      to: 'es-es',
      apiKey: KEY,
      realtimeUrl: emulator.realtimeUrl,
      opusBackend: backend,
    });
    const destroyed = new Promise<unknown>((resolve) => playback.once('error', resolve));
    playback.resume();
    const err = await done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RtTranslateError);
    expect((err as RtTranslateError).code).toBe('RTT_AUTH');
    expect(await destroyed).toBe(err);
    expect(playback.destroyed).toBe(true);
  });
});
