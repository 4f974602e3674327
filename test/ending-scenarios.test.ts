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
import { startEmulator, type EmulatorOptions } from '../lib/emulator/server.js';
import { answerVariants, answersIn, chunked, loadSpeechFixture } from './helpers/speech.js';
import { speak, spokenFixture } from './helpers/spoken.js';
import { startReferenceServer, type ReferenceServer, type ReferenceServerOptions } from './reference-server/index.js';

const fixture = loadSpeechFixture();
const KEY = 'ending-scenarios-key';
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
    else
      yield* speak(
        spokenFixture(),
        () => transcripts,
        () => once(stream, 'transcript.done'),
      );
    inputEndAt = Date.now();
  }
  const outcome = await runSession(stream, input(), events);
  return { ...outcome, stream, lastDoneAt, endedAt, inputEndAt };
}

function open(ctx: TestContext, server: ReferenceServer, reconnect = false): RealtimeTranslateStream {
  return openAt(ctx, server.realtimeUrl, server.apiKey, reconnect);
}

function openAt(ctx: TestContext, realtimeUrl: string, apiKey: string, reconnect: boolean): RealtimeTranslateStream {
  const stream = new RealtimeTranslateStream({
    from: 'en-us',
    to: 'es-es',
    apiKey,
    realtimeUrl,
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

/** A complete session: no warning, ended one quiet period after the last answer. */
function expectComplete({ expect }: TestContext, run: Timed): void {
  expect(run.error).toBeUndefined();
  expect(run.warnings).toEqual([]);
  expect(run.stream.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
  const after = run.endedAt - (run.lastDoneAt ?? run.inputEndAt);
  expect(after).toBeGreaterThanOrEqual(QUIET_MS - 10);
  expect(after).toBeLessThan(QUIET_MS + SLACK_MS);
}

interface Scenario {
  id: string;
  name: string;
  script: Script;
  /** How the reference server answers, and how the emulator does (the same behaviour, its own options). */
  reference: ReferenceServerOptions;
  emulator: EmulatorOptions;
  /** Also run through a drop in the middle of the input. */
  reconnect: boolean;
  /** The last sentence is never answered. */
  unanswered?: boolean;
}

const SCENARIOS: Scenario[] = [
  {
    id: 'a',
    name: 'a file, answered in one response once the appends stop',
    script: 'file',
    reference: { answer: 'idle' },
    emulator: { segmentation: 'idle' },
    reconnect: true,
  },
  {
    id: 'b',
    name: 'a file, answered utterance by utterance after the input ended',
    script: 'file',
    reference: { answer: 'utterance' },
    emulator: {},
    reconnect: false,
  },
  {
    id: 'c',
    name: 'spoken, the last sentence answered late',
    script: 'spoken',
    reference: { last: { lateMs: LATE_MS } },
    emulator: { lastAnswer: { lateMs: LATE_MS } },
    reconnect: true,
  },
  { id: 'd', name: 'spoken, each sentence answered promptly', script: 'spoken', reference: { answer: 'utterance' }, emulator: {}, reconnect: false },
  {
    id: 'e',
    name: 'a file, each long sentence split into two responses',
    script: 'file',
    reference: { answer: 'split' },
    emulator: { segmentation: 'split' },
    reconnect: false,
  },
  {
    id: 'e',
    name: 'spoken, each long sentence split into two responses',
    script: 'spoken',
    reference: { answer: 'split' },
    emulator: { segmentation: 'split' },
    reconnect: false,
  },
  {
    id: 'e',
    name: 'a file, two of three sentences merged into one response',
    script: 'file',
    reference: { answer: 'merge', mergeCount: 2 },
    emulator: { faults: { mergeUtterances: 2 } },
    reconnect: false,
  },
  {
    id: 'e',
    name: 'spoken, two of three sentences merged into one response',
    script: 'spoken',
    reference: { answer: 'merge', mergeCount: 2 },
    emulator: { faults: { mergeUtterances: 2 } },
    reconnect: false,
  },
  {
    id: 'f',
    name: 'spoken, the last sentence never answered',
    script: 'spoken',
    reference: { last: 'never' },
    emulator: { lastAnswer: 'never' },
    reconnect: true,
    unanswered: true,
  },
  { id: 'g', name: 'silence only', script: 'silence', reference: {}, emulator: {}, reconnect: false },
];

const CASES = SCENARIOS.flatMap((s) =>
  (['json', 'binary'] as const).flatMap((audio) => [
    { ...s, audio, drop: false, title: `${s.id}. ${s.name} (${audio} audio)` },
    ...(s.reconnect ? [{ ...s, audio, drop: true, title: `${s.id}. ${s.name} (${audio} audio, a drop in the middle)` }] : []),
  ]),
);

/** A drop after 4 s of input: in the middle of the second sentence, before any answer to a file. */
const DROP_AFTER_INPUT_MS = 4000;

/** The last sentence was heard after the service's last answer began, and never answered. */
function expectUnanswered({ expect }: TestContext, run: Timed): void {
  expect(run.error).toBeUndefined();
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
}

// Each case mostly waits (quiet periods, late answers, stall bounds): they run side by side.
describe.concurrent('against the reference server', () => {
  it.for(CASES.map((c) => [c.title, c] as const))('%s', async ([, { script, reference: options, audio, drop, unanswered }], ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, { ...options, audio, ...(drop ? { dropAfterInputMs: DROP_AFTER_INPUT_MS } : {}) });
    const run = await drive(open(ctx, server, drop), script);
    if (drop) {
      expect(server.sessions).toBe(2);
      expect(run.stream.stats.reconnects).toBe(1);
    }
    if (unanswered) {
      expect(run.output.equals(server.sentAudio())).toBe(true);
      expectUnanswered(ctx, run);
      return;
    }
    if (script === 'silence') expect(server.responses).toHaveLength(0);
    else expect(server.responses.length).toBeGreaterThan(0);
    // Every byte the server sent, delivered once, in order.
    expect(run.output.equals(server.sentAudio())).toBe(true);
    expectComplete(ctx, run);
    if (options.last !== undefined && options.last !== 'prompt' && options.last !== 'never') {
      // The late answer came well after the input ended, and the stream waited for it.
      expect(run.lastDoneAt! - run.inputEndAt).toBeGreaterThanOrEqual(LATE_MS);
    }
  });
});

describe.concurrent('against the emulator in each of its segmentation modes', () => {
  // What the emulator answers is the input's own voiced audio: the three sentences by its
  // measurement (after a reconnect, each as the session that heard it found it).
  const VARIANTS = answerVariants(fixture.pcm);

  it.for(CASES.map((c) => [c.title, c] as const))('%s', async ([, { script, emulator: options, audio, drop, unanswered }], ctx) => {
    const { expect } = ctx;
    const emulator = await startEmulator({
      apiKeys: [KEY],
      ...options,
      audioFrames: audio,
      faults: { ...options.faults, ...(drop ? { dropAfterInputMs: DROP_AFTER_INPUT_MS } : {}) },
    });
    ctx.onTestFinished(() => emulator.close());
    const run = await drive(openAt(ctx, emulator.realtimeUrl, KEY, drop), script);
    if (drop) expect(run.stream.stats.reconnects).toBe(1);
    // Every sentence answered (the last one not, when it never is), once, in order, byte for byte.
    const answered = script === 'silence' ? [] : unanswered ? VARIANTS.slice(0, 2) : VARIANTS;
    expect(answersIn(run.output, answered)).toEqual(answered.map(() => expect.any(Number)));
    if (unanswered) {
      expectUnanswered(ctx, run);
      return;
    }
    expectComplete(ctx, run);
    if (options.lastAnswer !== undefined && options.lastAnswer !== 'prompt' && options.lastAnswer !== 'never') {
      expect(run.lastDoneAt! - run.inputEndAt).toBeGreaterThanOrEqual(LATE_MS);
    }
  });
});
