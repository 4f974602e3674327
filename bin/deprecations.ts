/**
 * How the command line tells its users about deprecations: one plain line on stderr for each
 * deprecation a command run meets, once per run, in the words of the command's flags
 * (`rt-translate: --stream is deprecated by the service; ...`).
 *
 * The library reports the service's deprecations as Node `DeprecationWarning`s, which suit the
 * authors of a program (a code, a hint about `--trace-deprecation` to find the calling line), not
 * the users of a command. A command therefore runs inside the library's `handleDeprecations`: the
 * library's deprecations come here instead, and Node prints nothing of its own. The command
 * line's own deprecated names (an old command kept as an alias) are said the same way.
 */
import { handleDeprecations, type DeprecationCode } from '../lib/index.js';
import type { CliIo } from './cli.js';

/**
 * The library's deprecations that a command meets through one of its flags, in the flag's words
 * (the text after `rt-translate: `); any other is said in the library's words.
 */
const IN_FLAG_WORDS: Partial<Record<DeprecationCode, string>> = {
  RTT_DEP_TRANSLATION_STREAM: '--stream is deprecated by the service; without --stream, translate-text gives the same translation through a translation task.',
};

/** The deprecation lines of one command run, each said once. */
export class DeprecationNotices {
  readonly #io: CliIo;
  readonly #said = new Set<string>();

  constructor(io: CliIo) {
    this.#io = io;
  }

  /** Says `text` (after `rt-translate: `) on stderr, unless a line with the same `key` was said in this run. */
  say(key: string, text: string): void {
    if (this.#said.has(key)) return;
    this.#said.add(key);
    this.#io.stderr.write(`rt-translate: ${text}\n`);
  }

  /** Runs `work` with the library's deprecations said here instead of as process warnings. */
  run<T>(work: () => Promise<T>): Promise<T> {
    return handleDeprecations((deprecation) => {
      this.say(`${deprecation.code} ${deprecation.field ?? ''}`, IN_FLAG_WORDS[deprecation.code] ?? deprecation.message);
    }, work);
  }
}
