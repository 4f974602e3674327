/**
 * The service's documented limits and formats that more than one layer needs: the realtime
 * wire's sizes and audio format (the chunker of `audio/` cuts to the append limit, the realtime
 * codec checks it, the relay and the emulator enforce it) and the request schemas' default
 * voice. Numbers only, so every layer can import them.
 */

/** Largest text event the service accepts, in bytes of UTF-8 JSON. */
export const MAX_CLIENT_EVENT_BYTES = 1024 * 1024;
/** Largest decoded audio payload of one `input_audio_buffer.append`. */
export const MAX_APPEND_AUDIO_BYTES = 256 * 1024;
/** PCM16 mono 24 kHz, both ways. */
export const REALTIME_SAMPLE_RATE = 24_000;
export const REALTIME_CHANNELS = 1;
export const REALTIME_BYTES_PER_FRAME = 2;
/** The default voice id of the HTTP request schemas; a stock voice, never valid as `cloned`. */
export const DEFAULT_VOICE_ID = 147_320;
