/**
 * CPU cost per concurrent Discord speaker, for each Opus backend that loads here:
 * - receive path: `DiscordReceiveAdapter` (Opus decode + gap fill + 48 kHz stereo -> 24 kHz
 *   mono) over the packets a receiver delivers for the speech fixture (no packets in silence,
 *   RTP timestamps), against the bare decode of the same packets;
 * - playback path: `DiscordPlaybackAdapter` with Opus output (24 kHz mono -> 48 kHz stereo 20 ms
 *   frames -> Opus encode) over the same speech, against the bare encode of the same frames.
 *
 * Material: the speech fixture three times over (about 25 s). Figures are "x realtime" (seconds
 * of speaker timeline per second of CPU) and "% of one core" for one speaker (the subject's
 * time over the audio's duration); the ratio says what the adapters add to the codec itself.
 */
import { readFileSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SERVICE_FORMAT } from '../lib/audio/audio-format.js';
import { planConversion } from '../lib/audio/convert.js';
import { DISCORD_PCM_FORMAT, DiscordPlaybackAdapter, DiscordReceiveAdapter, type OpusPacketInput } from '../lib/integrations/discord.js';
import { OPUS_FRAME_BYTES, createOpusCodec, isOpusBackendAvailable, type OpusBackend } from '../lib/audio/opus.js';
import { compare } from './harness.js';

const REPEAT = 3;

function speech24k(): Buffer {
  const wav = readFileSync(new URL('../../test/fixtures/speech-en-24k.wav', import.meta.url));
  const pcm = wav.subarray(44);
  return Buffer.concat(Array.from({ length: REPEAT }, () => pcm));
}

function to48kStereoFrames(pcm24: Buffer): Buffer[] {
  const processor = planConversion({ ...SERVICE_FORMAT }, { ...DISCORD_PCM_FORMAT }).processor;
  const pcm = Buffer.concat([processor.process(pcm24), processor.flush()]);
  const frames: Buffer[] = [];
  for (let i = 0; i < pcm.length; i += OPUS_FRAME_BYTES) {
    const frame = Buffer.alloc(OPUS_FRAME_BYTES);
    pcm.copy(frame, 0, i, Math.min(pcm.length, i + OPUS_FRAME_BYTES));
    frames.push(frame);
  }
  return frames;
}

function sink(): Writable {
  return new Writable({
    objectMode: true,
    write(_chunk, _encoding, callback) {
      callback();
    },
  });
}

export default async function (): Promise<void> {
  const backends = (['native', 'opusscript'] as const).filter((b) => isOpusBackendAvailable(b));
  if (backends.length === 0) {
    console.log('discord: no Opus backend (@discordjs/opus or opusscript) loads here; skipped');
    return;
  }
  const pcm24 = speech24k();
  const frames = to48kStereoFrames(pcm24);
  const timelineSeconds = (frames.length * 20) / 1000;
  const silent = frames.map((f) => f.every((b) => b === 0));

  for (const backend of backends as OpusBackend[]) {
    const codec = createOpusCodec({ backend });
    const packets = frames.map((f) => codec.encode(f));
    // What a receiver delivers: no packets for silent frames; RTP timestamps place the rest.
    const received: Array<{ packet: Buffer; timestamp: number }> = [];
    packets.forEach((packet, i) => {
      if (!silent[i]) received.push({ packet, timestamp: i * 960 });
    });
    console.log(
      `\n[${backend}] ${timelineSeconds.toFixed(1)} s of speaker timeline, ${received.length} packets received, ` +
        `${frames.length - received.length} frames of silence to fill`,
    );

    const receive = await compare(
      `receive path, ${backend}: Opus packets with gaps -> PCM16 mono 24 kHz`,
      {
        name: 'DiscordReceiveAdapter (decode + gap fill + 48k stereo -> 24k mono, pipeline)',
        run: () => pipeline(Readable.from(received as OpusPacketInput[]), new DiscordReceiveAdapter({ opusBackend: backend }), sink()),
      },
      {
        name: 'bare Opus decode of the same packets',
        run: () => {
          const decoder = createOpusCodec({ backend });
          for (const r of received) decoder.decode(r.packet);
          decoder.close();
        },
      },
      { unit: 'x realtime', audioSeconds: timelineSeconds, rounds: 5 },
    );

    const playback = await compare(
      `playback path, ${backend}: PCM16 mono 24 kHz -> 20 ms Opus packets`,
      {
        name: 'DiscordPlaybackAdapter output opus (24k mono -> 48k stereo frames -> encode, pipeline, 4800-byte writes)',
        run: () =>
          pipeline(
            Readable.from(
              (function* () {
                for (let i = 0; i < pcm24.length; i += 4800) yield pcm24.subarray(i, i + 4800);
              })(),
              { objectMode: false },
            ),
            new DiscordPlaybackAdapter({ output: 'opus', opusBackend: backend }),
            sink(),
          ),
      },
      {
        name: 'bare Opus encode of the same 48k stereo frames',
        run: () => {
          const encoder = createOpusCodec({ backend });
          for (const f of frames) encoder.encode(f);
          encoder.close();
        },
      },
      { unit: 'x realtime', audioSeconds: timelineSeconds, rounds: 5 },
    );
    codec.close();

    const core = (ms: number): string => `${((ms / (timelineSeconds * 1000)) * 100).toFixed(2)} %`;
    console.log(
      `  CPU per concurrent speaker (${backend}): receive ${core(receive.subjectMsPerRun)} + playback ${core(playback.subjectMsPerRun)} ` +
        `= ${core(receive.subjectMsPerRun + playback.subjectMsPerRun)} of one core ` +
        `(codec alone: ${core(receive.baselineMsPerRun + playback.baselineMsPerRun)}); ` +
        `about ${Math.floor((timelineSeconds * 1000) / (receive.subjectMsPerRun + playback.subjectMsPerRun))} speakers per core`,
    );
  }
}
