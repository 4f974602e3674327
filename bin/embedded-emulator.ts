/**
 * The embedded emulator: what a command talks to when no service URL is configured (or with
 * `--emulator`). Each command starts one on loopback and it ends with the command, but it
 * remembers, in a state directory of the user, what the commands before made: custom voices,
 * tasks and their runs (run ids never repeat), result files. The rule for the directory:
 * `$XDG_STATE_HOME/rt-translate/emulator`, else `$HOME/.local/state/rt-translate/emulator`; with
 * neither set, it remembers nothing. `rt-translate emulator --reset` forgets it all.
 *
 * It always uses the emulator's own key: an API key the user gave is meant for the service, so
 * it is neither sent to the emulator nor kept anywhere. Stderr says once that the emulator
 * answers, and louder when a key was given, since that key is then unused.
 */
import { accessSync, constants, mkdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { ENV_BASE_URL, ENV_REALTIME_URL, RtTranslateError } from '../lib/index.js';
import { EMULATOR_DEFAULT_API_KEY, startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/index.js';
import { UsageError, type CliIo } from './cli.js';

/** The variables the state directory comes from, in order. */
export const ENV_XDG_STATE_HOME = 'XDG_STATE_HOME';
export const ENV_HOME = 'HOME';

/** Where the embedded emulator remembers, under the user's state directory. */
const STATE_SUBDIR = join('rt-translate', 'emulator');

/**
 * The embedded emulator's state directory by the rule of the module doc, from the command's
 * environment; undefined when neither variable holds an absolute path (a relative one is
 * ignored, as the XDG rule says).
 */
export function emulatorStateDir(env: NodeJS.ProcessEnv): string | undefined {
  const xdg = env[ENV_XDG_STATE_HOME];
  if (xdg && isAbsolute(xdg)) return join(xdg, STATE_SUBDIR);
  const home = env[ENV_HOME];
  if (home && isAbsolute(home)) return join(home, '.local', 'state', STATE_SUBDIR);
  return undefined;
}

/** Why the embedded emulator remembers nothing, for messages. */
export const NO_STATE_DIR = `neither ${ENV_XDG_STATE_HOME} nor ${ENV_HOME} is set to an absolute directory`;

/**
 * The line that says the embedded emulator answers this command. `keySource` names where a key
 * came from (`--api-key`, `--api-key-file`, the variable): the key is then unused, and the line
 * says so first.
 */
export function embeddedNotice(keySource: string | undefined, stateDir: string | undefined): string {
  const forService = `set ${ENV_BASE_URL} / ${ENV_REALTIME_URL} for the service`;
  const memory = stateDir === undefined ? ` (it remembers nothing between commands: ${NO_STATE_DIR})` : '';
  if (keySource === undefined) return `rt-translate: using the embedded emulator${memory}: ${forService}`;
  return `rt-translate: warning: the API key from ${keySource} is not used: no service URL is configured, so the embedded emulator answers${memory}; ${forService}`;
}

/** Makes the state directory if need be, or says which one cannot be used and why (a usage error, before any traffic). */
function checkStateDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    accessSync(dir, constants.W_OK);
  } catch (error) {
    throw new UsageError(
      `the embedded emulator cannot keep its state in ${dir} (from ${ENV_XDG_STATE_HOME}, else ${ENV_HOME}): ` +
        `${(error as NodeJS.ErrnoException).code ?? (error as Error).message}; set ${ENV_XDG_STATE_HOME} to a directory you can write.`,
    );
  }
}

/**
 * The line that follows a refusal of the embedded emulator that may come from what it does not
 * know (a task or run it answers 404 for, a voice it refuses): what it knows, and why it may not
 * know this. Undefined for any other failure.
 */
export function embeddedRefusalHint(error: unknown, stateDir: string | undefined): string | undefined {
  if (!(error instanceof RtTranslateError)) return undefined;
  const status = (error as { status?: unknown }).status;
  if (error.code !== 'RTT_VOICE_REJECTED' && error.code !== 'RTT_FORBIDDEN' && status !== 404) return undefined;
  const known =
    stateDir === undefined
      ? `it remembers nothing between commands here (${NO_STATE_DIR}), so it knows only what this command made`
      : `it knows the voices, tasks and runs that commands made without a service URL (kept in ${stateDir} until \`rt-translate emulator --reset\`), not those of a service or of a running \`rt-translate emulator\``;
  return `rt-translate: the embedded emulator answered: ${known}`;
}

/**
 * Starts the embedded emulator for a command (`options`: the command's own settings, such as
 * its task time), on the state directory of `io.env`, and says on stderr that it answers.
 */
export async function startEmbeddedEmulator(io: CliIo, keySource: string | undefined, options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const stateDir = emulatorStateDir(io.env);
  if (stateDir !== undefined) checkStateDir(stateDir);
  const emulator = await startEmulator({ ...options, apiKeys: [EMULATOR_DEFAULT_API_KEY], ...(stateDir !== undefined ? { stateDir } : {}) });
  io.stderr.write(`${embeddedNotice(keySource, stateDir)}\n`);
  return emulator;
}

export { EMULATOR_DEFAULT_API_KEY };
