/**
 * `rt-translate/protocol`: the wire codecs as pure functions, for callers who drive a socket
 * themselves: the realtime service's events and limits, the live transcription messages, how
 * errors are classified, and Twilio Media Streams' messages. The streams of the root module are built on these.
 *
 * Also the rules under the HTTP client, for callers who build or check requests themselves: the
 * request schemas and `validate`, wire-name conversion, and how the key and the service URLs are
 * taken from options and the environment.
 */
export {
  APPEND_PIECE_BYTES,
  audioAppendText,
  type BareClientEventType,
  base64DecodedLength,
  BINARY_AUDIO_WIRE_TYPE,
  checkAppendAudio,
  type ClientEvent,
  decodeBinaryAudio,
  decodeClientEvent,
  decodeServerEvent,
  decodeServerEventWith,
  decodeStrictBase64,
  DEFAULT_VOICE_ID,
  encodeAudioAppend,
  encodeBareEvent,
  encodeServerEvent,
  encodeSessionUpdate,
  isBase64,
  MAX_APPEND_AUDIO_BYTES,
  MAX_CLIENT_EVENT_BYTES,
  normalizeModalities,
  normalizeSessionConfig,
  type OutputModality,
  parseEventObject,
  REALTIME_BYTES_PER_FRAME,
  REALTIME_CHANNELS,
  REALTIME_SAMPLE_RATE,
  SERVER_EVENT_TYPES,
  type ServerEvent,
  type ServerEventListenerArgs,
  type ServerEventOf,
  type SessionConfig,
  type SessionConfigInput,
  sessionFromWire,
  type SessionInfo,
  type SessionStartedInfo,
  type SessionUpdateOptions,
  type VoiceSelection,
  type WireSessionInfo,
} from './realtime/codec.js';
export {
  checkLiveParams,
  decodeLiveClientMessage,
  decodeLiveServerEvent,
  DEFAULT_LIVE_PARAMS,
  encodeCloseStream,
  encodeKeepAlive,
  encodeLiveError,
  encodeLiveQuery,
  encodeReady,
  encodeResults,
  LIVE_ENCODINGS,
  LIVE_TRANSCRIPTION_PATH,
  type LiveClientMessage,
  type LiveEncoding,
  type LiveResults,
  liveSampleBytes,
  type LiveServerEvent,
  type LiveTranscriptionParams,
  type LiveWord,
  parseLiveQuery,
} from './realtime/transcription-codec.js';
export { normalizeRealtimeLanguage, isRealtimeLanguage, REALTIME_LANGUAGES, type RealtimeLanguage } from './realtime/languages.js';
export { LANGUAGE_TAGS, type LanguageTag } from './language-tags.js';
export { MAX_FANOUT_TARGETS } from './realtime/fanout.js';
export { MAX_CLIENT_FRAME_BYTES } from './relay/relay.js';
export { RELAY_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from './relay/relay-admission.js';
export { DEFAULT_TOKEN_TTL_MS, MAX_TOKEN_TTL_MS } from './relay/relay-tokens.js';
export { classifyServerError } from './realtime/server-errors.js';
export { liveEventToRecord } from './realtime/live-transcription-stream.js';
export { isLoopbackHost, parseServiceUrl, resolveApiKey, resolveRealtimeUrl, type UrlSafetyOptions } from './config.js';
export {
  customVoiceSchema,
  dubSchema,
  subtitlesSchema,
  textToVoiceSchema,
  transcriptionSchema,
  translatedTtsSchema,
  translationSchema,
  ttsStreamSchema,
} from './http/schemas.js';
export { validate, type Check, type FieldIssue, type Loc, type ValidationContext } from './http/validation.js';
export { fromWireName } from './http/wire.js';
export {
  checkTwilioMediaFormat,
  DEFAULT_MAX_TWILIO_MESSAGE_BYTES,
  describeTwilioValue,
  parseTwilioMessage,
  TWILIO_FRAME_BYTES,
  TWILIO_FRAME_MS,
  TWILIO_MEDIA_FORMAT,
  TWILIO_SAMPLE_RATE,
  twilioClearMessage,
  type TwilioInboundMessage,
  twilioMarkMessage,
  type TwilioMediaFormat,
  twilioMediaMessage,
  type TwilioOutboundClear,
  type TwilioOutboundMark,
  type TwilioOutboundMedia,
  type TwilioOutboundMessage,
  type TwilioStreamInfo,
} from './integrations/twilio-messages.js';
