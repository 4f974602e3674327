import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { createResampleProcessor } from '../lib/audio/resampler.js';
import { encodeMulaw } from '../lib/audio/g711.js';
import { TwilioMediaBridge } from '../lib/integrations/twilio.js';
import { startFakeRealtimeServer, type FakeRealtimeServer } from './helpers/fake-realtime-server.js';

const servers: FakeRealtimeServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

const SID = 'MZ00000000000000000000000000000042';

/** The `media` message of the call's `k`-th 20 ms frame. */
function media(k: number, mulaw: Buffer = Buffer.alloc(160, k % 2 ? 0x7f : 0xfe)): string {
  return JSON.stringify({
    event: 'media',
    media: { track: 'inbound', chunk: String(k + 1), timestamp: String(k * 20), payload: mulaw.toString('base64') },
    streamSid: SID,
  });
}

/** A bridge whose session is up and whose call has started; `peer` is the service's side. */
async function startCall(appendMs: number | undefined) {
  const server = await startFakeRealtimeServer();
  servers.push(server);
  const bridge = new TwilioMediaBridge({
    from: 'en-us',
    to: 'es-es',
    apiKey: 'k',
    realtimeUrl: server.realtimeUrl,
    reconnect: false,
    ...(appendMs === undefined ? {} : { appendMs }),
  });
  bridge.on('error', () => {});
  bridge.resume();
  // The call starts; its session opens then.
  bridge.write(
    JSON.stringify({
      event: 'start',
      start: { streamSid: SID, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } },
    }),
  );
  const peer = await server.nextPeer();
  await peer.waitForEvent('session.update');
  peer.sendSessionCreated();
  return { bridge, peer };
}

async function sendCall(appendMs: number | undefined, frames: number) {
  const { bridge, peer } = await startCall(appendMs);
  // One message per turn of the event loop, as a call delivers them (a burst written in one
  // turn would leave as one append: the stream sends what a tick's writes queued together).
  for (let k = 0; k < frames; k++) {
    bridge.write(media(k));
    await new Promise((resolve) => setImmediate(resolve));
  }
  // 8 kHz -> 24 kHz: 480 samples (960 bytes) per 20 ms frame, but the resampler holds back its
  // filter's look-ahead until the end, so everything but the last append has arrived by now.
  await peer.waitForAudioBytes(960 * frames - (960 * (appendMs ?? 100)) / 20 - 200);
  const counts = { appends: peer.appendEvents, bytes: peer.audioBytes };
  bridge.destroy();
  return counts;
}

describe('TwilioMediaBridge appendMs', () => {
  it('sends the caller audio in appends of 100 ms by default, and of appendMs when given', async () => {
    const byDefault = await sendCall(undefined, 50); // 1 s of audio
    expect(byDefault.appends).toBeGreaterThanOrEqual(9);
    expect(byDefault.appends).toBeLessThanOrEqual(10);
    expect(byDefault.bytes % 4800).toBe(0);
    const each = await sendCall(20, 50);
    expect(each.appends).toBeGreaterThanOrEqual(48);
    expect(each.bytes % 960).toBe(0);
  });

  // What reaches the service must be every byte of the conversion, in order: also when a
  // whole append fits in one message (20 ms), when a gap fill makes a piece longer than an
  // append, and when a burst of messages makes the translator queue writes (a piece handed on
  // as a view of memory the bridge reuses would show here).
  it.each([20, 100, 60])('appends of %s ms carry exactly the converted call audio, through a burst and a gap', async (appendMs) => {
    const { bridge, peer } = await startCall(appendMs);
    // A swept tone, so that every frame differs; frames 40 to 44 never arrive (a 100 ms gap the
    // bridge fills with silence in one long piece).
    const frames: Buffer[] = [];
    for (let k = 0; k < 120; k++) {
      const frame = Buffer.alloc(160);
      for (let i = 0; i < 160; i++) {
        const t = k * 160 + i;
        frame[i] = encodeMulaw(Math.round(9000 * Math.sin((t * t) / 400_000 + t / 7)));
      }
      frames.push(frame);
    }
    const silence = Buffer.alloc(160, 0xff);
    const timeline = frames.map((frame, k) => (k >= 40 && k < 45 ? silence : frame));
    const sent = frames.map((frame, k) => ({ frame, k })).filter(({ k }) => k < 40 || k >= 45);
    for (const { frame, k } of sent) bridge.write(media(k, frame));
    const reference = createResampleProcessor(8000, 24_000, 1, { decode: 'mulaw' }).process(Buffer.concat(timeline));
    const whole = Math.floor(reference.length / (appendMs * 48)) * appendMs * 48;
    await peer.waitForAudioBytes(whole);
    expect(peer.audioBytes).toBe(whole);
    expect(peer.audioDigest()).toBe(createHash('sha256').update(reference.subarray(0, whole)).digest('hex'));
    bridge.destroy();
  });

  it.each([0, 30, 1020, 1.5])('refuses appendMs %s naming the field', (appendMs) => {
    let error: unknown;
    try {
      new TwilioMediaBridge({ from: 'en-us', to: 'es-es', apiKey: 'k', realtimeUrl: 'ws://127.0.0.1:9', appendMs });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe('appendMs');
  });
});
