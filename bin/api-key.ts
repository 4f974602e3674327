/**
 * The API key of every command that reaches the service, realtime or HTTP: the flags
 * (`--api-key`, `--api-key-file PATH` or `-` for standard input), their help lines, the key
 * resolved from them or `RT_TRANSLATE_API_KEY`, and how configuration messages name the flags
 * instead of the library's options. One definition, so every command says the same.
 */
import { readFile } from 'node:fs/promises';
import { ENV_API_KEY } from '../lib/index.js';
import { resolveApiKey } from '../lib/protocol.js';
import { UsageError, resolvePath, type CliIo } from './cli.js';
import { fileError } from './file-errors.js';

/** How the library's configuration messages tell the user to do things: with the flags. */
export const FLAG_HINTS = { allowInsecure: 'pass --allow-insecure', apiKey: `pass the key with --api-key-file or ${ENV_API_KEY}` };

/** The key flags (`parseArgs` form). */
export const API_KEY_OPTIONS = {
  'api-key': { type: 'string' },
  'api-key-file': { type: 'string' },
} as const;

export interface ApiKeyFlags {
  'api-key'?: string;
  'api-key-file'?: string;
}

/**
 * The help lines of the key flags; `stdinNote` says what `-` means for the command's own input
 * (`with '-', the audio must come from -i PATH`).
 */
export function apiKeyUsage(stdinNote?: string): string {
  const note = stdinNote ? `\n                        ${stdinNote}` : '';
  return `  --api-key-file PATH   the API key from a file ('-': standard input)${note}
  --api-key KEY         the API key; other users can see it in 'ps': prefer
                        ${ENV_API_KEY} or --api-key-file`;
}

/** Longest key file read, in bytes: a key is a line, not a document. */
const MAX_KEY_FILE_BYTES = 4096;

/**
 * The API key of `--api-key-file PATH` (`-`: standard input, read to its end): the file's text
 * without surrounding whitespace. A missing, empty or oversized file is a usage error; the key
 * itself is never part of a message.
 */
async function readKeyFile(path: string, io: CliIo): Promise<string> {
  let text: string;
  if (path === '-') {
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of io.stdin as AsyncIterable<Buffer>) {
      length += chunk.length;
      if (length > MAX_KEY_FILE_BYTES) throw new UsageError(`--api-key-file - holds more than ${MAX_KEY_FILE_BYTES} bytes: give only the key.`);
      chunks.push(chunk);
    }
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    const absolute = resolvePath(io, path);
    const bytes = await readFile(absolute).catch(async (error: unknown) => {
      throw await fileError(error, { flag: '--api-key-file', path, role: 'input' }, absolute);
    });
    if (bytes.length > MAX_KEY_FILE_BYTES) throw new UsageError(`--api-key-file ${path} holds more than ${MAX_KEY_FILE_BYTES} bytes: give only the key.`);
    text = bytes.toString('utf8');
  }
  const key = text.trim();
  if (key === '') throw new UsageError(`--api-key-file ${path} holds no key (the ${path === '-' ? 'input' : 'file'} is empty).`);
  return key;
}

/**
 * The key the flags give (the file read, or `--api-key`), else the environment's, else
 * undefined; with `required` (a service is configured), a missing key is a usage error.
 * `stdinTaken` names what else the command reads from standard input, which `--api-key-file -`
 * then cannot share (`the audio must come from a file: pass -i PATH`). Every problem is a
 * usage error, before any traffic; the key never appears in a message.
 */
export async function resolveKeyFlags(
  values: ApiKeyFlags,
  io: CliIo,
  options: { required: boolean; stdinTaken?: string | undefined },
): Promise<string | undefined> {
  const keyFile = values['api-key-file'];
  if (keyFile !== undefined && values['api-key'] !== undefined) throw new UsageError('give the key once: --api-key or --api-key-file, not both.');
  if (keyFile === '-' && options.stdinTaken !== undefined) {
    throw new UsageError(`--api-key-file - reads the key from standard input, so ${options.stdinTaken}.`);
  }
  const apiKey = keyFile !== undefined ? await readKeyFile(keyFile, io) : resolveApiKey(values['api-key'], io.env, '--api-key');
  if (options.required && apiKey === undefined) throw new UsageError(`no API key: set ${ENV_API_KEY}, or pass --api-key-file PATH.`);
  return apiKey;
}

/**
 * Where the key of `resolveKeyFlags` comes from, for messages (never the key): `--api-key-file`,
 * `--api-key`, the variable, or undefined when there is none.
 */
export function keySource(values: ApiKeyFlags, env: NodeJS.ProcessEnv): string | undefined {
  if (values['api-key-file'] !== undefined) return '--api-key-file';
  if (values['api-key'] !== undefined) return '--api-key';
  return env[ENV_API_KEY]?.trim() ? ENV_API_KEY : undefined;
}
