/**
 * `rt-translate/protocol`: the wire codecs as pure functions, for callers who drive a socket
 * themselves: the realtime service's events and limits, the live transcription messages, how
 * errors are classified, and Twilio Media Streams' messages. The streams of the root module are built on these.
 */
export * from './realtime/codec.js';
export * from './realtime/transcription-codec.js';
export { normalizeRealtimeLanguage, isRealtimeLanguage, REALTIME_LANGUAGES, type RealtimeLanguage } from './realtime/languages.js';
export { classifyServerError } from './realtime/server-errors.js';
export * from './integrations/twilio-messages.js';
