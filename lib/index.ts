/**
 * rt-translate: live speech translation and synthesized speech as Node streams.
 * Public exports only; the emulator is exported separately as `rt-translate/emulator`.
 */
export * from './errors.js';
export * from './config.js';
export * from './realtime/languages.js';
export * from './realtime/codec.js';
export {
  RealtimeTranslateStream,
  classifyServerError,
  type RealtimeTranslateOptions,
  type RealtimeTranslateEvents,
  type RealtimeStats,
  type SessionStartedInfo,
} from './realtime/realtime-translate-stream.js';
export * from './audio/pcm-chunker.js';
