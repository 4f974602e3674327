import { describe, expect, it } from 'vitest';
import { SERVICE_FORMAT, type AudioDescription } from '../lib/audio/audio-format.js';
import { createChannelProcessor } from '../lib/audio/channels.js';
import { createConverter, fromServiceFormat, toServiceFormat } from '../lib/audio/convert.js';
import { decodeMulaw, encodeMulaw } from '../lib/audio/g711.js';
import { createResampleProcessor } from '../lib/audio/resampler.js';
import { ValidationError } from '../lib/errors.js';
import { runChunked } from './helpers/streams.js';

const run = runChunked;

/** Interleaved int16 tone frames, a different frequency per channel. */
function tonePcm(rate: number, channels: number, frames: number, amplitude = 16000): Buffer {
  const b = Buffer.alloc(frames * channels * 2);
  for (let n = 0; n < frames; n++) {
    for (let c = 0; c < channels; c++) {
      b.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * (440 + 220 * c) * n) / rate)), (n * channels + c) * 2);
    }
  }
  return b;
}

function samples(b: Buffer): Int16Array {
  const out = new Int16Array(b.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = b.readInt16LE(i * 2);
  return out;
}

/** Amplitude of the `freq` component (least squares fit of a sine and cosine). */
function amplitudeOf(x: ArrayLike<number>, rate: number, freq: number, from = 0, to = x.length): number {
  let re = 0;
  let im = 0;
  for (let n = from; n < to; n++) {
    re += x[n]! * Math.cos((2 * Math.PI * freq * n) / rate);
    im += x[n]! * Math.sin((2 * Math.PI * freq * n) / rate);
  }
  return (2 * Math.hypot(re, im)) / (to - from);
}

describe('chain plans', () => {
  it.each<[AudioDescription, string[]]>([
    [{ rate: 48000, channels: 2 }, ['downmix 2->1', 'resample 48000->24000']],
    [{ format: 'mulaw', rate: 8000, channels: 1 }, ['decode mulaw', 'resample 8000->24000']],
    [{ format: 'alaw', rate: 8000, channels: 1 }, ['decode alaw', 'resample 8000->24000']],
    [{ format: 'f32le', rate: 44100, channels: 2 }, ['format f32le->s16le', 'downmix 2->1', 'resample 44100->24000']],
    [{ format: 's16be', rate: 24000, channels: 1 }, ['format s16be->s16le']],
    [{ rate: 24000, channels: 1 }, []],
  ])('to the service format from %j: %j', (desc, stages) => {
    const c = toServiceFormat(desc);
    expect(c.stages).toEqual(stages);
    expect(c.to).toEqual(SERVICE_FORMAT);
  });

  it.each<[AudioDescription, string[]]>([
    [{ rate: 48000, channels: 2 }, ['resample 24000->48000', 'upmix 1->2']],
    [{ format: 'mulaw', rate: 8000, channels: 1 }, ['resample 24000->8000', 'encode mulaw']],
    [{ format: 'f32le', rate: 16000, channels: 2 }, ['resample 24000->16000', 'upmix 1->2', 'format s16le->f32le']],
  ])('from the service format to %j: %j', (desc, stages) => {
    expect(fromServiceFormat(desc).stages).toEqual(stages);
  });

  it('does not modify the description passed in', () => {
    const desc = Object.freeze({ rate: 48000, channels: 2 });
    expect(toServiceFormat(desc).from).toEqual({ format: 's16le', rate: 48000, channels: 2 });
    expect(desc).toEqual({ rate: 48000, channels: 2 });
  });
});

describe('48 kHz stereo (Discord PCM) to the service format', () => {
  const input = tonePcm(48000, 2, 4800 * 3 + 7);
  const expected = (() => {
    const mix = createChannelProcessor(2, 1);
    const rs = createResampleProcessor(48000, 24000, 1);
    return Buffer.concat([rs.process(mix.process(input)), rs.flush()]);
  })();

  it.each([1, 3, 3840, 1 << 20])('equals downmix then resample, chunks of %i bytes', async (size) => {
    const out = await run(toServiceFormat({ rate: 48000, channels: 2 }), input, size);
    expect(out.length).toBe(Math.ceil((4800 * 3 + 7) / 2) * 2);
    expect(out.equals(expected)).toBe(true);
  });

  it("keeps both channels' tones at half their level (averaged), within 0.1 dB", async () => {
    const out = samples(await run(toServiceFormat({ rate: 48000, channels: 2 }), input, 3840));
    for (const f of [440, 660]) expect(Math.abs(20 * Math.log10(amplitudeOf(out, 24000, f, 240, 6840) / 8000))).toBeLessThan(0.1);
  });
});

describe('8 kHz mu-law (telephony) both ways', () => {
  const pcm8k = tonePcm(8000, 1, 8000);
  const mulaw = Buffer.from(samples(pcm8k).map((v) => encodeMulaw(v)));

  it.each([1, 160, 8000])('decodes and resamples to 24 kHz, same bytes for chunks of %i', async (size) => {
    const out = await run(toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), mulaw, size);
    const whole = await run(toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), mulaw, 1 << 20);
    expect(out.length).toBe(24000 * 2);
    expect(out.equals(whole)).toBe(true);
    // The decoded tone, at three times the rate: level within 0.2 dB of the original 16000.
    expect(Math.abs(20 * Math.log10(amplitudeOf(samples(out), 24000, 440, 2400, 21600) / 16000))).toBeLessThan(0.2);
  });

  it('service audio to mu-law and back to the service format stays within mu-law quantisation', async () => {
    const service = tonePcm(24000, 1, 24000);
    const encoded = await run(fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), service, 480);
    expect(encoded.length).toBe(8000);
    // Decoding the codes gives the 8 kHz tone within half a step (at 16000: step 512, half 256) plus 2 LSB of filtering.
    const decoded = [...encoded].map((c) => decodeMulaw(c));
    let worst = 0;
    for (let n = 100; n < 7900; n++) worst = Math.max(worst, Math.abs(decoded[n]! - 16000 * Math.sin((2 * Math.PI * 440 * n) / 8000)));
    expect(worst).toBeLessThanOrEqual(258);
    const back = samples(await run(toServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }), encoded, 160));
    expect(Math.abs(20 * Math.log10(amplitudeOf(back, 24000, 440, 2400, 21600) / 16000))).toBeLessThan(0.2);
  });
});

describe('round trips through the service format', () => {
  it.each<AudioDescription>([
    { rate: 48000, channels: 2 },
    { rate: 44100, channels: 1 },
    { format: 'f32le', rate: 16000, channels: 2 },
    { format: 's16be', rate: 22050, channels: 1 },
  ])('service -> %j -> service returns the signal within 3 LSB', async (desc) => {
    const service = tonePcm(24000, 1, 12000);
    const there = await run(fromServiceFormat(desc), service, 999);
    const back = samples(await run(toServiceFormat(desc), there, 1001));
    expect(back.length).toBe(12000);
    let worst = 0;
    for (let n = 200; n < 11800; n++) worst = Math.max(worst, Math.abs(back[n]! - service.readInt16LE(n * 2)));
    expect(worst).toBeLessThanOrEqual(3);
  });

  it('stereo output of fromServiceFormat has identical channels', async () => {
    const out = samples(await run(fromServiceFormat({ rate: 48000, channels: 2 }), tonePcm(24000, 1, 2400), 480));
    expect(out.length).toBe(4800 * 2);
    for (let i = 0; i < out.length; i += 2) if (out[i] !== out[i + 1]) throw new Error(`channels differ at ${i}`);
    expect(Math.max(...out)).toBeGreaterThan(15000);
  });
});

describe('createConverter between any two descriptions', () => {
  it('44.1 kHz mono f32 to 8 kHz stereo A-law', async () => {
    const f32 = Buffer.alloc(4410 * 4);
    for (let n = 0; n < 4410; n++) f32.writeFloatLE(0.5 * Math.sin((2 * Math.PI * 440 * n) / 44100), n * 4);
    const c = createConverter({ format: 'f32le', rate: 44100, channels: 1 }, { format: 'alaw', rate: 8000, channels: 2 });
    expect(c.stages).toEqual(['format f32le->s16le', 'resample 44100->8000', 'upmix 1->2', 'encode alaw']);
    const out = await run(c, f32, 1000);
    expect(out.length).toBe(800 * 2);
    for (let i = 0; i < out.length; i += 2) expect(out[i]).toBe(out[i + 1]);
  });
});

describe('validation', () => {
  it.each<[unknown, string, string]>([
    [{ rate: 32000, channels: 1 }, 'rate', 'one of 8000, 16000, 22050, 24000, 44100, 48000'],
    [{ rate: 48000, channels: 6 }, 'channels', 'a channel count of 1 or 2'],
    [{ format: 'opus', rate: 48000, channels: 2 }, 'format', 'one of s16le, s16be, f32le, mulaw, alaw'],
    [{ channels: 2 }, 'rate', 'one of 8000'],
    [null, 'description', 'an object'],
  ])('toServiceFormat(%j) names %s', (desc, field, accepted) => {
    let error: unknown;
    try {
      toServiceFormat(desc as AudioDescription);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe(field);
    expect((error as ValidationError).accepted).toContain(accepted);
  });

  it('createConverter prefixes the side at fault', () => {
    expect(() => createConverter({ rate: 48000, channels: 2 }, { rate: 48000, channels: 3 })).toThrow(
      expect.objectContaining({ field: 'to.channels', code: 'RTT_VALIDATION' }),
    );
    expect(() => fromServiceFormat({ format: 'u8' as never, rate: 8000, channels: 1 })).toThrow(/Invalid format: expected one of s16le/);
  });
});
