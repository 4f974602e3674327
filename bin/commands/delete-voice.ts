/**
 * `rt-translate delete-voice ID`: deletes a custom voice of the key's workspace
 * (`DELETE /delete-voice/{id}`). Permanent; a voice the key does not own is refused (403).
 */
import { EXIT_OK, UsageError, intFlag, type CliIo } from '../cli.js';
import { EXIT_USAGE_TEXT, SERVICE_OPTIONS, SERVICE_USAGE, parseCommand, serviceSettings, withService } from './http-common.js';

export const DELETE_VOICE_USAGE = `Usage: rt-translate delete-voice ID [options]      delete a custom voice

  ID                    the voice id; only voices of the key's own workspace can be deleted
${SERVICE_USAGE}

Prints "deleted voice ID". The deletion is sent once: it is repeated only where the service
surely did not receive it, since a repeat after a lost answer would be refused for a voice that
was in fact deleted.

${EXIT_USAGE_TEXT}`;

export async function runDeleteVoice(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(args, SERVICE_OPTIONS, DELETE_VOICE_USAGE, io, true);
  if (!parsed) return EXIT_OK;
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new UsageError(`delete-voice expects one voice ID (got ${positionals.length}; see --help).`);
  const text = positionals[0]!;
  if (!/^\d+$/.test(text)) throw new UsageError(`ID expects a positive integer (got "${text}").`);
  const voiceId = intFlag(text, 'ID', 1)!;
  const settings = await serviceSettings(values, io);
  return withService(settings, io, async ({ client, signal }) => {
    await client.deleteVoice(voiceId, { signal });
    io.stdout.write(`deleted voice ${voiceId}\n`);
    return EXIT_OK;
  });
}
