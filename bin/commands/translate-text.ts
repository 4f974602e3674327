/**
 * `rt-translate translate-text --from TAG --to TAG [TEXT...]`: texts translated by the task
 * (`POST /translate`), one translation per line on stdout; the texts come from the arguments,
 * or one per line from `--file` or stdin. `--stream` uses the streaming endpoint for one text
 * and prints it as it comes; the service deprecates that endpoint, which the command says once
 * on stderr (`../deprecations.ts`).
 */
import { readFile } from 'node:fs/promises';
import type { TranslationRequest } from '../../lib/index.js';
import { translationSchema } from '../../lib/protocol.js';
import { EXIT_OK, UsageError, resolvePath, type CliIo } from '../cli.js';
import { fileError } from '../file-errors.js';
import { EXIT_USAGE_TEXT, SERVICE_OPTIONS, SERVICE_USAGE, TASK_OPTIONS, TASK_USAGE, checkRequest, parseCommand, taskSettings, withService } from './service.js';
import { taskRun } from './task-waits.js';

export const TRANSLATE_TEXT_USAGE = `Usage: rt-translate translate-text --from TAG --to TAG [TEXT...] [options]      translate texts

  TEXT...               the texts to translate; without them, one text per line of --file or stdin
  --from TAG            their language, a locale tag such as en-us (or the service's numeric id)
  --to TAG              the language to translate into
  --file PATH           read the texts from PATH, one per line ('-': stdin)
  --formal, --casual    formality of the translation
  --stream              deprecated by the service (said on stderr when used): one text
                        through the streaming endpoint, printed as it arrives
${TASK_USAGE}
${SERVICE_USAGE}

Prints one translation per line, in the order of the texts. Says on stderr which task it
created and, once done, its run.

${EXIT_USAGE_TEXT}`;

const OPTIONS = {
  ...SERVICE_OPTIONS,
  ...TASK_OPTIONS,
  from: { type: 'string' },
  to: { type: 'string' },
  file: { type: 'string' },
  formal: { type: 'boolean' },
  casual: { type: 'boolean' },
  stream: { type: 'boolean' },
} as const;

async function readTexts(path: string, io: CliIo): Promise<string[]> {
  let text: string;
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of io.stdin as AsyncIterable<Buffer>) chunks.push(Buffer.from(chunk));
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    const absolute = resolvePath(io, path);
    text = await readFile(absolute, 'utf8').catch(async (error: unknown) => {
      throw await fileError(error, { flag: '--file', path, role: 'input' }, absolute);
    });
  }
  return text.split(/\r?\n/).filter((line) => line.trim() !== '');
}

export async function runTranslateText(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, OPTIONS, TRANSLATE_TEXT_USAGE, io, true);
  if (!parsed) return EXIT_OK;
  const { values, positionals } = parsed;
  const textsOnStdin = values.run === undefined && positionals.length === 0 && (values.file ?? '-') === '-';
  const settings = await taskSettings(values, io, textsOnStdin ? 'the texts must come as arguments or from --file PATH' : undefined);
  let request: TranslationRequest | undefined;
  if (values.run === undefined) {
    if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
    if (values.to === undefined) throw new UsageError('--to TAG is required (see --help).');
    if (values.formal && values.casual) throw new UsageError('give --formal or --casual, not both.');
    if (positionals.length > 0 && values.file !== undefined) throw new UsageError('give the texts as arguments or with --file, not both.');
    const texts = positionals.length > 0 ? positionals : await readTexts(values.file ?? '-', io);
    if (texts.length === 0) throw new UsageError('no text to translate: give TEXT arguments, --file PATH, or lines on stdin.');
    const from = /^\d+$/.test(values.from) ? Number(values.from) : values.from;
    const to = /^\d+$/.test(values.to) ? Number(values.to) : values.to;
    request = {
      texts,
      sourceLanguage: from,
      targetLanguage: to,
      ...(values.formal ? { formality: 2 as const } : values.casual ? { formality: 1 as const } : {}),
    };
    checkRequest(translationSchema, request);
    if (values.stream && texts.length !== 1) throw new UsageError(`--stream translates one text (got ${texts.length}).`);
  }

  return withService(settings, io, async (service) => {
    const { client, signal } = service;
    if (values.stream && request) {
      const { sourceLanguage, targetLanguage, formality } = request;
      const stream = await client.translation.openStream({ text: request.texts[0]!, sourceLanguage, targetLanguage, formality }, { signal });
      for await (const piece of stream) io.stdout.write(piece as string);
      io.stdout.write('\n');
      return EXIT_OK;
    }
    const run = await taskRun(io, service, 'translation', values, (s) => client.translation.create(request!, { signal: s }));
    if (run === undefined) return EXIT_OK;
    for (const text of (await client.translation.result(run, { signal })).texts) io.stdout.write(`${text}\n`);
    return EXIT_OK;
  });
}
