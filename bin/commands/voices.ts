/**
 * `rt-translate voices [list|create|delete|design]`: the voices the key may use, a voice cloned
 * from a recording (uploaded as it is read, from a file or stdin), a custom voice deleted
 * (`DELETE /delete-voice/{id}`; `rt-translate delete-voice ID` is its deprecated old name), and a
 * voice made from a description (its preview URLs).
 */
import { basename } from 'node:path';
import type { Voice } from '../../lib/index.js';
import { customVoiceSchema, textToVoiceSchema } from '../../lib/protocol.js';
import { GENDER_VALUES, VOICE_DESCRIPTION_MIN_LENGTH } from '../../lib/http/index.js';
import { EXIT_OK, UsageError, didYouMean, intFlag, type CliIo } from '../cli.js';
import {
  EXIT_USAGE_TEXT,
  SERVICE_OPTIONS,
  SERVICE_USAGE,
  TASK_OPTIONS,
  TASK_USAGE,
  checkRequest,
  parseCommand,
  serviceSettings,
  taskSettings,
  withService,
} from './service.js';
import { localResult, taskRun } from './task-waits.js';
import { withUploadProgress } from './transfers.js';
import { checkMediaInput } from '../media-input.js';

export const VOICES_USAGE = `Usage: rt-translate voices [list|create|delete|design] [options]      voices

  rt-translate voices [list] [--json]
        the voices the key may use: ID, name, gender, age, language id, one per line
        (--json: one JSON object per line, the service's record)
  rt-translate voices create --name NAME --gender G --file PATH [--language TAG] [--age N]
                             [--description TEXT] [--enhance] [--publish]
        clone a voice from a recording (WAV, MP3, FLAC or AAC; '-' reads stdin, streamed);
        G: 0 unknown, 1 male, 2 female, 9 not applicable. Prints "created voice ID".
  rt-translate voices delete ID
        delete a custom voice of the key's workspace, for good. Prints "deleted voice ID". The
        deletion is sent once: it is repeated only where the service surely did not receive it
        (a repeat after a lost answer would be refused for a voice that was in fact deleted)
  rt-translate voices design --text TEXT --description TEXT [--no-wait | --run ID]
        a voice from a description (at least ${VOICE_DESCRIPTION_MIN_LENGTH} characters: who speaks, how, in what
        mood): prints the URLs of its spoken previews (from the
        embedded emulator, the paths of their files)
${TASK_USAGE}
${SERVICE_USAGE}

A cloned voice works at once with \`rt-translate --voice ID\` for the same key.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  json: { type: 'boolean' },
  name: { type: 'string' },
  gender: { type: 'string' },
  file: { type: 'string' },
  language: { type: 'string' },
  age: { type: 'string' },
  description: { type: 'string' },
  enhance: { type: 'boolean' },
  publish: { type: 'boolean' },
  text: { type: 'string' },
} as const;

const ACTIONS = ['list', 'create', 'delete', 'design'];

/** `voices delete ID`. */
async function deleteVoice(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, SERVICE_OPTIONS, VOICES_USAGE, io, true);
  if (!parsed) return EXIT_OK;
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new UsageError(`voices delete expects one voice ID (got ${positionals.length}; see rt-translate voices --help).`);
  const text = positionals[0]!;
  if (!/^\d+$/.test(text)) throw new UsageError(`ID expects a positive integer (got "${text}").`);
  const voiceId = intFlag(text, 'ID', 1)!;
  const settings = await serviceSettings(values, io);
  return withService(settings, io, async ({ client, signal }) => {
    await client.voices.delete(voiceId, { signal });
    io.stdout.write(`deleted voice ${voiceId}\n`);
    return EXIT_OK;
  });
}

function voiceLine(voice: Voice): string {
  const dash = (value: unknown): string => (value === null || value === undefined ? '-' : String(value));
  return [voice.id, voice.voiceName, dash(voice.gender), dash(voice.age), dash(voice.language)].join('\t');
}

export async function runVoices(args: string[], io: CliIo): Promise<number> {
  const [first, ...rest] = args;
  const action = first === undefined || first.startsWith('-') ? 'list' : first;
  if (action === 'delete') return deleteVoice(rest, io);
  if (!['list', 'create', 'design'].includes(action)) {
    throw new UsageError(`voices expects list, create, delete or design (got "${action}").${didYouMean(action, ACTIONS)} See rt-translate voices --help.`);
  }
  const parsed = parseCommand(action === first ? rest : args, OPTIONS, VOICES_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  const settings = await taskSettings(
    values,
    io,
    action === 'create' && values.file === '-' ? 'the recording must come from a file: pass --file PATH' : undefined,
  );

  if (action === 'create') {
    if (values.name === undefined) throw new UsageError('--name NAME is required (see --help).');
    if (values.gender === undefined) throw new UsageError('--gender G is required (see --help).');
    if (values.file === undefined) throw new UsageError("--file PATH is required ('-' for stdin; see --help).");
    const gender = intFlag(values.gender, '--gender', 0) as (typeof GENDER_VALUES)[number];
    const age = intFlag(values.age, '--age', 0);
    const request = {
      voiceName: values.name,
      gender,
      ...(values.language !== undefined ? { language: values.language } : {}),
      ...(age !== undefined ? { age } : {}),
      ...(values.description !== undefined ? { description: values.description } : {}),
      ...(values.enhance ? { enhanceAudio: true } : {}),
      ...(values.publish ? { publishVoiceToMarketPlace: true } : {}),
    };
    checkRequest(customVoiceSchema, request);
    const media = await checkMediaInput(io, values.file, '--file', 'WAV, MP3, FLAC or AAC audio');
    const file = typeof media === 'string' ? media : { data: media, filename: 'stdin' };
    const shown = typeof media === 'string' ? basename(values.file) : 'standard input';
    return withService(settings, io, async ({ client, signal, progress }) => {
      const created = await withUploadProgress(progress, shown, (onUploadProgress) => client.voices.create({ ...request, file }, { signal, onUploadProgress }));
      io.stdout.write(`created voice ${created.voiceId}\n`);
      return EXIT_OK;
    });
  }

  if (action === 'design') {
    const request = { text: values.text ?? '', voiceDescription: values.description ?? '' };
    if (values.run === undefined) checkRequest(textToVoiceSchema, request);
    return withService(settings, io, async (service) => {
      const run = await taskRun(io, service, 'text-to-voice', values, (signal) => service.client.textToVoice.create(request, { signal }));
      if (run === undefined) return EXIT_OK;
      const result = await service.client.textToVoice.result(run, { signal: service.signal });
      // The embedded emulator's URLs die with this command: its files on disk are given instead.
      for (const url of result.previews) io.stdout.write(`${localResult(service, url) ?? url}\n`);
      return EXIT_OK;
    });
  }

  return withService(settings, io, async ({ client, signal }) => {
    for (const voice of await client.voices.list({ signal })) io.stdout.write(`${values.json ? JSON.stringify(voice.raw) : voiceLine(voice)}\n`);
    return EXIT_OK;
  });
}
