/**
 * `rt-translate languages`: the service's source or target languages, one per line (id, tag,
 * name), or as the service's JSON records.
 */
import { EXIT_OK, UsageError, type CliIo } from '../cli.js';
import { EXIT_USAGE_TEXT, SERVICE_OPTIONS, SERVICE_USAGE, parseCommand, serviceSettings, withService } from './service.js';

export const LANGUAGES_USAGE = `Usage: rt-translate languages [--source | --target] [--json]      the service's languages

  --source              the languages the service takes as a source (speech, text in)
  --target              the languages it translates and dubs into (the default)
  --json                one JSON object per line, the service's record
${SERVICE_USAGE}

Prints "ID<TAB>TAG<TAB>NAME" per language. The task commands take a tag (--from es-es) and
convert it to the id these endpoints want; the ids are the service's and differ from the tags'
order, so look them up here rather than guessing.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  source: { type: 'boolean' },
  target: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

export async function runLanguages(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, LANGUAGES_USAGE, io);
  if (!parsed) return EXIT_OK;
  const { values } = parsed;
  if (values.source && values.target) throw new UsageError('give --source or --target, not both.');
  const settings = await serviceSettings(values, io);
  return withService(settings, io, async ({ client, signal }) => {
    for (const language of await client.languages.list(values.source ? 'source' : 'target', { signal })) {
      io.stdout.write(`${values.json ? JSON.stringify(language.raw) : `${language.id}\t${language.tag}\t${language.name}`}\n`);
    }
    return EXIT_OK;
  });
}
