/**
 * `rt-translate/dsp`: the building blocks under the audio streams, for callers who assemble
 * their own: the single-step Transforms that `createConverter` chains (`Resampler`,
 * `ChannelMixTransform`, `SampleFormatTransform`, G.711), their synchronous processors and
 * filter design, the conversion planner, format descriptions and checks, sniffing an input's
 * container, the FLAC and Ogg/Opus parsing pieces, the Opus codec and its loader, Discord's
 * frame format and pacer, levels, voice and speech-onset detection, the media timeline with gap
 * filling, and finding ffmpeg. Also the pieces for reading an input's start (`peekStart`, what a
 * non-audio input is, a WAV stream's data layout) and for finishing an audio file cut short.
 * The streams a program pipes through are on the root module.
 */
export {
  type AudioDescription,
  bytesPerSample,
  type ResolvedAudioDescription,
  resolveDescription,
  SAMPLE_FORMATS,
  type SampleFormat,
  SERVICE_FORMAT,
  silenceByte,
  SUPPORTED_CHANNELS,
  SUPPORTED_RATES,
  type SupportedRate,
  validateChannels,
  validateRate,
  validateSampleFormat,
} from './audio/audio-format.js';
export {
  type AudioProcessor,
  AudioTransform,
  type AudioTransformOptions,
  ChainProcessor,
  EMPTY,
  FrameProcessor,
  PassThroughProcessor,
  toInt16,
} from './audio/processor.js';
export {
  createResampleProcessor,
  DESIGN_ATTENUATION_DB,
  designResampler,
  PASSBAND_EDGE,
  type ResampleKernel,
  type ResampleOptions,
  Resampler,
  type ResamplerDesign,
  type ResamplerOptions,
  STOPBAND_EDGE,
} from './audio/resampler.js';
export { averageInt16, type ChannelMixOptions, ChannelMixTransform, createChannelProcessor } from './audio/channels.js';
export {
  createSampleFormatProcessor,
  floatToInt16,
  int16ToFloat,
  PCM_SAMPLE_FORMATS,
  type PcmSampleFormat,
  type SampleFormatOptions,
  SampleFormatTransform,
} from './audio/sample-format.js';
export {
  ALAW_DECODE_TABLE,
  createG711DecodeProcessor,
  createG711EncodeProcessor,
  decodeAlaw,
  decodeMulaw,
  encodeAlaw,
  encodeMulaw,
  G711Decoder,
  G711Encoder,
  type G711Law,
  type G711Options,
  MULAW_DECODE_TABLE,
} from './audio/g711.js';
export { planConversion, type ConversionPlan } from './audio/convert.js';
export { dbfsToMeanSquare, frameMeanSquares, SharedFrameLevels, g711SquareTable, meanSquare, meanSquareG711 } from './audio/level.js';
export {
  DEFAULT_VAD_SILENCE_MS,
  DEFAULT_VAD_THRESHOLD_DBFS,
  SpeechSegmentCounter,
  VAD_FRAME_BYTES,
  VAD_FRAME_MS,
  VAD_FRAME_SAMPLES,
  VoiceActivityDetector,
  type VoiceActivityOptions,
  type VoiceSegment,
} from './audio/vad.js';
export { FlacPcmDecoder, parseFlacStreamInfo, hasKnownMd5, floatToPcm16, FLAC_STREAMINFO_END, type FlacStreamInfo } from './audio/flac-decoder.js';
export { FLAC_HEADER_BYTES, flacCrc8, flacCrc16 } from './audio/flac-encoder.js';
export { oggPageCrc, parseOpusHead, OPUS_DECODE_RATES, type OpusDecodeRate, type OpusHead } from './audio/ogg-opus.js';
export {
  createOpusCodec,
  FrameAssembler,
  isOpusBackendAvailable,
  loadOpusBackend,
  OPUS_BACKEND_CHOICES,
  OPUS_BACKEND_PACKAGES,
  OPUS_CHANNELS,
  OPUS_FRAME_BYTES,
  OPUS_FRAME_MS,
  OPUS_FRAME_SAMPLES,
  OPUS_PCM_RATES,
  OPUS_SAMPLE_RATE,
  OpusPacketEncoder,
  type ModuleLoader,
  type OpusBackend,
  type OpusBackendChoice,
  type OpusCodec,
  type OpusCodecOptions,
  type OpusPacketEncoderOptions,
} from './audio/opus.js';
export { MAX_PCM_CHUNK_BYTES, pcmBytesForMs, msForPcmBytes, type PcmFormat } from './audio/pcm-chunker.js';
export { findFfmpeg, findFfmpegOnPath, isExecutableFile, ENV_FFMPEG_PATH } from './audio/ffmpeg.js';
export { sniffAudio, isSniffResult, SNIFF_BYTES, type SniffResult, type SniffMore, type SniffedKind } from './audio/sniff.js';
export { OTHER_SNIFF_BYTES, sniffOther } from './audio/headerless.js';
export { peekStart } from './audio/source-input.js';
export { wavDataLayout, type WavDataLayout } from './audio/wav.js';
export { finishCutAudioFile, type CutAudio } from './audio/cut-file.js';
export { SOURCE_FORMATS, type SourceFormat } from './audio/source.js';
export { createDiscordPacer, DISCORD_PCM_FORMAT, DISCORD_FRAME_BYTES, type DiscordPacerOptions } from './integrations/discord.js';
export { MediaTimeline, type MediaTimelineOptions, type TimelineStep } from './integrations/media-timeline.js';
export { SpeechOnsetDetector, type SpeechOnsetOptions } from './integrations/speech-onset.js';
