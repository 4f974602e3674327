/**
 * The commands for the rest of the service (`voices`, `languages`, `translate-text`,
 * `transcribe`, `dub`, `subtitles`), in-process against an emulator on loopback: what they print
 * and write, the task and run ids on stderr, `--no-wait` then `--run`, usage errors before any
 * request, the help of every HTTP command, and `rt-translate emulator --cloned-voice`.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFlac } from '../lib/audio/flac-encoder.js';
import { startEmulator, type RunningEmulator } from '../lib/emulator/server.js';
import { synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import type { CliIo } from '../bin/cli.js';
import { runDub } from '../bin/commands/dub.js';
import { runEmulator } from '../bin/commands/emulator.js';
import { runLanguages } from '../bin/commands/languages.js';
import { runSubtitles } from '../bin/commands/subtitles.js';
import { runTaskStatus } from '../bin/commands/task-status.js';
import { runTranscribe } from '../bin/commands/transcribe.js';
import { runTranslateText } from '../bin/commands/translate-text.js';
import { runVoices } from '../bin/commands/voices.js';
import { runTts } from '../bin/commands/tts.js';
import { runTranslatedTts } from '../bin/commands/translated-tts.js';
import { runSeparateResults } from '../bin/commands/separate-results.js';
import { runSeparate } from '../bin/commands/separate.js';
import { runCli, runInProcess } from './helpers/cli.js';
import { runCommand, type CommandEntry, type CommandOptions, type CommandResult } from './helpers/cli-io.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { VOICE_DESCRIPTION } from './http-test-helpers.js';

const KEY = 'sk-cli-service-test-5c1d09e2b7';
const FIXTURE = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const SENTENCES = ['Hello, this is a test of live translation.', 'The weather is nice today.', 'Thank you for listening.'];
const MEDIA = 'https://media.example.com/speech-en-24k.wav';
/** The emulator's transcript of FIXTURE as SubRip. */
const FIXTURE_SRT =
  '1\n00:00:00,320 --> 00:00:02,620\nHello, this is a test of live translation.\n\n' +
  '2\n00:00:03,820 --> 00:00:05,040\nThe weather is nice today.\n\n' +
  '3\n00:00:06,260 --> 00:00:07,340\nThank you for listening.\n';

/** What `translate-text --stream` says on stderr. */
const STREAM_DEPRECATED =
  'rt-translate: --stream is deprecated by the service; without --stream, translate-text gives the same translation through a translation task.';

const ENTRIES: Record<string, CommandEntry> = {
  voices: runVoices,
  languages: runLanguages,
  'translate-text': runTranslateText,
  transcribe: runTranscribe,
  dub: runDub,
  subtitles: runSubtitles,
  'task-status': runTaskStatus,
  tts: runTts,
  'translated-tts': runTranslatedTts,
  separate: runSeparate,
  'separate-results': runSeparateResults,
};

let emu: RunningEmulator;
let dir: string;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [KEY], taskMs: 0, taskPolls: 1 });
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-cli-service-'));
});

afterAll(async () => {
  await emu.close();
  await rm(dir, { recursive: true, force: true });
});

/** Commands that wait for a task (as the service advises: 2 s, or 15 s for long media): the tests poll every 10 ms. */
const WAITING = new Set(['transcribe', 'dub', 'subtitles', 'translate-text', 'voices design']);

function cli(args: string[], options: CommandOptions = {}): Promise<CommandResult> {
  const [name, ...rest] = args;
  const waits = (WAITING.has(name!) || WAITING.has(`${name} ${rest[0]}`)) && !rest.includes('--help') && !rest.includes('--stream');
  const poll = waits ? ['--poll-ms', '10'] : [];
  return runCommand(ENTRIES[name!]!, [...rest, ...poll], { env: { RT_TRANSLATE_BASE_URL: emu.baseUrl, RT_TRANSLATE_API_KEY: KEY }, ...options });
}

function lines(text: string | Buffer): string[] {
  return text
    .toString()
    .split('\n')
    .filter((line) => line !== '');
}

/** The stderr lines of a command that created a task of `kind` and waited for it. */
const taskLines = (kind: string): unknown[] => [
  expect.stringMatching(new RegExp(`^rt-translate: task [0-9a-f-]{36} \\(${kind}\\) created$`)),
  expect.stringMatching(/^rt-translate: task [0-9a-f-]{36}: run \d+$/),
];

function expectClean(result: CommandResult): void {
  expect(result.stderr).not.toContain(KEY);
  expect(result.stdout.includes(KEY)).toBe(false);
}

/**
 * `ARGS --no-wait` against the emulator: checks that it printed only the task (`{"task_id",
 * "kind"}` on stdout, how to go on on stderr), then waits with `task-status KIND ID --wait`,
 * which must print the SUCCESS status with a run id. Returns the task and run ids.
 */
async function createdForLater(args: string[], kind: string): Promise<{ taskId: string; runId: number }> {
  const created = await cli([...args, '--no-wait']);
  expect(created.code).toBe(0);
  const printed = JSON.parse(created.stdout.toString()) as { task_id: string; kind: string };
  expect(printed).toEqual({ task_id: expect.stringMatching(/^[0-9a-f-]{36}$/), kind });
  expect(created.stderr).toBe(
    `rt-translate: task ${printed.task_id} (${kind}) created; wait for it with \`rt-translate task-status ${kind} ${printed.task_id} --wait\`, ` +
      'then fetch its result with --run RUN_ID\n',
  );
  const waited = await cli(['task-status', kind, printed.task_id, '--wait', '--poll-ms', '10']);
  expect(waited.code).toBe(0);
  const status = JSON.parse(waited.stdout.toString()) as { status: string; run_id: number };
  expect(status).toMatchObject({ status: 'SUCCESS', run_id: expect.any(Number) });
  return { taskId: printed.task_id, runId: status.run_id };
}

describe('rt-translate voices', () => {
  it('lists, clones from a file and from stdin, deletes', async () => {
    const listed = await cli(['voices']);
    expect(listed.code).toBe(0);
    expect(lines(listed.stdout)).toContain('147320\tAlice\t2\t28\t1');
    const fromFile = await cli(['voices', 'create', '--name', 'Narrator', '--gender', '1', '--file', FIXTURE, '--language', 'en-us', '--age', '33']);
    expect(fromFile.code).toBe(0);
    const id = Number(/^created voice (\d+)\n$/.exec(fromFile.stdout.toString())![1]);
    const fromStdin = await cli(['voices', 'create', '--name', 'Piped', '--gender', '2', '--file', '-'], { stdin: await readFile(FIXTURE) });
    expect(fromStdin.stdout.toString()).toMatch(/^created voice \d+\n$/);
    const json = await cli(['voices', 'list', '--json']);
    expect(
      lines(json.stdout)
        .map((l) => JSON.parse(l) as { id: number; voice_name: string })
        .find((v) => v.id === id),
    ).toMatchObject({ voice_name: 'Narrator', age: 33 });
    const deleted = await cli(['voices', 'delete', String(id)]);
    expect(deleted.stdout.toString()).toBe(`deleted voice ${id}\n`);
    expect(lines((await cli(['voices'])).stdout).some((l) => l.startsWith(`${id}\t`))).toBe(false);
    expectClean(fromFile);
  });

  it('designs a voice from a description: the preview URLs', async () => {
    const result = await cli(['voices', 'design', '--text', 'Hello from a new voice.', '--description', VOICE_DESCRIPTION]);
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toEqual(taskLines('text-to-voice'));
    expect(lines(result.stdout)).toHaveLength(3);
    expect((await fetch(lines(result.stdout)[0]!)).status).toBe(200);
  });

  it('design --no-wait prints the task; task-status --wait its run; --run RUN the preview URLs', async () => {
    const { runId } = await createdForLater(['voices', 'design', '--text', 'Hello from later.', '--description', VOICE_DESCRIPTION], 'text-to-voice');
    const result = await cli(['voices', 'design', '--run', String(runId)]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(lines(result.stdout)).toHaveLength(3);
    expect((await fetch(lines(result.stdout)[2]!)).status).toBe(200);
  });

  it('usage errors name the flag, before any request', async () => {
    const [name, gender, file, action, slip] = await Promise.all([
      cli(['voices', 'create', '--gender', '1', '--file', FIXTURE]),
      cli(['voices', 'create', '--name', 'x', '--gender', '5', '--file', FIXTURE]),
      cli(['voices', 'create', '--name', 'x', '--gender', '1', '--file', join(dir, 'none.wav')]),
      cli(['voices', 'rename']),
      cli(['voices', 'delte', '17']),
    ]);
    expect(name.stderr).toBe('rt-translate: --name NAME is required (see --help).\n');
    expect(gender.stderr).toBe('rt-translate: --gender expects one of 0, 1, 2 or 9 (got 5).\n');
    expect(file.stderr).toBe(`rt-translate: cannot read --file ${join(dir, 'none.wav')}: no such file. [RTT_FILE]\n`);
    expect(action.stderr).toBe('rt-translate: voices expects list, create, delete or design (got "rename"). See rt-translate voices --help.\n');
    expect(slip.stderr).toBe(
      'rt-translate: voices expects list, create, delete or design (got "delte"). Did you mean delete? See rt-translate voices --help.\n',
    );
    for (const r of [name, gender, file, action, slip]) expect(r.code).toBe(2);
  });
});

describe('rt-translate languages', () => {
  it('prints id, tag and name; --source the source list; --json the records', async () => {
    const targets = lines((await cli(['languages'])).stdout);
    expect(targets[0]).toBe('1\ten-us\tEnglish (United States)');
    expect(targets).toContain('54\tes-es\tSpanish (Spain)');
    const sources = lines((await cli(['languages', '--source'])).stdout);
    expect(sources.length).toBeLessThan(targets.length);
    expect(JSON.parse(lines((await cli(['languages', '--json'])).stdout)[0]!)).toEqual({ id: 1, language: 'English (United States)', short_name: 'en-us' });
    expect((await cli(['languages', '--source', '--target'])).code).toBe(2);
  });
});

describe('a reader that goes away (EPIPE on standard output)', () => {
  const serviceEnv = (): Record<string, string> => ({ RT_TRANSLATE_BASE_URL: emu.baseUrl, RT_TRANSLATE_API_KEY: KEY });
  /** A standard output whose reader leaves after `keep` bytes, as `| head -c N` does. */
  function leavingReader(keep: number): Writable {
    let taken = 0;
    return new Writable({
      write(chunk: Buffer, _encoding, callback) {
        taken += chunk.length;
        if (taken > keep) callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE', syscall: 'write' }));
        else callback();
      },
    });
  }

  it('tts streaming to standard output ends quietly with status 0 (the spawned smoke test covers a short output)', async () => {
    const args = ['tts', '--text', 'A reader that leaves early.', '--language', 'en-us', '--format', 'pcm_s16le', '-o', '-'];
    const result = await runInProcess(args, { env: serviceEnv(), stdout: leavingReader(10) });
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(/EPIPE|error/i);
  });

  it('any other failure of standard output is reported (exit 1)', async () => {
    const full = new Writable({
      write(_chunk, _encoding, callback) {
        callback(Object.assign(new Error('no space left on device, write'), { code: 'ENOSPC', syscall: 'write' }));
      },
    });
    const result = await runInProcess(['languages'], { env: serviceEnv(), stdout: full });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/no space left on device/);
  });
});

describe('rt-translate translate-text', () => {
  it('translates arguments, a file, and lines on stdin, one translation per line', async () => {
    const args = await cli(['translate-text', '--from', 'en-us', '--to', 'es-es', 'Good morning', 'Thank you']);
    expect(args.code).toBe(0);
    expect(args.stdout.toString()).toBe('[es-es] Good morning\n[es-es] Thank you\n');
    expect(lines(args.stderr)).toEqual(taskLines('translation'));
    const path = join(dir, 'texts.txt');
    await writeFile(path, 'one\n\ntwo\r\n');
    expect((await cli(['translate-text', '--from', 'en-us', '--to', '76', '--file', path])).stdout.toString()).toBe('[fr-fr] one\n[fr-fr] two\n');
    expect((await cli(['translate-text', '--from', 'en-us', '--to', 'de-de'], { stdin: Buffer.from('piped\n') })).stdout.toString()).toBe('[de-de] piped\n');
  });

  it('--stream prints one text as it comes, saying once that the service deprecates it', async () => {
    const result = await cli(['translate-text', '--from', 'en-us', '--to', 'ja-jp', '--stream', 'Streamed words']);
    expect(result.stdout.toString()).toBe('[ja-jp] Streamed words\n');
    expect(result.stderr).toBe(`${STREAM_DEPRECATED}\n`);
    expect((await cli(['translate-text', '--from', 'en-us', '--to', 'ja-jp', '--stream', 'a', 'b'])).stderr).toBe(
      'rt-translate: --stream translates one text (got 2).\n',
    );
  });

  it('--no-wait, then --run', async () => {
    const { runId } = await createdForLater(['translate-text', '--from', 'en-us', '--to', 'es-es', 'Later'], 'translation');
    const result = await cli(['translate-text', '--run', String(runId)]);
    expect(result.stdout.toString()).toBe('[es-es] Later\n');
    expect(result.stderr).toBe('');
  });

  it('usage errors name the flag', async () => {
    const [from, lang, none] = await Promise.all([
      cli(['translate-text', '--to', 'es-es', 'x']),
      cli(['translate-text', '--from', 'english', '--to', 'es-es', 'x']),
      cli(['translate-text', '--from', 'en-us', '--to', 'es-es'], { stdin: Buffer.from('\n') }),
    ]);
    expect(from.stderr).toBe('rt-translate: --from TAG is required (see --help).\n');
    expect(lang.stderr).toMatch(/^rt-translate: --from expects a locale tag such as "en-us" or a numeric language id \(got "english"\)\.\n$/);
    expect(none.stderr).toBe('rt-translate: no text to translate: give TEXT arguments, --file PATH, or lines on stdin.\n');
  });
});

describe('rt-translate transcribe', () => {
  it("a file to SRT (by the output's extension)", async () => {
    const out = join(dir, 'talk.srt');
    const result = await cli(['transcribe', '-i', FIXTURE, '--language', 'en-us', '-o', out]);
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toEqual(taskLines('transcription'));
    expect(await readFile(out, 'utf8')).toBe(FIXTURE_SRT);
  });

  it('--no-wait prints the task; task-status --wait its run; --run RUN the transcript', async () => {
    const { runId } = await createdForLater(['transcribe', '-i', FIXTURE, '--language', 'en-us'], 'transcription');
    const result = await cli(['transcribe', '--run', String(runId), '-f', 'srt']);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout.toString()).toBe(FIXTURE_SRT);
  });

  it('stdin to JSON with words; a URL to WebVTT with speakers', async () => {
    const json = await cli(['transcribe', '-i', '-', '--language', '1', '--words'], { stdin: await readFile(FIXTURE) });
    const { segments } = JSON.parse(json.stdout.toString()) as { segments: Array<{ text: string; words: unknown[] }> };
    expect(segments.map((s) => s.text)).toEqual(SENTENCES);
    expect(segments[1]!.words).toHaveLength(5);
    const vtt = await cli(['transcribe', '--url', MEDIA, '--language', 'en-us', '-f', 'vtt', '--speakers']);
    expect(vtt.stdout.toString()).toMatch(/^WEBVTT\n\n00:00:00\.320 --> 00:00:02\.620\n<v SPEAKER_0>Hello, this is a test/);
  });

  it('usage errors before any request', async () => {
    const [both, format, mode] = await Promise.all([
      cli(['transcribe', '-i', FIXTURE, '--url', MEDIA, '--language', 'en-us']),
      cli(['transcribe', '-i', FIXTURE, '--language', 'en-us', '-f', 'docx']),
      cli(['transcribe', '-i', FIXTURE, '--language', 'en-us', '--mode', 'turbo']),
    ]);
    expect(both.stderr).toBe('rt-translate: give -i PATH (a recording) or --url URL, one of them (see --help).\n');
    expect(format.stderr).toBe('rt-translate: -f expects one of json, srt, vtt, txt (got "docx").\n');
    expect(mode.stderr).toMatch(/^rt-translate: --mode expects one of 'fast' or 'slow'/);
  });
});

describe('rt-translate dub', () => {
  const dubbed = (tag: string): Buffer =>
    encodeFlac(synthesizeSpeechPcm(SENTENCES.map((s) => `[${tag}] ${s}`).join(' '), { sampleRate: 24_000 }), { sampleRate: 24_000, channels: 1 });

  it('prints one JSON line per language', async () => {
    const result = await cli(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es,fr-fr']);
    expect(result.code).toBe(0);
    expect(lines(result.stderr)).toEqual(taskLines('dub'));
    const outputs = lines(result.stdout).map((l) => JSON.parse(l) as { language: string; audioUrl: string; videoUrl: null });
    expect(outputs.map((o) => [o.language, o.videoUrl])).toEqual([
      ['es-es', null],
      ['fr-fr', null],
    ]);
  });

  it('-o DIR downloads the dubbed audio (resuming a cut) and --transcript each transcript', async () => {
    const out = join(dir, 'dubbed');
    await mkdir(out);
    const { runId } = await createdForLater(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'it-it'], 'dub');
    await fetch(`${emu.baseUrl}/_emulator/file-faults`, { method: 'POST', body: JSON.stringify({ dropAfterBytes: 4000, count: 1 }) });
    const result = await cli(['dub', '--run', String(runId), '--to', 'it-it', '-o', out, '--transcript', 'srt']);
    expect(result.code).toBe(0);
    expect(lines(result.stdout)).toEqual([join(out, `dub-${runId}-it-it.flac`), join(out, `dub-${runId}-it-it.srt`)]);
    expect(lines(result.stderr)).toEqual([`rt-translate: audio of run ${runId}: the connection was lost; going on from byte 4000`]);
    expect((await readFile(join(out, `dub-${runId}-it-it.flac`))).equals(dubbed('it-it'))).toBe(true);
    expect((await readFile(join(out, `dub-${runId}-it-it.srt`), 'utf8')).split('\n')[2]).toBe('[it-it] Hello, this is a test of live translation.');
    expect((await readdir(out)).sort()).toEqual([`dub-${runId}-it-it.flac`, `dub-${runId}-it-it.srt`]);
  });

  it('usage errors before any request', async () => {
    const [to, transcript, run] = await Promise.all([
      cli(['dub', '--url', MEDIA, '--from', 'en-us']),
      cli(['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '--transcript', 'srt']),
      cli(['dub', '--run', 'x']),
    ]);
    expect(to.stderr).toBe('rt-translate: --to TAG[,TAG...] is required (see --help).\n');
    expect(transcript.stderr).toBe('rt-translate: --transcript needs -o DIR to write the transcripts into.\n');
    expect(run.stderr).toBe('rt-translate: --run expects an integer >= 1 (got "x").\n');
  });
});

describe('rt-translate subtitles', () => {
  it('one language to stdout; every language into a directory', async () => {
    const one = await cli(['subtitles', '--url', MEDIA, '--from', 'en-us', '--to', 'de-de']);
    expect(one.code).toBe(0);
    expect(lines(one.stderr)).toEqual(taskLines('sub'));
    expect(lines(one.stdout).slice(0, 3)).toEqual(['1', '00:00:00,320 --> 00:00:02,620', '[de-de] Hello, this is a test of live translation.']);
    const out = join(dir, 'subs');
    await mkdir(out);
    const all = await cli(['subtitles', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es', '-o', out, '-f', 'vtt']);
    const written = lines(all.stdout);
    expect(written.map((p) => p.slice(out.length + 1))).toEqual([expect.stringMatching(/^sub-\d+-en-us\.vtt$/), expect.stringMatching(/^sub-\d+-es-es\.vtt$/)]);
    expect((await readFile(written[1]!, 'utf8')).startsWith('WEBVTT\n\n00:00:00.320 --> 00:00:02.620\n[es-es] Hello')).toBe(true);
  });

  it('--no-wait prints the task; task-status --wait its run; --run RUN the subtitles', async () => {
    const { runId } = await createdForLater(['subtitles', '--url', MEDIA, '--from', 'en-us', '--to', 'de-de'], 'sub');
    const result = await cli(['subtitles', '--run', String(runId), '--to', 'de-de']);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(lines(result.stdout).slice(0, 3)).toEqual(['1', '00:00:00,320 --> 00:00:02,620', '[de-de] Hello, this is a test of live translation.']);
  });
});

describe('--no-wait needs a service that outlives the command', () => {
  const REFUSAL =
    'rt-translate: --no-wait leaves the task to later commands (task-status, then --run), which need the service that made it, ' +
    'but no base URL is configured, and the embedded emulator remembers nothing between commands here ' +
    '(neither XDG_STATE_HOME nor HOME is set to an absolute directory): it could only answer 404. ' +
    'Set XDG_STATE_HOME or HOME, point --base-url (or RT_TRANSLATE_BASE_URL) at the service, or run `rt-translate emulator` in another terminal and use its baseUrl ' +
    "for the task's whole life.\n";

  it.each([
    ['translate-text', ['translate-text', '--from', 'en-us', '--to', 'es-es', 'Later']],
    ['transcribe', ['transcribe', '-i', FIXTURE, '--language', 'en-us']],
    ['dub', ['dub', '--url', MEDIA, '--from', 'en-us', '--to', 'es-es']],
    ['subtitles', ['subtitles', '--url', MEDIA, '--from', 'en-us']],
    ['voices design', ['voices', 'design', '--text', 'Hello.', '--description', VOICE_DESCRIPTION]],
    ['translated-tts', ['translated-tts', '--text', 'Hello.', '--from', 'en-us', '--to', 'es-es']],
    ['translated-tts --emulator', ['translated-tts', '--text', 'Hello.', '--from', 'en-us', '--to', 'es-es', '--emulator']],
  ])('%s --no-wait without a base URL nor a state directory: a usage error (exit 2) before the embedded emulator starts', async (_name, args) => {
    // No XDG_STATE_HOME, no HOME: the embedded emulator could remember nothing.
    const result = await cli([...args, '--no-wait'], { env: { RT_TRANSLATE_API_KEY: KEY } });
    expect(result.code).toBe(2);
    expect(result.stdout.length).toBe(0);
    // Only the refusal: no "using the embedded emulator" line, no task.
    expect(result.stderr).toBe(REFUSAL);
  });
});

describe('deprecations, said in plain words', () => {
  const service = (): Record<string, string> => ({ RT_TRANSLATE_BASE_URL: emu.baseUrl, RT_TRANSLATE_API_KEY: KEY });

  it('a full run of translate-text --stream (a process of its own) says it in exactly one plain line, and Node adds nothing', async () => {
    const result = await runCli(['translate-text', '--stream', '--from', 'en-us', '--to', 'es-es', 'Hello there'], { env: service() });
    expect(result.code).toBe(0);
    expect(result.stdout.toString()).toBe('[es-es] Hello there\n');
    expect(result.stderr).toBe(`${STREAM_DEPRECATED}\n`);
  });

  it('each run says it once, and only the run that used it, even with runs side by side in one process', async () => {
    const [streamed, plain] = await Promise.all([
      runInProcess(['translate-text', '--stream', '--from', 'en-us', '--to', 'fr-fr', 'One'], { env: service() }),
      runInProcess(['translate-text', '--from', 'en-us', '--to', 'fr-fr', 'Two', '--poll-ms', '10'], { env: service() }),
    ]);
    expect(streamed.stderr).toBe(`${STREAM_DEPRECATED}\n`);
    expect(plain.code).toBe(0);
    expect(plain.stderr).not.toContain('deprecated');
    const again = await runInProcess(['translate-text', '--stream', '--from', 'en-us', '--to', 'fr-fr', 'Three'], { env: service() });
    expect(again.stderr).toBe(`${STREAM_DEPRECATED}\n`);
  });

  it('--help marks --stream deprecated', async () => {
    const help = (await cli(['translate-text', '--help'])).stdout.toString();
    expect(help).toMatch(/\n {2}--stream {14}deprecated by the service \(said on stderr when used\): one text\n/);
  });
});

describe('help of the HTTP commands', () => {
  it('each command has --help (exit 0) naming its flags and the service flags', async () => {
    for (const command of Object.keys(ENTRIES)) {
      const result = await cli([command, '--help']);
      expect(result.code).toBe(0);
      expect(result.stderr).toBe('');
      expect(result.stdout.toString()).toMatch(new RegExp(`^Usage: rt-translate ${command} `));
      expect(result.stdout.toString()).toContain('--base-url URL');
    }
  });

  it('each command offers --api-key-file and says to prefer it or the environment to --api-key', async () => {
    for (const command of Object.keys(ENTRIES)) {
      const help = (await cli([command, '--help'])).stdout.toString();
      expect(help, command).toMatch(/--api-key-file PATH {3}the API key from a file \('-': standard input\)\n/);
      expect(help, command).toMatch(/--api-key KEY {9}the API key; other users can see it in 'ps': prefer\n {24}RT_TRANSLATE_API_KEY or --api-key-file/);
    }
  });

  it('the top-level usage lists every command (the one spawned case)', async () => {
    const top = (await runCli(['--help'])).stdout.toString();
    for (const command of Object.keys(ENTRIES)) expect(top).toContain(`rt-translate ${command} `);
  });
});

/** Arguments each HTTP command needs to get as far as its service flags. */
const MINIMAL_ARGS: Record<string, string[]> = {
  voices: [],
  languages: [],
  'translate-text': ['--from', 'en-us', '--to', 'es-es', 'Hello'],
  transcribe: ['-i', FIXTURE, '--language', 'en-us'],
  dub: ['--url', MEDIA, '--from', 'en-us', '--to', 'es-es'],
  subtitles: ['--url', MEDIA, '--from', 'en-us'],
  'task-status': ['sub', 'some-task'],
  tts: ['--text', 'Hello there', '--language', 'en-us', '-o', '-'],
  'translated-tts': ['--text', 'Hello', '--from', 'en-us', '--to', 'es-es', '-o', '-'],
  separate: ['-i', FIXTURE],
  'separate-results': ['1', '2'],
};

describe('the API key from a file: --api-key-file', () => {
  const service = (): Record<string, string> => ({ RT_TRANSLATE_BASE_URL: emu.baseUrl });

  it('every HTTP command reads it, before any request: a missing file is a usage error', async () => {
    expect(Object.keys(MINIMAL_ARGS).sort()).toEqual(Object.keys(ENTRIES).sort());
    for (const [command, args] of Object.entries(MINIMAL_ARGS)) {
      const result = await runInProcess([command, ...args, '--api-key-file', join(dir, 'no-such-key')], { env: service() });
      expect(result.stderr, command).toBe(`rt-translate: cannot read --api-key-file ${join(dir, 'no-such-key')}: no such file. [RTT_FILE]\n`);
      expect(result.code, command).toBe(2);
    }
  });

  it('PATH (relative to the working directory) or - for standard input; the key is used and never shown', async () => {
    await writeFile(join(dir, 'key.txt'), `${KEY}\n`);
    await writeFile(join(dir, 'wrong-key.txt'), 'sk-cli-service-wrong-8f3a\n');
    const [fromFile, fromStdin, wrong] = await Promise.all([
      runInProcess(['languages', '--api-key-file', 'key.txt'], { env: service(), cwd: dir }),
      runInProcess(['tts', '--text', 'Hello there', '--language', 'en-us', '-o', '-', '--api-key-file', '-'], {
        env: service(),
        stdin: Buffer.from(`${KEY}\n`),
      }),
      runInProcess(['languages', '--api-key-file', join(dir, 'wrong-key.txt')], { env: service() }),
    ]);
    expect(fromFile.code).toBe(0);
    expect(lines(fromFile.stdout)).toContain('1\ten-us\tEnglish (United States)');
    expect(fromStdin.code).toBe(0);
    expect(fromStdin.stdout.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/was refused with 401: .* \[RTT_AUTH\]\n$/);
    expect(wrong.stderr).not.toContain('sk-cli-service-wrong-8f3a');
    for (const result of [fromFile, fromStdin]) {
      expect(result.stderr).not.toContain(KEY);
      expect(result.stdout.includes(KEY)).toBe(false);
    }
  });

  it("- is refused where standard input carries the command's own input, and with --api-key", async () => {
    const [recording, voice, texts, both] = await Promise.all([
      runInProcess(['transcribe', '-i', '-', '--language', 'en-us', '--api-key-file', '-'], { env: service(), stdin: Buffer.from(`${KEY}\n`) }),
      runInProcess(['voices', 'create', '--name', 'x', '--gender', '1', '--file', '-', '--api-key-file', '-'], { env: service() }),
      runInProcess(['translate-text', '--from', 'en-us', '--to', 'es-es', '--api-key-file', '-'], { env: service() }),
      runInProcess(['languages', '--api-key', KEY, '--api-key-file', 'key.txt'], { env: service() }),
    ]);
    expect(recording.stderr).toBe('rt-translate: --api-key-file - reads the key from standard input, so the recording must come from a file: pass -i PATH.\n');
    expect(voice.stderr).toBe('rt-translate: --api-key-file - reads the key from standard input, so the recording must come from a file: pass --file PATH.\n');
    expect(texts.stderr).toBe('rt-translate: --api-key-file - reads the key from standard input, so the texts must come as arguments or from --file PATH.\n');
    expect(both.stderr).toBe('rt-translate: give the key once: --api-key or --api-key-file, not both.\n');
    for (const result of [recording, voice, texts, both]) expect(result.code).toBe(2);
  });
});

describe("messages name the flags, not the library's options", () => {
  it('a base URL that cannot be used: --base-url or the variable, and --allow-insecure', async () => {
    for (const [command, args] of Object.entries(MINIMAL_ARGS)) {
      const [flag, variable, plain] = await Promise.all([
        runInProcess([command, ...args, '--base-url', 'nope'], { env: { RT_TRANSLATE_API_KEY: KEY } }),
        runInProcess([command, ...args], { env: { RT_TRANSLATE_API_KEY: KEY, RT_TRANSLATE_BASE_URL: 'nope' } }),
        runInProcess([command, ...args, '--base-url', 'http://service.example.com/apis'], { env: { RT_TRANSLATE_API_KEY: KEY } }),
      ]);
      expect(flag.stderr, command).toBe('rt-translate: Invalid --base-url: expected an absolute https:// URL. [RTT_CONFIG]\n');
      expect(variable.stderr, command).toBe('rt-translate: Invalid RT_TRANSLATE_BASE_URL: expected an absolute https:// URL. [RTT_CONFIG]\n');
      expect(plain.stderr, command).toBe(
        'rt-translate: Refusing plain-text http:// to service.example.com, which is not a loopback host: use https://, ' +
          'or pass --allow-insecure if you really mean it. [RTT_CONFIG]\n',
      );
      for (const result of [flag, variable, plain]) expect(result.code, command).toBe(2);
    }
  });

  it.each([
    [
      'tts',
      ['--text', 'Hello there', '--language', 'xx-yy', '-o', '-'],
      /^rt-translate: POST \/tts-stream was rejected with 422 \(validation\): --language: Value error, unsupported language "xx-yy"/,
      1,
    ],
    ['translated-tts', ['--text', 'Hello', '--from', 'en-us', '--to', 'xx-yy', '-o', '-'], /: --to: Value error, unsupported language "xx-yy"/, 1],
    ['translated-tts', ['--text', 'Hello', '--from', 'xx-yy', '--to', 'es-es', '-o', '-'], /: --from: Value error, unsupported language "xx-yy"/, 1],
    ['subtitles', ['--url', MEDIA, '--from', 'xx-yy'], /^rt-translate: POST \/sub was rejected with 422 \(validation\): --from: Value error/, 1],
    [
      'translate-text',
      ['--from', 'en-us', '--to', 'xx-yy', 'Hello'],
      /^rt-translate: --to expects a language the service lists as a target language .*see rt-translate languages --target\), or its numeric id \(got "xx-yy"\)\.$/,
      2,
    ],
    [
      'transcribe',
      ['-i', FIXTURE, '--language', 'xx-yy'],
      /^rt-translate: --language expects a language the service lists as a source language .*\(got "xx-yy"\)\.$/,
      2,
    ],
    ['dub', ['--url', MEDIA, '--from', 'en-us', '--to', 'es-es,xx-yy'], /^rt-translate: --to expects a language .*\(got "xx-yy"\)\.$/, 2],
    [
      'voices',
      ['create', '--name', 'x', '--gender', '1', '--file', FIXTURE, '--language', 'xx-yy'],
      /^rt-translate: --language expects a language .*\(got "xx-yy"\)\.$/,
      2,
    ],
  ])('%s %j: an unsupported language is named by its flag', async (command, args, message, code) => {
    const result = await runInProcess([command, ...args], { env: { RT_TRANSLATE_BASE_URL: emu.baseUrl, RT_TRANSLATE_API_KEY: KEY } });
    expect(result.stderr.trimEnd()).toMatch(message);
    expect(result.stderr).not.toMatch(/body\.|targetLanguage|sourceLanguage|Invalid language|listLanguages/);
    expect(result.code).toBe(code);
  });
});

describe('rt-translate emulator --cloned-voice', () => {
  it('every accepted key owns the voice: the realtime stream takes it, voices delete deletes it', async () => {
    const stop = new AbortController();
    let out = '';
    let listening!: () => void;
    const ready = new Promise<void>((resolve) => (listening = resolve));
    const io = {
      stdin: Readable.from([]),
      stdout: new Writable({
        write(chunk: Buffer, _e, cb) {
          out += chunk.toString();
          if (out.includes('\n')) listening();
          cb();
        },
      }),
      stderr: new Writable({ write: (_c, _e, cb) => cb() }),
      env: {},
    } as CliIo;
    const ended = runEmulator(['--api-key', KEY, '--cloned-voice', '5001', '--cloned-voice', '5002'], io, stop.signal);
    await ready;
    const { baseUrl, realtimeUrl } = JSON.parse(out) as { baseUrl: string; realtimeUrl: string };
    try {
      const fixture = loadSpeechFixture();
      const stream = new RealtimeTranslateStream({ from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl, voiceId: 5002, quietPeriodMs: 200 });
      await pipeline(Readable.from([fixture.pcm.subarray(0, 96_000)]), stream, new Writable({ write: (_c, _e, cb) => cb() }));
      expect(stream.session?.voice).toEqual({ type: 'cloned', voiceId: 5002 });
      const deleted = await runCommand(runVoices, ['delete', '5001'], { env: { RT_TRANSLATE_BASE_URL: baseUrl, RT_TRANSLATE_API_KEY: KEY } });
      expect(deleted.stdout.toString()).toBe('deleted voice 5001\n');
      const bad = await runCommand(runEmulator, ['--cloned-voice', 'abc']);
      expect(bad).toMatchObject({ code: 2, stderr: 'rt-translate: --cloned-voice expects a positive integer voice id (got "abc").\n' });
    } finally {
      stop.abort();
      expect(await ended).toBe(0);
    }
  });
});
