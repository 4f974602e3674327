/**
 * The speech fixture as a Discord speaker sends it: 48 kHz stereo (the library's own converter),
 * in 20 ms frames, one Opus packet per frame, with no packet for the frames that are digital
 * silence (a voice receiver delivers nothing while the speaker is silent).
 */
import { fromServiceFormat } from '../../lib/audio/convert.js';
import { OPUS_FRAME_BYTES, createOpusCodec, type OpusBackend } from '../../lib/audio/opus.js';
import { loadSpeechFixture } from './speech.js';
import { runChunked } from './streams.js';

const fixture = loadSpeechFixture();

/** The fixture at 48 kHz stereo (the library's own converter), padded with zeros to whole 20 ms frames. */
export const pcm48 = await (async () => {
  const converted = await runChunked(fromServiceFormat({ rate: 48000, channels: 2 }), fixture.pcm, 4800);
  const frames = Math.ceil(converted.length / OPUS_FRAME_BYTES);
  const padded = Buffer.alloc(frames * OPUS_FRAME_BYTES);
  converted.copy(padded);
  return padded;
})();
export const FRAMES = pcm48.length / OPUS_FRAME_BYTES;

/** Frames that are digital silence: a receiver gets no packet for them. */
export const silentFrame: boolean[] = Array.from({ length: FRAMES }, (_, i) =>
  pcm48.subarray(i * OPUS_FRAME_BYTES, (i + 1) * OPUS_FRAME_BYTES).every((b) => b === 0),
);
export const FIRST_SENT = silentFrame.indexOf(false);
export const LAST_SENT = silentFrame.lastIndexOf(false);

/** One 20 ms Opus packet per frame, encoded with `backend` (deterministic for a backend). */
const packetsBy = new Map<OpusBackend, Buffer[]>();
export function packets(backend: OpusBackend): Buffer[] {
  let list = packetsBy.get(backend);
  if (!list) {
    const codec = createOpusCodec({ backend });
    list = [];
    for (let i = 0; i < FRAMES; i++) list.push(codec.encode(pcm48.subarray(i * OPUS_FRAME_BYTES, (i + 1) * OPUS_FRAME_BYTES)));
    codec.close();
    packetsBy.set(backend, list);
  }
  return list;
}

/** Indices of the frames a receiver delivers (the speaker's client sends nothing in silence). */
export function sentFrames(): number[] {
  const out: number[] = [];
  for (let i = FIRST_SENT; i <= LAST_SENT; i++) if (!silentFrame[i]) out.push(i);
  return out;
}
