/**
 * Discord's audio format, shared by the receive and playback adapters: PCM16 LE, 48 kHz,
 * stereo, in 20 ms frames (what a voice receiver decodes to and a player plays).
 */
import type { ResolvedAudioDescription } from '../audio/audio-format.js';
import { OPUS_FRAME_BYTES } from '../audio/opus.js';

/** Discord's PCM: s16le, 48 kHz, stereo (what a receiver decodes to and a player plays). */
export const DISCORD_PCM_FORMAT: Readonly<ResolvedAudioDescription> = Object.freeze({ format: 's16le', rate: 48_000, channels: 2 });

/** Bytes of one 20 ms playback frame of 48 kHz stereo PCM16: 3840. */
export const DISCORD_FRAME_BYTES = OPUS_FRAME_BYTES;
