/**
 * The examples' file playback, built on `openAudioSource`: the Discord bot's translated file as
 * Opus packets for the player, and the Twilio bridge's greeting played into each call, both
 * against the emulator on loopback.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { WebSocket } from 'ws';
import { fileURLToPath } from 'node:url';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { fromServiceFormat } from '../lib/audio/convert.js';
import { createOpusCodec } from '../lib/audio/opus.js';
import { translateFile } from '../examples/discord-bot.js';
import { translateSpeakerInto } from '../examples/discord-fanout-bot.js';
import { packets as speakerPackets, sentFrames } from './helpers/discord-speaker.js';
import { runChunked } from './helpers/streams.js';
import type { FanoutEvent } from '../lib/index.js';
import { startTwilioBridgeServer, type RunningTwilioBridgeServer } from '../examples/twilio-bridge.js';
import { expectedTranslation, loadSpeechFixture } from './helpers/speech.js';

const KEY = 'sk-examples-7c1e93b0d2f4a658';
const FIXTURE_WAV = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const fixture = loadSpeechFixture();

const closers: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  for (const closer of closers.splice(0).reverse()) await closer.close();
});

async function emulator(): Promise<RunningEmulator> {
  const started = await startEmulator({ apiKeys: [KEY] });
  closers.push(started);
  return started;
}

describe.concurrent('examples: one Discord speaker into several languages', () => {
  /** The speaker's packets as a voice receiver delivers them (none in silence), real Opus. */
  const items = () => {
    const list = speakerPackets('opusscript');
    return sentFrames().map((i) => ({ packet: list[i]!, timestamp: i * 960 }));
  };

  /** Each language's audio as its session sent it (the fan-out's tagged events). */
  function sessionAudio(events: FanoutEvent[], lang: string): Buffer {
    return Buffer.concat(events.flatMap((e) => (e.type === 'audio.delta' && e.lang === lang ? [e.audio] : [])));
  }

  it.for(['pcm', 'opus'] as const)(
    'translateSpeakerInto, %s playback: one session per language, each language its own frames of what its session sent',
    async (output) => {
      const { realtimeUrl } = await emulator();
      const path = translateSpeakerInto({
        opusPackets: items(),
        from: 'en-us',
        to: ['es-es', 'fr-fr'],
        apiKey: KEY,
        realtimeUrl,
        quietPeriodMs: 300,
        output,
        opusBackend: 'opusscript',
      });
      const events: FanoutEvent[] = [];
      path.fanout.on('event', (e) => events.push(e));
      const frames = new Map<string, Buffer[]>();
      for (const [lang, playback] of path.playback) {
        const list: Buffer[] = [];
        frames.set(lang, list);
        playback.on('data', (f: Buffer) => list.push(f));
      }
      await path.done;
      expect([...path.playback.keys()]).toEqual(['es-es', 'fr-fr']);
      const targets = path.fanout.targets;
      expect(targets.map((t) => t.outcome)).toEqual(['complete', 'complete']);
      expect(new Set(targets.map((t) => t.sessionId)).size).toBe(2);
      const codec = createOpusCodec({ backend: 'opusscript' });
      try {
        for (const lang of ['es-es', 'fr-fr']) {
          const audio = sessionAudio(events, lang);
          expect(audio.length).toBeGreaterThan(0);
          // The session's audio at 48 kHz stereo, in 20 ms frames, the last one padded with silence.
          const converted = await runChunked(fromServiceFormat({ rate: 48000, channels: 2 }), audio, audio.length);
          const got = frames.get(lang)!;
          expect(got.length).toBe(Math.ceil(converted.length / 3840));
          if (output === 'pcm') {
            const padded = Buffer.alloc(got.length * 3840);
            converted.copy(padded);
            expect(Buffer.concat(got).equals(padded)).toBe(true);
          } else {
            for (const packet of got) expect(codec.decode(packet).length).toBe(3840);
          }
        }
      } finally {
        codec.close();
      }
    },
  );
});

describe.concurrent('examples: playing a file', () => {
  it("the Discord bot's translateFile: a WAV file's translation as 20 ms Opus packets", async () => {
    const { realtimeUrl } = await emulator();
    const file = await translateFile(FIXTURE_WAV, { from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, quietPeriodMs: 300 });
    const packets: Buffer[] = [];
    for await (const packet of file.packets) packets.push(packet as Buffer);
    await file.done;
    // The emulator answers with the speech itself: 48 kHz stereo, 20 ms (3840 bytes) a packet.
    const answered = expectedTranslation(fixture.pcm, fixture.utterances).length;
    expect(packets.length).toBe(Math.ceil((answered * 4) / 3840));
    const codec = createOpusCodec({ backend: 'opusscript' });
    try {
      for (const packet of packets) expect(codec.decode(packet).length).toBe(3840);
    } finally {
      codec.close();
    }
  });

  it("the Twilio bridge's greeting: the file as 160-byte mu-law media messages, then a mark, as the call starts", async () => {
    const { realtimeUrl } = await emulator();
    const server: RunningTwilioBridgeServer = await startTwilioBridgeServer({
      bridge: { from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl },
      greetingFile: FIXTURE_WAV,
    });
    closers.push(server);
    const ws = new WebSocket(server.url);
    closers.push({ close: async () => ws.terminate() });
    await once(ws, 'open');
    const received: Array<{ event: string; media?: { payload: string }; mark?: { name: string } }> = [];
    const greeted = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        const message = JSON.parse(data.toString()) as (typeof received)[number];
        received.push(message);
        if (message.event === 'mark' && message.mark?.name === 'greeting') resolve();
      }),
    );
    const streamSid = 'MZ00000000000000000000000000000002';
    ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
    ws.send(
      JSON.stringify({
        event: 'start',
        streamSid,
        start: { streamSid, callSid: 'CA1', tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } },
      }),
    );
    await greeted;
    const media = received.filter((m) => m.event === 'media').map((m) => Buffer.from(m.media!.payload, 'base64'));
    for (const payload of media) expect(payload.length).toBe(160);
    // The same conversion applied to the file's samples directly, the last 20 ms filled with silence.
    const converter = fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 });
    const direct = await new Promise<Buffer>((resolve, reject) => {
      const out: Buffer[] = [];
      converter.on('data', (chunk: Buffer) => out.push(chunk));
      converter.once('end', () => resolve(Buffer.concat(out)));
      converter.once('error', reject);
      converter.end(fixture.pcm);
    });
    expect(media.length).toBe(Math.ceil(direct.length / 160));
    const padded = Buffer.alloc(media.length * 160, 0xff).fill(direct, 0, direct.length);
    expect(Buffer.concat(media).equals(padded)).toBe(true);
  });
});
