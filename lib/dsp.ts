/**
 * `rt-translate/dsp`: the building blocks under the audio streams, for callers who assemble
 * their own: synchronous processors (resampling, channel mixing, sample formats, G.711) and
 * their filter design, the conversion planner, format descriptions and checks, the FLAC and
 * Ogg/Opus parsing pieces, the Opus codec loader, levels, voice and speech-onset detection, the
 * media timeline with gap filling, and finding ffmpeg. Stream classes are on the root module.
 */
export * from './audio/audio-format.js';
export * from './audio/processor.js';
export * from './audio/resampler.js';
export * from './audio/channels.js';
export * from './audio/sample-format.js';
export * from './audio/g711.js';
export { planConversion, type ConversionPlan } from './audio/convert.js';
export * from './audio/level.js';
export * from './audio/vad.js';
export { FlacPcmDecoder, parseFlacStreamInfo, hasKnownMd5, floatToPcm16, FLAC_STREAMINFO_END, type FlacStreamInfo } from './audio/flac-decoder.js';
export { FLAC_HEADER_BYTES, flacCrc8, flacCrc16 } from './audio/flac-encoder.js';
export { oggPageCrc, parseOpusHead, OPUS_DECODE_RATES, type OpusDecodeRate, type OpusHead } from './audio/ogg-opus.js';
export {
  FrameAssembler,
  loadOpusBackend,
  OPUS_BACKEND_PACKAGES,
  OPUS_CHANNELS,
  OPUS_FRAME_BYTES,
  OPUS_FRAME_MS,
  OPUS_FRAME_SAMPLES,
  OPUS_PCM_RATES,
  OPUS_SAMPLE_RATE,
  type ModuleLoader,
} from './audio/opus.js';
export { MAX_PCM_CHUNK_BYTES, pcmBytesForMs, msForPcmBytes, type PcmFormat } from './audio/pcm-chunker.js';
export { findFfmpegOnPath, isExecutableFile } from './audio/ffmpeg.js';
export { createDiscordPacer, type DiscordPacerOptions } from './integrations/discord.js';
export { MediaTimeline, type MediaTimelineOptions, type TimelineStep } from './integrations/media-timeline.js';
export { SpeechOnsetDetector, type SpeechOnsetOptions } from './integrations/speech-onset.js';
