/**
 * Every kind of asynchronous task the service runs, in one table: where its status is read
 * (`GET {path}/{task_id}`, the path the official SDK sends; `aliases` are the interface's names
 * for the same endpoint, which the emulator also answers), how it is polled (`speech`: 2 s
 * growing to 5 s; `longMedia`: 15 s growing to 60 s) and what it is, in words. The client's
 * generic `getTaskStatus`/`waitForTask`, the CLI's `task-status` and the emulator's routes all
 * read this table.
 */
import type { PollingProfile } from './tasks.js';

export interface TaskKindSpec {
  /** Status path prefix: `GET {path}/{task_id}`. */
  path: string;
  /** Other names of the same status endpoint (the interface's, where they differ). */
  aliases?: readonly string[];
  profile: PollingProfile;
  /** What the task does, for messages and `--help`. */
  label: string;
  /** The service deprecates this flow. */
  deprecated?: boolean;
}

export const TASK_KIND_SPECS = {
  'translated-tts': { path: '/translated-tts', profile: 'speech', label: 'translated text to speech' },
  tts: { path: '/tts', profile: 'speech', label: 'text to speech (the deprecated asynchronous flow)', deprecated: true },
  translation: { path: '/translate', aliases: ['/translation'], profile: 'speech', label: 'text translation' },
  transcription: { path: '/transcribe', aliases: ['/transcription'], profile: 'longMedia', label: 'transcription' },
  dub: { path: '/dub', aliases: ['/end-to-end-dubbing'], profile: 'longMedia', label: 'end-to-end dubbing' },
  'dub-alt-format': { path: '/dub-alt-format', profile: 'longMedia', label: 'dubbed output in another format' },
  sub: { path: '/sub', profile: 'longMedia', label: 'subtitles' },
  'project-setup': { path: '/project-setup', profile: 'longMedia', label: 'dubbing project setup' },
  'audio-separation': { path: '/audio-separation', profile: 'longMedia', label: 'audio separation' },
  'text-to-voice': { path: '/text-to-voice', profile: 'speech', label: 'voice from a description' },
  'text-to-sound': { path: '/text-to-sound', profile: 'speech', label: 'sound from a description' },
  story: { path: '/story', profile: 'longMedia', label: 'story' },
  'translated-story': { path: '/translated-story', profile: 'longMedia', label: 'story translation' },
  'discord-dub': { path: '/discord/dub', profile: 'longMedia', label: "dubbing started from the service's Discord bot" },
  'twitter-dub': { path: '/twitter/dub', profile: 'longMedia', label: "dubbing started from the service's X (Twitter) bot" },
  'discord-tts': { path: '/discord/tts', profile: 'speech', label: "text to speech started from the service's Discord bot" },
} as const satisfies Record<string, TaskKindSpec>;

export type TaskKind = keyof typeof TASK_KIND_SPECS;

/** Every task kind, in the table's order. */
export const TASK_KINDS = Object.keys(TASK_KIND_SPECS) as TaskKind[];

export function isTaskKind(name: unknown): name is TaskKind {
  return typeof name === 'string' && Object.hasOwn(TASK_KIND_SPECS, name);
}

/** The spec of `kind`. */
export function taskKindSpec(kind: TaskKind): TaskKindSpec {
  return TASK_KIND_SPECS[kind];
}
