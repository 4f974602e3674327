/**
 * rt-translate: live speech translation and synthesized speech as Node streams.
 * Public exports only; the emulator is exported separately as `rt-translate/emulator`.
 */
export * from './errors.js';
export * from './config.js';

// Realtime speech-to-speech
export * from './realtime/languages.js';
export * from './realtime/codec.js';
export * from './realtime/transcription-codec.js';
export {
  RealtimeTranslateStream,
  type RealtimeTranslateOptions,
  type ReconnectOptions,
  type RealtimeTranslateEvents,
  type RealtimeStats,
  type SessionStartedInfo,
} from './realtime/realtime-translate-stream.js';
export {
  eventToRecord,
  type RealtimeEvent,
  type RealtimeEventType,
  type ReconnectingInfo,
  type ReconnectedInfo,
  type EndedInfo,
} from './realtime/realtime-events.js';
export type { ResponseTiming, LatencySummary } from './realtime/speech-ledger.js';
export { classifyServerError } from './realtime/server-errors.js';

// HTTP interface: client, endpoints, tasks, streams
export * from './http/index.js';
export * from './http/flac-download-stream.js';

// Audio: framing, conversion, codecs, files, pacing
export * from './audio/pcm-chunker.js';
export * from './audio/audio-format.js';
export * from './audio/resampler.js';
export * from './audio/channels.js';
export * from './audio/sample-format.js';
export * from './audio/g711.js';
export * from './audio/convert.js';
export * from './audio/wav.js';
export * from './audio/pacer.js';
export * from './audio/flac-decoder.js';
export { encodeFlac } from './audio/flac-encoder.js';
export * from './audio/flac-stream.js';
export * from './audio/ogg-opus.js';
export * from './audio/sniff.js';
export * from './audio/ffmpeg.js';

// Integrations: Discord voice
export * from './audio/opus.js';
export * from './integrations/discord.js';

// Integrations: telephony (Twilio Media Streams)
export * from './integrations/twilio.js';
