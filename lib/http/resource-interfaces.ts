/**
 * A name for every resource of the client (`client.dub` is a {@link DubResource}), so that the
 * reference and an editor's hover show `DubResource` and its members instead of the table type
 * they are computed from. Each interface is derived from its entry in `RESOURCE_SPECS`
 * (`resources.ts`): the members, their arguments and results come from the endpoint functions,
 * and nothing here can drift from the table, because {@link Resources} and the table's own type
 * must be assignable to each other (checked at the end of this file, at compile time).
 *
 * Adding a resource to the table means adding its interface here and a line in `Resources`;
 * adding an operation to an existing resource changes nothing here.
 */
import type { ResourceOf, ResourceSpecs, ResourceTable } from './resources.js';

type Spec<K extends keyof ResourceSpecs> = ResourceSpecs[K];
type ChildSpec<K extends keyof ResourceSpecs, C extends string> =
  Spec<K> extends { children: infer Children } ? (C extends keyof Children ? Children[C] : never) : never;
/** A resource's own members: the table's type without its children, which get their own names. */
type Members<S> = S extends { children: infer Children } ? Omit<ResourceOf<S>, keyof Children> : ResourceOf<S>;

/** Separating a recording into voice and background tracks (`/audio-separation`): the task verbs, earlier results, one track as a stream. */
export interface AudioSeparationResource extends Members<Spec<'audioSeparation'>> {}

/** Pronunciation dictionaries and their terms (`/dictionaries`). */
export interface DictionariesResource extends Members<Spec<'dictionaries'>> {}

/** Dubbing a video or audio file (`/dub`): the task verbs, earlier results, the dubbed files, a run's transcript. */
export interface DubResource extends Members<Spec<'dub'>> {
  /** Another format of a finished dub (`/dub-alt-format`). */
  readonly altFormat: DubAltFormatResource;
  /** Dubs made by the service's Discord bot: no `create`. */
  readonly discord: DiscordDubResource;
  /** Dubs made by the service's X (Twitter) bot: no `create`. */
  readonly twitter: TwitterDubResource;
}

/** Another format of a finished dub: `create({ runId, language, format })` and the task verbs. */
export interface DubAltFormatResource extends ResourceOf<ChildSpec<'dub', 'altFormat'>> {}

/** Dubs the service's Discord bot made: `status`, `wait`, `result`. */
export interface DiscordDubResource extends ResourceOf<ChildSpec<'dub', 'discord'>> {}

/** Dubs the service's X (Twitter) bot made: `status`, `wait`, `result`. */
export interface TwitterDubResource extends ResourceOf<ChildSpec<'dub', 'twitter'>> {}

/** The key's project folders (`/folders`). */
export interface FoldersResource extends Members<Spec<'folders'>> {}

/** Setting up a project from a file (`/project-setup`): the task verbs and earlier results. */
export interface ProjectSetupResource extends Members<Spec<'projectSetup'>> {}

/** Stories read aloud from a document (`/story`): the task verbs, the set-up step, the audio as a stream, earlier results. */
export interface StoryResource extends Members<Spec<'story'>> {}

/** Sound effects from a description (`/text-to-sound`): the task verbs (the result is the audio) and earlier results. */
export interface TextToAudioResource extends Members<Spec<'textToAudio'>> {}

/** Speech from text as a task (`/tts`): the task verbs (the result is the audio), its URL, earlier results. */
export interface TextToSpeechResource extends Members<Spec<'textToSpeech'>> {
  /** Speech the service's Discord bot made: no `create`. */
  readonly discord: DiscordTtsResource;
}

/** Speech the service's Discord bot made: `status`, `wait`, `result`. */
export interface DiscordTtsResource extends ResourceOf<ChildSpec<'textToSpeech', 'discord'>> {}

/** A new voice from a description (`/text-to-voice`): the task verbs. */
export interface TextToVoiceResource extends Members<Spec<'textToVoice'>> {}

/** Transcribing a recording (`/transcribe`): the task verbs and earlier results. */
export interface TranscriptionResource extends Members<Spec<'transcription'>> {}

/** A finished story in another language (`/translated-story`): `create({ runId, targetLanguage })` and the task verbs. */
export interface TranslatedStoryResource extends Members<Spec<'translatedStory'>> {}

/** Text translated and spoken in one task (`/translated-tts`): the task verbs; `run` reads the text and the audio together. */
export interface TranslatedTtsResource extends Members<Spec<'translatedTts'>> {}

/** Translating texts (`/translate`): the task verbs, earlier results, texts in and out in one call, a streamed translation. */
export interface TranslationResource extends Members<Spec<'translation'>> {}

/** The key's voices (`/list-voices`, `/create-custom-voice`, `/delete-voice`). */
export interface VoicesResource extends Members<Spec<'voices'>> {}

/** Live streams dubbed into target streams (`/stream`, and the older `/v1/stream`). */
export interface StreamsResource extends Members<Spec<'streams'>> {}

/** Any task by kind (`status`, `wait`), and subtitles (`/sub`). */
export interface TasksResource extends Members<Spec<'tasks'>> {
  /** Subtitles of a recording (`/sub`): the task verbs; `result` reads the transcript in a language. */
  readonly subtitles: SubtitlesResource;
}

/** Subtitles of a recording (`/sub`): the task verbs; `result(runId, { language })` reads the transcript. */
export interface SubtitlesResource extends ResourceOf<ChildSpec<'tasks', 'subtitles'>> {}

/** Every resource of a {@link LocalizationClient}, grouped as the service's official SDK groups them. */
export interface Resources {
  readonly audioSeparation: AudioSeparationResource;
  readonly dictionaries: DictionariesResource;
  readonly dub: DubResource;
  readonly folders: FoldersResource;
  readonly projectSetup: ProjectSetupResource;
  readonly story: StoryResource;
  readonly textToAudio: TextToAudioResource;
  readonly textToSpeech: TextToSpeechResource;
  readonly textToVoice: TextToVoiceResource;
  readonly transcription: TranscriptionResource;
  readonly translatedStory: TranslatedStoryResource;
  readonly translatedTts: TranslatedTtsResource;
  readonly translation: TranslationResource;
  readonly voices: VoicesResource;
  readonly streams: StreamsResource;
  readonly tasks: TasksResource;
}

// The names cover the table, no more and no less: each type must be assignable to the other (a
// resource or child missing here, or named here and not in the table, fails to compile).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const namesCoverTable: Same<Resources, ResourceTable> = true;
void namesCoverTable;
