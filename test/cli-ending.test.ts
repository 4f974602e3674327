/**
 * `rt-translate --from en-us --to es-es` against the independent reference server, the way people
 * run it: a WAV or raw file with -i or on standard input, sent as fast as it can be read, WAV or
 * raw out, binary or JSON output frames, a cold start, configuration from the environment, text
 * only, --events, converted inputs, and speech spoken sentence by sentence. With the default
 * quiet period (3 s), each session must exit 0 within that period after the service's last
 * answer whatever its segmentation, and exit 3, saying how much speech went unanswered, only
 * when speech sent after the service's last answer began never got one.
 */
import { readFile } from 'node:fs/promises';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, it, type TestContext } from 'vitest';
import { encodeMulaw } from '../lib/audio/g711.js';
import { runInProcess, runSpoken, startInProcessEmulator, type CliResult } from './helpers/cli.js';
import { loadSpeechFixture } from './helpers/speech.js';
import { spokenFixture } from './helpers/spoken.js';
import { startReferenceServer, type ReferenceServer, type ReferenceServerOptions } from './reference-server/index.js';

const fixture = loadSpeechFixture();
/** The command's default quiet period. */
const QUIET_MS = 3000;
/** Slack for a busy machine between the last answer and the command's return. */
const SLACK_MS = 2000;
const dir = mkdtempSync(join(tmpdir(), 'rtt-cli-ending-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

async function reference(ctx: TestContext, options: ReferenceServerOptions = {}): Promise<ReferenceServer> {
  const server = await startReferenceServer(options);
  ctx.onTestFinished(() => server.close());
  return server;
}

/** The flags that point the command at `server`. */
function at(server: ReferenceServer): string[] {
  return ['--realtime-url', server.realtimeUrl, '--api-key', server.apiKey];
}

/** Runs the command to completion; `exitAfterLastMs` is from the server's last answer to the return. */
async function timed(run: Promise<CliResult>, server: ReferenceServer): Promise<CliResult & { exitAfterLastMs: number | undefined }> {
  const result = await run;
  const exitAt = Date.now();
  const last = server.responses.at(-1);
  return { ...result, exitAfterLastMs: last ? exitAt - last.doneAt : undefined };
}

/** Exit 0, everything the server sent written, no warning, the return within one quiet period of the last answer. */
function expectComplete({ expect }: TestContext, result: CliResult & { exitAfterLastMs: number | undefined }, written: Buffer, server: ReferenceServer): void {
  expect(result.stderr).not.toMatch(/warning|incomplete/);
  expect(result.code).toBe(0);
  expect(server.responses.length).toBeGreaterThan(0);
  expect(written.equals(server.sentAudio())).toBe(true);
  expect(result.exitAfterLastMs).toBeGreaterThanOrEqual(QUIET_MS - 10);
  expect(result.exitAfterLastMs).toBeLessThan(QUIET_MS + SLACK_MS);
}

function outPath(name: string): string {
  return join(dir, `${files++}-${name}`);
}

/** The data of a canonical 44-byte-header WAV the command wrote. */
async function wavData(path: string): Promise<Buffer> {
  return (await readFile(path)).subarray(44);
}

const FROM_TO = ['--from', 'en-us', '--to', 'es-es'];

describe.concurrent('a file sent as fast as it is read ends one quiet period after the last answer, exit 0', () => {
  it('a. piped raw PCM, answered in one response once the appends stop (JSON frames)', async (ctx) => {
    const server = await reference(ctx, { answer: 'idle' });
    const result = await timed(runInProcess([...FROM_TO, ...at(server)], { stdin: fixture.pcm }), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(server.responses).toHaveLength(1);
  });

  it('a. -i WAV -o WAV, answered in one response, binary frames', async (ctx) => {
    const server = await reference(ctx, { answer: 'idle', audio: 'binary' });
    const out = outPath('a.wav');
    const result = await timed(runInProcess([...FROM_TO, ...at(server), '-i', fileOf('speech.wav', fixture.wav), '-o', out]), server);
    expectComplete(ctx, result, await wavData(out), server);
  });

  it('b. answered utterance by utterance after the input ended (binary frames)', async (ctx) => {
    const server = await reference(ctx, { answer: 'utterance', audio: 'binary' });
    const result = await timed(runInProcess([...FROM_TO, ...at(server)], { stdin: fixture.pcm }), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(server.responses).toHaveLength(3);
  });

  it('e. each long sentence split into two responses', async (ctx) => {
    const server = await reference(ctx, { answer: 'split' });
    const result = await timed(runInProcess([...FROM_TO, ...at(server)], { stdin: fixture.pcm }), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(server.responses.length).toBeGreaterThan(3);
  });

  it('e. two of three sentences merged into one response', async (ctx) => {
    const server = await reference(ctx, { answer: 'merge', mergeCount: 2 });
    const result = await timed(runInProcess([...FROM_TO, ...at(server)], { stdin: fixture.pcm }), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(server.responses).toHaveLength(2);
  });

  it('a cold start, configured from the environment', async (ctx) => {
    const server = await reference(ctx, { answer: 'idle', coldStartMs: 1000 });
    const env = { RT_TRANSLATE_REALTIME_URL: server.realtimeUrl, RT_TRANSLATE_API_KEY: server.apiKey };
    const result = await timed(runInProcess(FROM_TO, { stdin: fixture.pcm, env }), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(result.stderr).toMatch(/the service is starting/);
  });

  it('text only: a text-only session ends at its last text.done, one quiet period later', async (ctx) => {
    const server = await reference(ctx, { answer: 'idle' });
    const result = await timed(runInProcess([...FROM_TO, ...at(server), '--text-only'], { stdin: fixture.pcm }), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(result.stderr).toMatch(/^translation \(es-es\): \[es-es\] response 1 of session 1$/m);
  });

  it.for([
    ['48 kHz stereo s16le', ['-f', 's16le', '--ar', '48000', '--ac', '2'], stereo48k(fixture.pcm)],
    ['8 kHz mu-law', ['-f', 'mulaw'], mulaw8k(fixture.pcm)],
  ] as const)('a converted input (%s), answered in one response', async ([, flags, input], ctx) => {
    const server = await reference(ctx, { answer: 'idle' });
    const result = await timed(runInProcess([...FROM_TO, ...at(server), ...flags], { stdin: input }), server);
    expectComplete(ctx, result, result.stdout, server);
  });

  it("--events: every event the service sent, under the library name with its wire name, then the command's own", async (ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, { answer: 'split', audio: 'binary' });
    const events = outPath('events.jsonl');
    const result = await timed(runInProcess([...FROM_TO, ...at(server), '--events', events, '--stats'], { stdin: fixture.pcm }), server);
    expectComplete(ctx, result, result.stdout, server);
    const lines = (await readFile(events, 'utf8'))
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const own = new Set(['response', 'reconnecting', 'reconnected', 'warning', 'ended', 'stats']);
    for (const line of lines) {
      expect(typeof line.type).toBe('string');
      expect('wireType' in line).toBe(!own.has(line.type as string));
    }
    const wire = lines.filter((l) => !own.has(l.type as string)).map((l) => `${l.type} ${l.wireType}`);
    const responses = server.responses.length;
    expect(wire.slice(0, 2)).toEqual(['session.created session.created', 'session.updated session.updated']);
    expect(wire.filter((w) => w === 'transcript.done conversation.item.input_audio_transcription.completed')).toHaveLength(responses);
    expect(wire.filter((w) => w === 'text.done response.text.done')).toHaveLength(responses);
    expect(wire.filter((w) => w === 'audio.done response.audio.done')).toHaveLength(responses);
    const audio = lines.filter((l) => l.type === 'audio.delta');
    expect(audio.every((l) => l.wireType === 'binary')).toBe(true);
    expect(audio.reduce((sum, l) => sum + (l.bytes as number), 0)).toBe(server.sentAudio().length);
    expect(lines.filter((l) => l.type === 'response')).toHaveLength(responses);
    expect(lines.slice(-2).map((l) => l.type)).toEqual(['ended', 'stats']);
    expect(lines.at(-2)).toEqual({ type: 'ended', complete: true, unansweredSpeechMs: 0 });
  });
});

describe.concurrent("sentences spoken one after the other's answer began", () => {
  it('c. the last one answered 8 s after the input ended: written, exit 0', { timeout: 30_000 }, async (ctx) => {
    const server = await reference(ctx, { last: { lateMs: 8000 } });
    const result = await timed(runSpoken([...FROM_TO, ...at(server)], parts()), server);
    expectComplete(ctx, result, result.stdout, server);
    ctx.expect(server.responses.at(-1)!.doneAt - server.responses.at(-2)!.doneAt).toBeGreaterThanOrEqual(8000);
  });

  it('d. each answered promptly: exit 0 one quiet period after the last', async (ctx) => {
    const server = await reference(ctx, { answer: 'utterance', audio: 'binary' });
    const result = await timed(runSpoken([...FROM_TO, ...at(server)], parts()), server);
    expectComplete(ctx, result, result.stdout, server);
  });

  it('f. the last one never answered: exit 3 after --stall-ms, the answers that came written, how much went unanswered said', async (ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, { last: 'never' });
    const result = await timed(runSpoken([...FROM_TO, ...at(server), '--stall-ms', '2000'], parts()), server);
    expect(result.code).toBe(3);
    expect(result.stdout.equals(server.sentAudio())).toBe(true);
    expect(server.responses).toHaveLength(2);
    expect(result.exitAfterLastMs).toBeGreaterThanOrEqual(2000);
    expect(result.stderr).toMatch(
      /^rt-translate: warning: The service did not answer 0\.\d s of speech sent after its last response began within 2000 ms after end\(\); closing without it\.$/m,
    );
    expect(result.stderr).toMatch(/^rt-translate: sent 8\.3 s of audio, received [\d.]+ s in 2 responses\.$/m);
  });
});

describe.concurrent('g. no speech', () => {
  it('silence only: exit 0 one quiet period after the service read it, nothing written', async (ctx) => {
    const server = await reference(ctx);
    const started = Date.now();
    const result = await runInProcess([...FROM_TO, ...at(server)], { stdin: Buffer.alloc(3 * 48_000) });
    ctx.expect(result.code).toBe(0);
    ctx.expect(result.stdout.length).toBe(0);
    // It waited one quiet period after the service had read the silence, and no longer.
    ctx.expect(Date.now() - started).toBeGreaterThanOrEqual(QUIET_MS - 10);
    ctx.expect(Date.now() - started).toBeLessThan(QUIET_MS + SLACK_MS);
  });

  it('a 1-byte input: exit 2, less than one sample frame is no audio, before any connection', async (ctx) => {
    const server = await reference(ctx);
    const result = await runInProcess([...FROM_TO, ...at(server)], { stdin: Buffer.from([1]) });
    ctx.expect(result.code).toBe(2);
    ctx.expect(result.stdout.length).toBe(0);
    ctx
      .expect(result.stderr)
      .toBe('rt-translate: No audio in standard input: it holds 1 byte, less than one sample frame (2 bytes of s16le mono). [RTT_INPUT]\n');
    ctx.expect(server.sessions).toBe(0);
  });

  it('an empty WAV: exit 2, saying there is no audio, before any connection', async (ctx) => {
    const server = await reference(ctx);
    const result = await runInProcess([...FROM_TO, ...at(server), '-i', fileOf('empty.wav', fixture.wav.subarray(0, 44).fill(0, 40, 44))]);
    ctx.expect(result.code).toBe(2);
    ctx.expect(result.stderr).toMatch(/No audio/);
    ctx.expect(server.sessions).toBe(0);
  });
});

describe.concurrent('against `rt-translate emulator` in its segmentation modes', () => {
  /** The emulator command with `flags`, stopped when the test ends. */
  async function emulatorWith(ctx: TestContext, flags: string[]) {
    const emulator = await startInProcessEmulator(['--api-key', 'cli-ending-key', ...flags]);
    ctx.onTestFinished(async () => void (await emulator.stop()));
    return ['--realtime-url', emulator.realtimeUrl, '--api-key', 'cli-ending-key'];
  }

  /** The time from the last translation line to the command's return. */
  async function afterLastLine(run: (onStderr: (text: string) => void) => Promise<CliResult>): Promise<CliResult & { afterMs: number }> {
    let lastAt = 0;
    const result = await run((text) => {
      if (/^translation \(/m.test(text)) lastAt = Date.now();
    });
    return { ...result, afterMs: Date.now() - lastAt };
  }

  it('a. --segmentation idle, through a drop in the middle (--drop-after-input-ms 4000): exit 0 one quiet period after the answer', async (ctx) => {
    const { expect } = ctx;
    const access = await emulatorWith(ctx, ['--segmentation', 'idle', '--drop-after-input-ms', '4000']);
    const result = await afterLastLine((onStderr) => runInProcess([...FROM_TO, ...access], { stdin: fixture.pcm, onStderr }));
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^rt-translate: reconnected after /m);
    expect(result.stderr).toMatch(/^translation \(es-es\): \[es-es translation of utterances 1-3/m);
    expect(result.stderr).not.toMatch(/warning|incomplete/);
    expect(result.afterMs).toBeGreaterThanOrEqual(QUIET_MS - 10);
    expect(result.afterMs).toBeLessThan(QUIET_MS + SLACK_MS);
  });

  it('f. --never-answer-last, spoken: exit 3 after --stall-ms, saying how much speech went unanswered', async (ctx) => {
    const { expect } = ctx;
    const access = await emulatorWith(ctx, ['--never-answer-last']);
    const result = await runSpoken([...FROM_TO, ...access, '--stall-ms', '2000'], parts());
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/^rt-translate: warning: The service did not answer \d\.\d s of speech sent after its last response began within 2000 ms/m);
    expect(result.stderr).toMatch(/^rt-translate: sent 8\.3 s of audio, received [\d.]+ s in 2 responses\.$/m);
  });
});

function parts() {
  return spokenFixture().map((part) => ({
    audio: part.audio,
    when: (stderr: string) => (stderr.match(/^transcript \(/gm) ?? []).length >= part.afterTranscripts,
  }));
}

/** Writes `bytes` to a file of the test folder and returns its path. */
function fileOf(name: string, bytes: Buffer): string {
  const path = outPath(name);
  writeFileSync(path, bytes);
  return path;
}

/** PCM16 mono 24 kHz as 48 kHz stereo: each sample twice, in both channels. */
function stereo48k(pcm: Buffer): Buffer {
  const out = Buffer.alloc(pcm.length * 4);
  for (let i = 0; i < pcm.length / 2; i++) {
    const v = pcm.readInt16LE(i * 2);
    for (let k = 0; k < 4; k++) out.writeInt16LE(v, i * 8 + k * 2);
  }
  return out;
}

/** PCM16 mono 24 kHz as 8 kHz mu-law: every third sample. */
function mulaw8k(pcm: Buffer): Buffer {
  const out = Buffer.alloc(Math.floor(pcm.length / 6));
  for (let i = 0; i < out.length; i++) out[i] = encodeMulaw(pcm.readInt16LE(i * 6));
  return out;
}
