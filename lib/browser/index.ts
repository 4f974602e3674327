/**
 * `rt-translate/browser`: live speech translation in a web page, for bundlers and plain ES
 * modules alike (no Node built-in). `RealtimeTranslator` runs a session through a realtime relay
 * (the page holds a token, never the API key): the microphone captured in an AudioWorklet at
 * the device's rate and resampled to 24 kHz by the library's filter, the translated audio
 * played gaplessly through one worklet queue, and the events under the Node stream's names.
 * `MicrophoneCapture`, `PcmPlayer` and `StreamResampler` are its parts, for pages that
 * assemble their own. The worklet module is `rt-translate/browser/worklet`.
 *
 * Rooms (a relay with `rooms`): `RealtimeRoomSpeaker` sends one microphone once, and
 * `RealtimeRoomListener` receives its translation into the languages a listener picks, the
 * relay running one session per language however many listen.
 */
export {
  RealtimeTranslator,
  type RealtimeTranslatorOptions,
  type RealtimeTranslatorEvents,
  type TranslatorState,
  type TranslatorStats,
  type ClosedInfo,
  type WhilePlaying,
} from './translator.js';
export { RealtimeRoomListener, type RealtimeRoomListenerOptions, type RealtimeRoomListenerEvents, type RoomListenerStats } from './room.js';
export { RealtimeRoomSpeaker, type RealtimeRoomSpeakerOptions, type RealtimeRoomSpeakerEvents, type RoomLanguageInfo } from './room-speaker.js';
export { MicrophoneCapture, type MicrophoneOptions } from './capture.js';
export { PcmPlayer, type PcmPlayerEvents, type PlaybackPosition } from './playback.js';
export { StreamResampler, BROWSER_RATES, checkBrowserRate } from './resampler.js';
export { loadWorklet } from './worklet-loader.js';
export { TypedEmitter } from './emitter.js';
export { RtTranslateError, ValidationError, ConnectionError, TimeoutError, ProtocolError } from '../errors.js';
export { REALTIME_LANGUAGES, normalizeRealtimeLanguage, type RealtimeLanguage } from '../realtime/languages.js';
export type { ResponseTiming, LatencySummary } from '../realtime/response-timing.js';
export type { SessionInfo, OutputModality } from '../realtime/wire-format.js';
