/**
 * rt-translate: live speech translation and synthesized speech as Node streams.
 *
 * The root surface, grouped by use (listed in the README's "API" section): errors and
 * configuration; realtime speech-to-speech; live transcription; the HTTP interface; audio
 * (opening any input, conversion, files, pacing); integrations (Discord voice, Twilio); the
 * relay that brings realtime sessions to browsers.
 *
 * Subpaths: `rt-translate/emulator` (the local service), `rt-translate/http` (each HTTP
 * operation as a function over any requester, task helpers, retry policy, validation limits),
 * `rt-translate/protocol` (the wire codecs, for callers who drive a socket themselves),
 * `rt-translate/dsp` (the building blocks under the streams: processors, filter design, codec
 * tables, detectors).
 */

// Errors and configuration
export {
  RtTranslateError,
  ValidationError,
  ConfigError,
  AuthError,
  ForbiddenError,
  BillingError,
  RateLimitError,
  VoiceRejectedError,
  ServerError,
  ProtocolError,
  ConnectionError,
  TimeoutError,
  AbortError,
  IntegrityError,
  UnsupportedError,
  UsageError,
  AudioInputError,
  type RtTranslateErrorCode,
  type RtTranslateErrorOptions,
  type AudioInputFailure,
} from './errors.js';
export { ENV_API_KEY, ENV_BASE_URL, ENV_REALTIME_URL } from './config.js';
export type { EventListener, EventMap, TypedEvents, WithEvents } from './typed-events.js';
export { DEPRECATIONS, handleDeprecations, type Deprecation, type DeprecationCode, type DeprecationHandler } from './deprecations.js';

// Realtime speech-to-speech
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
export { REALTIME_LANGUAGES, isRealtimeLanguage, type RealtimeLanguage } from './realtime/languages.js';
export type { LanguageTag, OpenUnion } from './language-tags.js';
export type { OutputModality, ServerEvent, SessionInfo } from './realtime/codec.js';
export { PcmChunker, type PcmChunkerEvents, type PcmChunkerOptions, type PartialFrameInfo, type PartialFramePolicy } from './audio/pcm-chunker.js';
export type { RealtimeConnectionOptions } from './realtime/realtime-options.js';
export {
  RealtimeFanout,
  fanoutEventToRecord,
  type RealtimeFanoutOptions,
  type FanoutTargetOptions,
  type FanoutTargetSpec,
  type FanoutTarget,
  type FanoutEvent,
  type FanoutTargetEvent,
  type FanoutOutcome,
  type FanoutTargetStats,
  type FanoutTargetStatus,
  type RealtimeFanoutEvents,
  type RealtimeFanoutStats,
  type TargetAddedInfo,
  type TargetDoneInfo,
} from './realtime/fanout.js';

// Live transcription
export {
  LiveTranscriptionStream,
  type LiveTranscriptionOptions,
  type LiveTranscript,
  type LiveTranscriptionEvent,
  type LiveTranscriptionEvents,
  type LiveTranscriptionStats,
} from './realtime/live-transcription-stream.js';
export type { LiveEncoding, LiveResults, LiveWord } from './realtime/transcription-codec.js';

// HTTP interface: the client, its streams and errors, and every request and response type.
// The endpoint functions over any requester, task helpers, retry policy and validation limits
// are on `rt-translate/http`.
export type {
  AudioDownloadOptions,
  AudioFileUrl,
  AudioResult,
  AudioSeparationRequest,
  AudioSeparationRun,
  CompletedTask,
  ConnectionPhase,
  CreatedStream,
  CreatedTask,
  CreatedVoice,
  CustomVoiceRequest,
  Dictionary,
  DictionaryDetailsOptions,
  DictionaryFromFileRequest,
  DictionaryTerm,
  DownloadRetry,
  DownloadRetryReason,
  DubAltFormat,
  DubAltFormatAnswer,
  DubbedFileOptions,
  DubbedOutput,
  DubbingRequest,
  DubbingResult,
  FlacDownloader,
  FlacDownloadRequest,
  Folder,
  HttpErrorOptions,
  HttpMethod,
  HttpRequester,
  HttpRequestInfo,
  HttpTimeoutPhase,
  Language,
  LanguageLookup,
  LanguageRef,
  LanguageSide,
  LegacyTtsRequest,
  ListFoldersOptions,
  LocalizationClientOptions,
  LooseAnswer,
  OperationSpec,
  OutputFormat,
  OutputType,
  ParseTranscriptOptions,
  PaymentRequiredOptions,
  PollingOptions,
  PollingProfile,
  ProjectDetails,
  ProjectFields,
  ProjectSetupRequest,
  ProjectSetupResult,
  RenderOptions,
  RequestKind,
  RequestOptions,
  RequestSpec,
  ResourceOf,
  Resources,
  ResourceSpec,
  ResourceSpecs,
  RetryInfo,
  RetryOptions,
  RetrySetting,
  RunResult,
  RunTranscript,
  RunTranscriptOptions,
  SeparationTrack,
  SeparationTrackOptions,
  ServiceValidationDetail,
  SoundType,
  StoryCreated,
  StoryRequest,
  StoryResult,
  StoryResultOptions,
  StorySetup,
  StreamProbe,
  StreamRequest,
  StreamResponse,
  SubtitlesRequest,
  TaskCallOptions,
  TaskErrorOptions,
  TaskFailureStatus,
  TaskIds,
  TaskKind,
  TaskKindSpec,
  TaskProgress,
  TaskReadFailure,
  TaskStatus,
  TaskStatusResponse,
  TaskStatusVerbs,
  TaskSteps,
  TaskWaitTimeoutOptions,
  TermTranslation,
  TermTranslationInput,
  TextToSoundRequest,
  TextToVoiceRequest,
  TextToVoiceResult,
  TimeUnit,
  TranscriptFormat,
  TranscriptionMode,
  TranscriptionRequest,
  TranscriptionResult,
  TranscriptionResultOptions,
  TranscriptSegment,
  TranscriptWord,
  TranslateAndSpeakOptions,
  TranslateAndSpeakResult,
  TranslatedTtsRequest,
  TranslateTextsOptions,
  TranslationRequest,
  TranslationResult,
  TranslationStreamRequest,
  TtsResultAudioOptions,
  TtsStreamReadableEvents,
  TtsStreamReadableOptions,
  TtsStreamRequest,
  TtsStreamResponseInfo,
  Upload,
  UploadData,
  UploadFile,
  UploadProgress,
  Voice,
  WaitOptions,
} from './http/index.js';
export {
  LocalizationClient,
  TtsStreamReadable,
  HttpStatusError,
  PaymentRequiredError,
  ServiceValidationError,
  TaskFailedError,
  TaskTimeoutError,
} from './http/index.js';
export {
  FlacDownloadStream,
  type FlacDownloadRetry,
  type FlacDownloadStreamEvents,
  type FlacDownloadStreamOptions,
  type FlacFormat,
} from './http/flac-download-stream.js';

// Audio: any input as service PCM, conversion, files, pacing
export { openAudioSource, AudioSource, type AudioSourceDescription, type AudioSourceOptions, type RawWhen, type SourceFormat } from './audio/source.js';
export type { AudioDescription, ResolvedAudioDescription, SampleFormat, SupportedRate } from './audio/audio-format.js';
export { toServiceFormat, fromServiceFormat, createConverter, AudioConverter } from './audio/convert.js';
export {
  WavReader,
  WavWriter,
  WavFileWriter,
  WavFormatError,
  type WavFormat,
  type WavReaderEvents,
  type WavReaderOptions,
  type WavFileWriterOptions,
  type WavSampleFormat,
} from './audio/wav.js';
export { FlacDecodeStream, type FlacDecodeStreamEvents, type FlacDecodeStreamOptions } from './audio/flac-stream.js';
export type { FlacStreamInfo } from './audio/flac-decoder.js';
export { encodeFlac, type FlacEncoderOptions } from './audio/flac-encoder.js';
export { OggOpusDecoder, type OggOpusDecoderEvents, type OggOpusDecoderOptions, type OggOpusFormat, type OpusHead } from './audio/ogg-opus.js';
export { FfmpegDecoder, type FfmpegDecoderOptions } from './audio/ffmpeg.js';
export { Pacer, type PacerOptions } from './audio/pacer.js';

// Integrations: Discord voice
export {
  DiscordReceiveAdapter,
  DiscordPlaybackAdapter,
  translateSpeaker,
  type DiscordReceiveOptions,
  type DiscordReceiveStats,
  type DiscordReceiveEvents,
  type DiscordPlaybackOptions,
  type GapInfo,
  type GapMode,
  type OpusPacketInput,
  type PlaybackOutput,
  type ReceiveWarningDetail,
  type RtpOpusPacket,
  type SpeakerTranslation,
  type TranslateSpeakerOptions,
} from './integrations/discord.js';
export type { OpusBackend, OpusBackendChoice, OpusCodec, OpusCodecOptions } from './audio/opus.js';

// Integrations: telephony (Twilio Media Streams)
export {
  TwilioMediaBridge,
  type TwilioBargeInOptions,
  type TwilioBridgeStats,
  type TwilioClearInfo,
  type TwilioMediaBridgeEvents,
  type TwilioMediaBridgeOptions,
  type TwilioPacing,
  type TwilioResponseInfo,
} from './integrations/twilio.js';
export { bridgeTwilioSocket, type TwilioSocketOptions } from './integrations/twilio-socket.js';

// Realtime in the browser: the relay
export { createRealtimeRelay, RealtimeRelay, type RelayStats, type RelayRoomStats } from './relay/relay.js';
export type { RealtimeRelayOptions, RelayAuthorize, RelayConnectionOptions, RelayGrant, RelayRoomsOptions } from './relay/relay-options.js';
export type { RelayRefusal } from './relay/relay-session.js';
export type { MintTokenOptions, RoomRole } from './relay/relay-tokens.js';
