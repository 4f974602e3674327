/** The HTTP interface: client, endpoints, task helpers, retry policy, validation limits, streams. */
export * from './errors.js';
export {
  DEFAULT_RETRY,
  NO_CONNECTION_CODES,
  backoffDelay,
  isRetryable,
  parseRetryAfter,
  serviceDidNotAct,
  statusReadDelay,
  type RequestKind,
  type RetryInfo,
  type RetryOptions,
  type RetrySetting,
} from './retry.js';
export {
  DUB_AUDIO_FORMATS,
  DUB_VIDEO_FORMATS,
  FORMALITY_VALUES,
  GENDER_VALUES,
  OUTPUT_FORMATS,
  OUTPUT_TYPES,
  PROJECT_DESCRIPTION_LENGTH,
  PROJECT_NAME_LENGTH,
  RUN_IDS_COUNT,
  SELECTED_AUDIO_TRACKS_COUNT,
  SOUND_TYPES,
  TEXT_TO_SOUND_MAX_DURATION_S,
  TRANSCRIPTION_MODES,
  TRANSCRIPT_FORMATS,
  TTS_STREAM_TEXT_LENGTH,
  VOICE_DESCRIPTION_MIN_LENGTH,
  type DubAltFormat,
  type OutputFormat,
  type OutputType,
  type SoundType,
  type TranscriptFormat,
  type TranscriptionMode,
} from './schemas.js';
export { NUMERIC_LANGUAGE_WARNING, characterCount } from './validation.js';
export { fromWireName, toWireName } from './wire.js';
export * from './tasks.js';
export { TASK_KINDS, TASK_KIND_SPECS, isTaskKind, type TaskKind, type TaskKindSpec } from './task-kinds.js';
export {
  createAndWait,
  getTaskStatus,
  pickFileUrl,
  waitForTaskOf,
  type CreatedTask,
  type TaskCallOptions,
} from './endpoint-kit.js';
export {
  createAudioSeparation,
  createProjectSetup,
  createTranslatedTts,
  createTts,
  deleteVoice,
  getAudioSeparationResult,
  getAudioSeparationResults,
  getAudioSeparationStatus,
  getSubtitleStatus,
  getTranslatedTtsStatus,
  getTranslationResult,
  getTtsResultAudio,
  getTtsResultUrl,
  getTtsResults,
  getTtsStatus,
  openSeparationTrack,
  parseAudioSeparationResults,
  separateAudio,
  translateAndSpeak,
  type AudioFileUrl,
  type AudioResult,
  type AudioSeparationRequest,
  type AudioSeparationRun,
  type Language as LanguageRef,
  type LegacyTtsRequest,
  type ProjectFields,
  type ProjectSetupRequest,
  type TranslateAndSpeakOptions,
  type TranslateAndSpeakResult,
  type TranslatedTtsRequest,
  type TranslationResult,
  getTranslatedTtsResult,
} from './endpoints.js';
export { LanguageCatalog, fetchLanguages, parseLanguages, type Language, type LanguageSide } from './languages.js';
export * from './voices.js';
export * from './translation.js';
export * from './transcription.js';
export * from './transcript.js';
export * from './dubbing.js';
export * from './projects.js';
export * from './library.js';
export * from './streams.js';
export { contentTypeFor, type Upload, type UploadData, type UploadFile, type UploadProgress } from './multipart.js';
export * from './client.js';
export {
  RESOURCE_SPECS,
  buildResource,
  buildResources,
  resourceRoutes,
  taskResourceSpecs,
  type OperationSpec,
  type ResourceOf,
  type ResourceSpec,
  type ResourceSpecs,
  type Resources,
  type RunResult,
  type TaskIds,
  type TaskStatusVerbs,
} from './resources.js';
export * from './requester.js';
export * from './tts-stream-readable.js';
export type { DownloadRetry } from './resumable-download.js';
export type { RetryReason as DownloadRetryReason } from './download-policy.js';
