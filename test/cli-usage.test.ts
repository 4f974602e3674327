/**
 * The command line's answers to a mistyped command line, in-process: every command's usage
 * errors point to its own help, and a command or flag close to a real one is suggested ("did you
 * mean"), only when it is close. The edit distance behind the suggestions is checked with tables.
 */
import { describe, expect, it } from 'vitest';
import { didYouMean, editDistance } from '../bin/cli.js';
import { COMMANDS } from '../bin/main.js';
import { runInProcess } from './helpers/cli.js';

/** The help a command's usage errors point to. */
const helpOf = (command: string): string => (command === 'translate' ? 'rt-translate --help' : `rt-translate ${command} --help`);

/** A long flag of each command, and the same flag with its last two letters swapped. */
const FLAGS: Record<string, string> = {
  translate: '--from',
  listen: '--language',
  emulator: '--port',
  tts: '--text',
  'translated-tts': '--decode',
  'translate-text': '--file',
  transcribe: '--words',
  dub: '--transcript',
  subtitles: '--url',
  voices: '--json',
  languages: '--source',
  separate: '--input',
  'separate-results': '--output',
  'task-status': '--wait',
  serve: '--origin',
  batch: '--concurrency',
  worker: '--concurrency',
};
const slip = (flag: string): string => `${flag.slice(0, -2)}${flag.at(-1)}${flag.at(-2)}`;

describe('edit distance', () => {
  it.each([
    ['translat', 'translate', 1],
    ['langauge', 'language', 1],
    ['form', 'from', 1],
    ['voics', 'voices', 1],
    ['', 'tts', 3],
    ['kitten', 'sitting', 3],
    ['tts', 'tts', 0],
  ])('%s to %s: %i', (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });

  it.each([
    { typed: 'translat', candidates: ['translate', 'translated-tts', 'listen'], says: ' Did you mean translate?' },
    { typed: 'ttss', candidates: ['tts', 'dub'], says: ' Did you mean tts?' },
    { typed: 'rename', candidates: ['list', 'create', 'delete', 'design'], says: '' },
    { typed: 'frobnicate', candidates: ['translate', 'separate'], says: '' },
    { typed: 'x', candidates: ['o'], says: '' },
    { typed: 'lisen', candidates: ['listen', 'lisen2'], says: ' Did you mean listen or lisen2?' },
  ])('$typed among $candidates: "$says"', ({ typed, candidates, says }) => {
    expect(didYouMean(typed, candidates)).toBe(says);
  });
});

describe.concurrent('a mistyped command line', () => {
  it('a misspelled command is suggested; a word far from every command is not', async () => {
    const [translat, voics, far] = await Promise.all([
      runInProcess(['translat', '--from', 'en-us', '--to', 'es-es']),
      runInProcess(['voics', 'list']),
      runInProcess(['frobnicate']),
    ]);
    expect(translat.stderr).toBe("rt-translate: unknown command 'translat'. Did you mean translate? See rt-translate --help.\n");
    expect(voics.stderr).toBe("rt-translate: unknown command 'voics'. Did you mean voices? See rt-translate --help.\n");
    expect(far.stderr).toBe("rt-translate: unknown command 'frobnicate'. See rt-translate --help.\n");
    for (const result of [translat, voics, far]) {
      expect(result.code).toBe(2);
      expect(result.stdout.length).toBe(0);
    }
  });

  it("every command's unknown flag points to that command's help", async () => {
    expect(Object.keys(FLAGS).sort()).toEqual(Object.keys(COMMANDS).sort());
    const results = await Promise.all(Object.keys(COMMANDS).map((command) => runInProcess([command, '--bogus'])));
    for (const [i, command] of Object.keys(COMMANDS).entries()) {
      expect(results[i]!.stderr, command).toBe(`rt-translate: Unknown option '--bogus'. See ${helpOf(command)}.\n`);
      expect(results[i]!.code, command).toBe(2);
    }
  });

  it("a misspelled flag of every command is suggested, from that command's flags", async () => {
    const results = await Promise.all(Object.entries(FLAGS).map(([command, flag]) => runInProcess([command, slip(flag), 'x'])));
    for (const [i, [command, flag]] of Object.entries(FLAGS).entries()) {
      expect(results[i]!.stderr, command).toBe(`rt-translate: Unknown option '${slip(flag)}'. Did you mean ${flag}? See ${helpOf(command)}.\n`);
      expect(results[i]!.code, command).toBe(2);
    }
  });

  it('a misspelled voices action or task kind is suggested too', async () => {
    const [action, kind] = await Promise.all([runInProcess(['voices', 'lst']), runInProcess(['task-status', 'transcripton', 'some-task'])]);
    expect(action.stderr).toBe('rt-translate: voices expects list, create, delete or design (got "lst"). Did you mean list? See rt-translate voices --help.\n');
    expect(kind.stderr).toMatch(/^rt-translate: KIND expects one of translated-tts, .* \(got "transcripton"\)\. Did you mean transcription\?\n$/);
    for (const result of [action, kind]) expect(result.code).toBe(2);
  });

  it('a flag given with its value (--flag=value) is suggested by its name', async () => {
    const result = await runInProcess(['tts', '--langauge=en-us', '--text', 'Hello there']);
    expect(result.stderr).toBe("rt-translate: Unknown option '--langauge'. Did you mean --language? See rt-translate tts --help.\n");
  });
});
