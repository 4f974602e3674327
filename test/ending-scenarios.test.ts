/**
 * How a realtime session ends against services that segment speech their own way: the
 * independent reference server (`test/reference-server/`, which shares no code with `lib/`) in
 * each of its answering policies, and the emulator in each of its segmentation modes. Every
 * scenario runs with the output audio as JSON deltas and as binary frames, and the ones where
 * a drop matters also through a reconnect in the middle of the input:
 *
 * a. a file sent unpaced, answered in one response once the appends stop;
 * b. the same, answered utterance by utterance, back to back, after the input ended;
 * c. sentences spoken one after another's answer began, the last answered late;
 * d. the same, each answered promptly;
 * e. one sentence split into two responses, or two of three merged into one;
 * f. the service never answers the sentence spoken after its last response began;
 * g. silence only.
 *
 * Each complete session must deliver every byte the service sent and end one quiet period after
 * the last answer (not a stall bound later); the unanswered one must end after the stall bound,
 * incomplete, saying how much speech went unanswered.
 */
import { once } from 'node:events';
import { describe, it, type TestContext } from 'vitest';
import { RealtimeTranslateStream } from '../lib/realtime/realtime-translate-stream.js';
import { recordEvents, runSession, type SessionOutcome } from './helpers/realtime-session.js';
import { chunked, loadSpeechFixture } from './helpers/speech.js';
import { speak, spokenFixture } from './helpers/spoken.js';
import { startReferenceServer, type ReferenceServer, type ReferenceServerOptions } from './reference-server/index.js';

const fixture = loadSpeechFixture();
/** Short bounds so the suite is quick; the rule is the same at the defaults (see the CLI tests). */
const QUIET_MS = 500;
const STALL_MS = 3000;
/** How late a late last answer comes: several quiet periods. */
const LATE_MS = 2000;
/** Slack for a busy machine between an event and the stream's reaction to it. */
const SLACK_MS = 2000;

type Script = 'file' | 'spoken' | 'silence';

interface Timed extends SessionOutcome {
  stream: RealtimeTranslateStream;
  /** When the last response ended at the client, and when the session ended (Date.now()). */
  lastDoneAt: number | undefined;
  endedAt: number;
  /** When the last byte of input was written. */
  inputEndAt: number;
}

/** Runs the stream over `script`, timing the last answer and the end. */
async function drive(stream: RealtimeTranslateStream, script: Script): Promise<Timed> {
  const events = recordEvents(stream);
  let lastDoneAt: number | undefined;
  let endedAt = 0;
  let inputEndAt = 0;
  let transcripts = 0;
  stream.on('audio.done', () => (lastDoneAt = Date.now()));
  stream.on('transcript.done', () => transcripts++);
  stream.on('ended', () => (endedAt = Date.now()));
  async function* input(): AsyncGenerator<Buffer> {
    if (script === 'file') yield* chunked(fixture.pcm, [65_536]);
    else if (script === 'silence') yield Buffer.alloc(3 * 48_000);
    else yield* speak(spokenFixture(), () => transcripts, () => once(stream, 'transcript.done'));
    inputEndAt = Date.now();
  }
  const outcome = await runSession(stream, input(), events);
  return { ...outcome, stream, lastDoneAt, endedAt, inputEndAt };
}

function open(ctx: TestContext, server: ReferenceServer, reconnect = false): RealtimeTranslateStream {
  const stream = new RealtimeTranslateStream({
    from: 'en-us',
    to: 'es-es',
    apiKey: server.apiKey,
    realtimeUrl: server.realtimeUrl,
    quietPeriodMs: QUIET_MS,
    responseStallTimeoutMs: STALL_MS,
    reconnect: reconnect ? { initialDelayMs: 10, maxDelayMs: 40 } : false,
  });
  ctx.onTestFinished(() => void stream.destroy());
  return stream;
}

async function reference(ctx: TestContext, options: ReferenceServerOptions): Promise<ReferenceServer> {
  const server = await startReferenceServer(options);
  ctx.onTestFinished(() => server.close());
  return server;
}

/** A complete session: every byte delivered, no warning, ended one quiet period after the last answer. */
function expectComplete({ expect }: TestContext, run: Timed, sent: Buffer): void {
  expect(run.error).toBeUndefined();
  expect(run.warnings).toEqual([]);
  expect(run.output.length).toBe(sent.length);
  expect(run.output.equals(sent)).toBe(true);
  expect(run.stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  const after = run.endedAt - (run.lastDoneAt ?? run.inputEndAt);
  expect(after).toBeGreaterThanOrEqual(QUIET_MS - 10);
  expect(after).toBeLessThan(QUIET_MS + SLACK_MS);
}

interface Scenario {
  id: string;
  name: string;
  script: Script;
  server: ReferenceServerOptions;
  /** Also run through a drop in the middle of the input. */
  reconnect: boolean;
  unanswered?: boolean;
}

const SCENARIOS: Scenario[] = [
  { id: 'a', name: 'a file, answered in one response once the appends stop', script: 'file', server: { answer: 'idle' }, reconnect: true },
  { id: 'b', name: 'a file, answered utterance by utterance after the input ended', script: 'file', server: { answer: 'utterance' }, reconnect: false },
  { id: 'c', name: 'spoken, the last sentence answered late', script: 'spoken', server: { last: { lateMs: LATE_MS } }, reconnect: true },
  { id: 'd', name: 'spoken, each sentence answered promptly', script: 'spoken', server: { answer: 'utterance' }, reconnect: false },
  { id: 'e', name: 'a file, each long sentence split into two responses', script: 'file', server: { answer: 'split' }, reconnect: false },
  { id: 'e', name: 'spoken, each long sentence split into two responses', script: 'spoken', server: { answer: 'split' }, reconnect: false },
  { id: 'e', name: 'a file, two of three sentences merged into one response', script: 'file', server: { answer: 'merge', mergeCount: 2 }, reconnect: false },
  { id: 'e', name: 'spoken, two of three sentences merged into one response', script: 'spoken', server: { answer: 'merge', mergeCount: 2 }, reconnect: false },
  { id: 'f', name: 'spoken, the last sentence never answered', script: 'spoken', server: { last: 'never' }, reconnect: true, unanswered: true },
  { id: 'g', name: 'silence only', script: 'silence', server: {}, reconnect: false },
];

const CASES = SCENARIOS.flatMap((s) =>
  (['json', 'binary'] as const).flatMap((audio) => [
    { ...s, audio, drop: false, title: `${s.id}. ${s.name} (${audio} audio)` },
    ...(s.reconnect ? [{ ...s, audio, drop: true, title: `${s.id}. ${s.name} (${audio} audio, a drop in the middle)` }] : []),
  ]),
);

// Each case mostly waits (quiet periods, late answers, stall bounds): they run side by side.
describe.concurrent('against the reference server', () => {
  it.for(CASES.map((c) => [c.title, c] as const))('%s', async ([, { script, server: options, audio, drop, unanswered }], ctx) => {
    const { expect } = ctx;
    // A drop after 4 s of input: in the middle of the second sentence, before any answer to a file.
    const server = await reference(ctx, { ...options, audio, ...(drop ? { dropAfterInputMs: 4000 } : {}) });
    const run = await drive(open(ctx, server, drop), script);
    if (drop) {
      expect(server.sessions).toBe(2);
      expect(run.stream.stats.reconnects).toBe(1);
    }
    if (!unanswered) {
      if (script === 'silence') expect(server.responses).toHaveLength(0);
      else expect(server.responses.length).toBeGreaterThan(0);
      expectComplete(ctx, run, server.sentAudio());
      if (options.last !== undefined && options.last !== 'prompt' && options.last !== 'never') {
        // The late answer came well after the input ended, and the stream waited for it.
        expect(run.lastDoneAt! - run.inputEndAt).toBeGreaterThanOrEqual(LATE_MS);
      }
      return;
    }
    // The last sentence was heard after the service's last answer began, and never answered.
    expect(run.error).toBeUndefined();
    expect(run.output.equals(server.sentAudio())).toBe(true);
    const ending = run.stream.stats.ending!;
    expect(ending).toMatchObject({ complete: false, reason: 'speech-unanswered' });
    // Most of the third sentence (1.08 s, the first 200 ms of it sent before that answer began).
    expect(ending.unansweredSpeechMs).toBeGreaterThan(700);
    expect(ending.unansweredSpeechMs).toBeLessThan(1100);
    expect(run.warnings.map((w) => w.message)).toEqual([
      `The service did not answer ${(ending.unansweredSpeechMs / 1000).toFixed(1)} s of speech sent after its last response began within ${STALL_MS} ms after end(); closing without it.`,
    ]);
    expect(run.events.at(-1)).toMatchObject({ type: 'ended', complete: false, reason: 'speech-unanswered' });
    expect(run.endedAt - run.lastDoneAt!).toBeGreaterThanOrEqual(STALL_MS - 10);
  });
});
