/**
 * The request schemas of every HTTP endpoint, over wire names, with the limits of
 * `service-interface.md` (Limits, Endpoints), `facts.md` and the official SDK's published
 * request types. One source of truth for both sides: the client validates the caller's
 * camelCase object with them before sending (`validate`), the emulator validates what it
 * receives (`collectIssues`). See `validation.ts` for how a schema runs.
 *
 * Languages: the interface's endpoints (`/translated-tts`, `/tts`, `/tts-stream`,
 * `/project-setup`, `/sub`) take locale tags and deprecate numeric ids; the endpoints beyond it
 * take the numeric ids the SDK's description gives (`languageRef`: a tag is accepted from the
 * caller and converted by the client through the service's language lists).
 */
import { DEFAULT_VOICE_ID } from '../limits.js';
import {
  any,
  array,
  bool,
  httpUrl,
  int,
  language,
  literal,
  numberIn,
  object,
  opt,
  plainObject,
  positiveNumber,
  req,
  str,
  type Check,
  type FieldSpec,
} from './validation.js';

export { DEFAULT_VOICE_ID };

/* ----------------------------------------------------------------------------------------- */
/* Limits                                                                                    */

export const PROJECT_NAME_LENGTH = { min: 3, max: 255 } as const;
export const PROJECT_DESCRIPTION_LENGTH = { min: 3, max: 5000 } as const;
export const TTS_STREAM_TEXT_LENGTH = { min: 3, max: 3000 } as const;
/**
 * Shortest voice description `POST /text-to-voice` takes, characters: the service's documentation
 * asks for at least 18 words (100 or more characters) and does not process shorter ones. Only
 * the characters are checked (words are not counted alike in every language).
 */
export const VOICE_DESCRIPTION_MIN_LENGTH = 100;
export const FORMALITY_VALUES = [1, 2] as const;
export const GENDER_VALUES = [0, 1, 2, 9] as const;
export const SELECTED_AUDIO_TRACKS_COUNT = { min: 1, max: 2 } as const;
export const RUN_IDS_COUNT = { min: 2, max: 5 } as const;
export const OUTPUT_FORMATS = ['wav', 'flac', 'adts', 'mp3', 'pcm_s16le', 'pcm_s16be', 'pcm_s32le', 'pcm_s32be', 'pcm_f32le', 'pcm_f32be'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];
export const OUTPUT_TYPES = ['raw_bytes', 'file_url'] as const;
export type OutputType = (typeof OUTPUT_TYPES)[number];
export const TRANSCRIPTION_MODES = ['fast', 'slow'] as const;
export type TranscriptionMode = (typeof TRANSCRIPTION_MODES)[number];
export const TRANSCRIPT_FORMATS = ['srt', 'vtt', 'txt'] as const;
export type TranscriptFormat = (typeof TRANSCRIPT_FORMATS)[number];
export const TRANSCRIPT_DATA_TYPES = ['raw_data', 'file'] as const;
export type TranscriptDataType = (typeof TRANSCRIPT_DATA_TYPES)[number];
export const DUB_AUDIO_FORMATS = ['flac', 'wav', 'mp3', 'aac', 'm4a'] as const;
export const DUB_VIDEO_FORMATS = ['mkv', 'mp4', 'mov', 'mxf'] as const;
export type DubAltFormat = (typeof DUB_AUDIO_FORMATS)[number] | (typeof DUB_VIDEO_FORMATS)[number];
export const SOUND_TYPES = ['sound', 'music'] as const;
export type SoundType = (typeof SOUND_TYPES)[number];
/**
 * Longest text-to-sound clip, seconds: the service's documentation limits `duration` to 10 s a
 * request (music ignores it and returns a clip of its own length).
 */
export const TEXT_TO_SOUND_MAX_DURATION_S = 10;

/** A language field of an endpoint that takes numeric ids (tags are converted by the client). */
export const languageRef = (): Check => language({ deprecatedIds: false });

/* ----------------------------------------------------------------------------------------- */
/* Shared fields                                                                             */

const projectFields: Record<string, FieldSpec> = {
  project_name: opt(str(PROJECT_NAME_LENGTH.min, PROJECT_NAME_LENGTH.max)),
  project_description: opt(str(PROJECT_DESCRIPTION_LENGTH.min, PROJECT_DESCRIPTION_LENGTH.max)),
  folder_id: opt(int(1)),
};
const chosenDictionaries = opt(array(int(1), { min: 1 }));
const selectedAudioTracks = opt(array(int(0), { min: SELECTED_AUDIO_TRACKS_COUNT.min, max: SELECTED_AUDIO_TRACKS_COUNT.max }));
const formality = opt(literal(FORMALITY_VALUES));
const gender = opt(literal(GENDER_VALUES));

/* ----------------------------------------------------------------------------------------- */
/* The interface's endpoints                                                                 */

/** The body of `POST /translated-tts`: the text, the voice (default `DEFAULT_VOICE_ID`) and both languages. */
export const translatedTtsSchema = object({
  text: req(str(1)),
  voice_id: { check: int(1), default: DEFAULT_VOICE_ID },
  source_language: req(language()),
  target_language: req(language()),
  ...projectFields,
  age: opt(int(0)),
  formality,
  gender,
  chosen_dictionaries: chosenDictionaries,
});

export const projectSetupSchema = object({
  media_url: req(httpUrl()),
  source_language: req(language()),
  target_languages: req(array(language(), { min: 1 })),
  ...projectFields,
  selected_audio_tracks: selectedAudioTracks,
  add_output_as_an_audio_track: opt(bool()),
  chosen_dictionaries: chosenDictionaries,
});

export const legacyTtsSchema = object({
  text: req(str(1)),
  voice_id: { check: int(1), default: DEFAULT_VOICE_ID },
  language: req(language()),
  ...projectFields,
  gender: { check: literal(GENDER_VALUES) },
  age: { check: any(), nullable: true },
});

/** The body of `POST /tts-stream`: the text (within `TTS_STREAM_TEXT_LENGTH`), its language and the voice. */
export const ttsStreamSchema = object({
  text: req(str(TTS_STREAM_TEXT_LENGTH.min, TTS_STREAM_TEXT_LENGTH.max)),
  language: req(language()),
  voice_id: req(int(1)),
  speech_model: { check: str(1) },
  user_instructions: opt(str(1)),
  enhance_named_entities_pronunciation: { check: bool() },
  output_configuration: {
    check: object({
      format: { check: literal(OUTPUT_FORMATS) },
      sample_rate: { check: int(1) },
      duration: { check: positiveNumber() },
      apply_enhancement: { check: bool() },
    }),
  },
  voice_settings: opt(
    object({
      enhance_reference_audio_quality: opt(bool()),
      maintain_source_accent: opt(bool()),
      apply_ref_loudness_norm: opt(bool()),
    }),
  ),
  inference_options: opt(
    object({
      stability: opt(numberIn(0, 1)),
      temperature: opt(numberIn(0.01, 4)),
      inference_steps: opt(int(1, 1000)),
      speaker_similarity: opt(numberIn(0, 1)),
      localize_speaker_weight: opt(numberIn(0, 1)),
      acoustic_quality_boost: opt(bool()),
    }),
  ),
});

/** The form fields of `POST /audio-separation` (the audio is the `media_file` part). */
export const audioSeparationSchema = object({ ...projectFields });

/** `POST /sub`: the interface names the endpoint but shows no body; these are the project fields. */
export const subtitlesSchema = object({
  media_url: req(httpUrl()),
  source_language: req(language()),
  target_languages: opt(array(language(), { min: 1 })),
  ...projectFields,
});

/** Every bulk lookup (`POST /*-results`): 2 to 5 distinct run ids. */
export const runIdsSchema = object({
  run_ids: req(array(int(1), { min: RUN_IDS_COUNT.min, max: RUN_IDS_COUNT.max, unique: true })),
});

/* ----------------------------------------------------------------------------------------- */
/* Beyond the interface: the SDK's request types                                             */

/** The body of `POST /translate`: the texts, both languages, and the optional tone and dictionaries. */
export const translationSchema = object({
  texts: req(array(str(1), { min: 1 })),
  source_language: req(languageRef()),
  target_language: req(languageRef()),
  ...projectFields,
  age: { check: int(0) },
  formality: { check: literal(FORMALITY_VALUES) },
  gender: { check: literal(GENDER_VALUES) },
  chosen_dictionaries: chosenDictionaries,
});

export const translationStreamSchema = object({
  text: req(str(1)),
  source_language: req(languageRef()),
  target_language: req(languageRef()),
  formality,
  gender,
  team_id: opt(int(1)),
  ...projectFields,
});

/** The form fields of `POST /create-custom-voice` (the reference audio is the `file` part). */
export const customVoiceSchema = object({
  voice_name: req(str(1)),
  gender: req(literal(GENDER_VALUES)),
  description: opt(str(1)),
  publish_voice_to_market_place: opt(bool()),
  age: { check: int(0) },
  language: opt(languageRef()),
  enhance_audio: opt(bool()),
});

/** The fields of `POST /text-to-voice`: the text to speak and a description of the voice to design. */
export const textToVoiceSchema = object({
  text: req(str(1)),
  voice_description: req(str(VOICE_DESCRIPTION_MIN_LENGTH)),
  ...projectFields,
});

/** The form fields of `POST /transcribe` (the media is the `media_file` part, or a URL field). */
export const transcriptionSchema = object({
  language: req(languageRef()),
  media_url: opt(httpUrl()),
  audio_url: opt(httpUrl()),
  ...projectFields,
  transcription_mode: opt(literal(TRANSCRIPTION_MODES)),
});

/** The fields of `POST /dub`: the media's URL, its language and one or more target languages. */
export const dubSchema = object(
  {
    video_url: req(httpUrl()),
    source_language: req(languageRef()),
    target_language: opt(languageRef()),
    target_languages: opt(array(languageRef(), { min: 1 })),
    ...projectFields,
    selected_audio_tracks: selectedAudioTracks,
    add_output_as_an_audio_track: opt(bool()),
    chosen_dictionaries: chosenDictionaries,
    ai_optimization: opt(bool()),
    transcription_mode: opt(literal(TRANSCRIPTION_MODES)),
  },
  [
    (body) =>
      body.target_language == null && body.target_languages == null
        ? {
            field: 'target_languages',
            msg: 'give target_language or target_languages',
            accepted: 'one or more target languages (targetLanguages or targetLanguage)',
          }
        : undefined,
  ],
);

export const dubAltFormatSchema = object({
  output_format: req(literal<string>([...DUB_AUDIO_FORMATS, ...DUB_VIDEO_FORMATS])),
});

export const textToSoundSchema = object({
  prompt: req(str(1)),
  duration: { check: positiveNumber(TEXT_TO_SOUND_MAX_DURATION_S) },
  audio_type: { check: literal(SOUND_TYPES) },
  ...projectFields,
});

/** The form fields of `POST /story` and `POST /story-setup` (the document is the `file` part). */
export const storySchema = object({
  source_language: req(languageRef()),
  title: opt(str(1)),
  description: opt(str(1)),
  narrator_voice_id: opt(int(1)),
  folder_id: opt(int(1)),
  chosen_dictionaries: chosenDictionaries,
});

export const translatedStorySchema = object({
  target_language: req(languageRef()),
});

/** The form fields of `POST /dictionaries/create-from-file` (the file is `dictionary_file`). */
export const dictionaryFromFileSchema = object({
  dictionary_name: req(str(1)),
  dictionary_description: opt(str(1)),
});

export const termTranslationsSchema = object({
  translations: req(array(object({ translation: req(str(1)), language: req(languageRef()) }), { min: 1 })),
});

export const folderSchema = object({
  folder_name: req(str(1)),
});

/* ----------------------------------------------------------------------------------------- */
/* Path and query parameters                                                                 */

export const runIdParam = int(1);
export const voiceIdParam = int(1);
export const idParam = int(1);
export const taskIdParam = str(1, 512);
export const outputTypeParam = literal(OUTPUT_TYPES);
export const transcriptFormatParam = literal(TRANSCRIPT_FORMATS);
export const transcriptDataTypeParam = literal(TRANSCRIPT_DATA_TYPES);
export const limitParam = int(1);

/* ----------------------------------------------------------------------------------------- */
/* Live stream dubbing (`/stream`)                                                           */

const PIPELINE_OPTIONS = ['none', 'best_model', 'fast_model'] as const;
export const STREAM_DEMIXING_OPTIONS = ['none', 'pick_left_channel', 'pick_right_channel', 'pick_center_channel', 'best_model', 'fast_model'] as const;
export const STREAM_SEGMENTING_OPTIONS = ['none', 'loudness', 'best_model', 'fast_model'] as const;

/** A stream URL: SRT, RTMP(S), or HTTP(S) for HLS. */
export function streamUrl(): Check {
  return (value, loc, ctx) => {
    const checked = str(1)(value, loc, ctx);
    if (checked === undefined) return undefined;
    if (!/^(srt|rtmps?|https?|udp|rtp):\/\/[^/\s]/i.test(checked as string)) {
      ctx.issues.push({
        loc,
        type: 'url_scheme',
        msg: 'URL scheme should be srt, rtmp, rtmps, http, https, udp or rtp',
        accepted: 'a stream URL (srt://, rtmp://, rtmps://, http(s):// for HLS, udp://, rtp://)',
        received: JSON.stringify(checked),
      });
      return undefined;
    }
    return checked;
  };
}

const sourceStreamSchema = object({
  language: req(languageRef()),
  url: req(streamUrl()),
  category: opt(int(0)),
  passphrase: opt(str(1)),
  streamid: opt(str(1)),
  number_of_streams: opt(int(1)),
  audio_stream: opt(int(0)),
  background_audio_stream: opt(int(0)),
  latency: opt(int(0)),
  relay_input: opt(bool()),
});

const targetStreamSchema = object({
  languages: req(array(languageRef(), { min: 1 })),
  url: req(streamUrl()),
  type: req(int(0)),
  passphrase: opt(str(1)),
  streamid: opt(str(1)),
  pids: opt(array(any())),
  transcode_video: opt(bool()),
  embed_subtitles: opt(bool()),
  audio_codec: opt(str(1)),
  audio_bitrate: opt(str(1)),
  audio_channel_layout: opt(str(1)),
  latency: opt(int(0)),
  constant_bitrate: opt(bool()),
  relay_output: opt(bool()),
});

export const streamSchema = object({
  name: opt(str(1)),
  description: opt(str(1)),
  initial_delay: { check: numberIn(0, 86_400) },
  timeout_in_mins: opt(int(1)),
  voices: req(array(int(1))),
  dictionaries: req(array(int(1))),
  config: req(
    object({
      pipeline: {
        check: object({
          demixing: { check: literal(STREAM_DEMIXING_OPTIONS) },
          segmenting: { check: literal(STREAM_SEGMENTING_OPTIONS) },
          transcribing: { check: literal(PIPELINE_OPTIONS) },
          translating: { check: literal(PIPELINE_OPTIONS) },
          revoicing: { check: literal(PIPELINE_OPTIONS) },
        }),
      },
      mixing: {
        check: object({
          original_audio_gain: opt(numberIn(-100, 100)),
          background_audio_gain: opt(numberIn(-100, 100)),
          fade_time: { check: numberIn(0, 60) },
          fallback_audio_gain: opt(numberIn(-100, 100)),
        }),
      },
    }),
  ),
  source_stream: req(sourceStreamSchema),
  target_streams: req(array(targetStreamSchema, { min: 1 })),
  start_time: opt(str(1)),
  end_time: opt(str(1)),
  timezone: opt(str(1)),
});

export const streamUpdateSchema = object({
  start_time: opt(str(1)),
  end_time: opt(str(1)),
  payload: opt(plainObject()),
});

export const streamProbeSchema = object({
  url: req(streamUrl()),
  passphrase: opt(str(1)),
  stream_id: opt(str(1)),
});
