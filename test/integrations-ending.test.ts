/**
 * Discord and Twilio end their sessions by the ending rule of the realtime stream, checked
 * against the independent reference server (`test/reference-server/`), which segments speech its
 * own way: a bot that stops listening and a call that hangs up finish one quiet period after the
 * service's last answer, complete, whether the service answered everything in one response or
 * split sentences in two; and when a sentence spoken after the service's last answer began is
 * never answered, the session ends after the stall bound, incomplete, saying so.
 */
import { once } from 'node:events';
import { describe, it, type TestContext } from 'vitest';
import { translateSpeaker, type OpusPacketInput } from '../lib/integrations/discord.js';
import type { RtTranslateError } from '../lib/errors.js';
import { TWILIO_FRAME_BYTES } from '../lib/integrations/twilio.js';
import { startTwilioBridgeServer, type TwilioCall } from '../examples/twilio-bridge.js';
import { packets, sentFrames } from './helpers/discord-speaker.js';
import { CALLER_FRAMES, FakeTwilio, MULAW, SERVICE, convert, groupByMark, padToFrames } from './helpers/fake-twilio.js';
import { spokenFixture } from './helpers/spoken.js';
import { startReferenceServer, type ReferenceServer, type ReferenceServerOptions } from './reference-server/index.js';

const QUIET_MS = 500;
const STALL_MS = 1500;
/** Slack for a busy machine between the last answer and the end. */
const SLACK_MS = 2000;
/** Where the spoken fixture's parts begin, in 24 kHz samples. */
const PART_STARTS = spokenFixture().map((_, i, parts) => parts.slice(0, i).reduce((sum, p) => sum + p.audio.length / 2, 0));

async function reference(ctx: TestContext, options: ReferenceServerOptions): Promise<ReferenceServer> {
  const server = await startReferenceServer(options);
  ctx.onTestFinished(() => server.close());
  return server;
}

/** Resolves once `emitter` has emitted `event` `n` times in all (`count()` says how many so far). */
async function atLeast(count: () => number, n: number, emitter: NodeJS.EventEmitter, event: string): Promise<void> {
  while (count() < n) await once(emitter, event);
}

const CASES = [
  ['answered in one response once the input stops', { answer: 'idle' }],
  ['each long sentence split in two responses, binary frames', { answer: 'split', audio: 'binary' }],
] as const;

describe.concurrent('Discord: a bot that stops listening', () => {
  const list = packets('opusscript');
  const all = sentFrames();
  /** The speaker's packets from frame index `from` (inclusive) to `to` (exclusive), with their RTP timestamps. */
  const items = (from = 0, to = Infinity): OpusPacketInput[] => all.filter((i) => i >= from && i < to).map((i) => ({ packet: list[i]!, timestamp: i * 960 }));

  function speaker(ctx: TestContext, server: ReferenceServer, opusPackets: Iterable<OpusPacketInput> | AsyncIterable<OpusPacketInput>) {
    const path = translateSpeaker({
      opusPackets,
      from: 'en-us',
      to: 'es-es',
      apiKey: server.apiKey,
      realtimeUrl: server.realtimeUrl,
      quietPeriodMs: QUIET_MS,
      responseStallTimeoutMs: STALL_MS,
      output: 'pcm',
      opusBackend: 'opusscript',
    });
    ctx.onTestFinished(() => void path.translator.destroy());
    const frames: Buffer[] = [];
    path.playback.on('data', (frame: Buffer) => frames.push(frame));
    const warnings: RtTranslateError[] = [];
    path.translator.on('warning', (warning) => warnings.push(warning));
    return { ...path, frames, warnings };
  }

  it.for(CASES)('%s: complete, one quiet period after the last answer', async ([, options], ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, options);
    const { translator, frames, warnings, done } = speaker(ctx, server, items());
    await done;
    const after = Date.now() - server.responses.at(-1)!.doneAt;
    expect(warnings).toEqual([]);
    expect(translator.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    expect(translator.stats.responses).toBe(server.responses.length);
    // Every translated sample, at 48 kHz stereo, in whole 20 ms frames.
    expect(frames.length).toBe(Math.ceil(server.sentAudio().length / 960));
    expect(after).toBeGreaterThanOrEqual(QUIET_MS - 10);
    expect(after).toBeLessThan(QUIET_MS + SLACK_MS);
  });

  it('a sentence spoken after the last answer began and never answered: incomplete after the stall bound, said', async (ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, { last: 'never' });
    let transcripts = 0;
    // Each part once the sentence before it has been answered (frame index = 24 kHz sample / 480).
    const starts = PART_STARTS.map((sample) => sample / 480);
    let path!: ReturnType<typeof speaker>;
    // eslint-disable-next-line prefer-const -- the spoken input reads `path` from inside the call that makes it
    path = speaker(
      ctx,
      server,
      (async function* spoken() {
        for (let part = 0; part < starts.length; part++) {
          await atLeast(() => transcripts, part, path.translator, 'transcript.done');
          yield* items(starts[part], starts[part + 1]);
        }
      })(),
    );
    path.translator.on('transcript.done', () => transcripts++);
    await path.done;
    expect(path.translator.stats.ending).toMatchObject({ complete: false, reason: 'speech-unanswered' });
    expect(path.warnings.map((w) => w.message)).toEqual([
      expect.stringMatching(/^The service did not answer \d\.\d s of speech sent after its last response began within 1500 ms/),
    ]);
    expect(Date.now() - server.responses.at(-1)!.doneAt).toBeGreaterThanOrEqual(STALL_MS - 10);
  });
});

describe.concurrent('Twilio: a call that hangs up', () => {
  /** A bridge server using `server`, and one call to it from Twilio's side, opened. */
  async function call(ctx: TestContext, server: ReferenceServer) {
    const warnings: RtTranslateError[] = [];
    let started!: (call: TwilioCall) => void;
    const made = new Promise<TwilioCall>((resolve) => (started = resolve));
    const bridge = await startTwilioBridgeServer({
      bridge: { from: 'en-us', to: 'es-es', apiKey: server.apiKey, realtimeUrl: server.realtimeUrl, quietPeriodMs: QUIET_MS, responseStallTimeoutMs: STALL_MS },
      onCall: (c) => {
        c.bridge.on('warning', (warning) => warnings.push(warning));
        started(c);
      },
    });
    ctx.onTestFinished(() => bridge.close());
    const twilio = await FakeTwilio.connect(bridge.url);
    ctx.onTestFinished(() => twilio.ws.terminate());
    twilio.open();
    return { twilio, call: await made, warnings };
  }

  it.for(CASES)('%s: every answer played, complete, one quiet period after the last answer', async ([, options], ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, options);
    const { twilio, call: made, warnings } = await call(ctx, server);
    twilio.media(0, CALLER_FRAMES.length);
    twilio.stop();
    expect(await twilio.closed).toBe(1000);
    await made.done;
    const after = Date.now() - server.responses.at(-1)!.doneAt;
    const translator = made.bridge.translator;
    expect(warnings).toEqual([]);
    expect(translator.stats.ending).toEqual({ complete: true, reason: undefined, unansweredSpeechMs: 0 });
    // Each answer played as mu-law 20 ms frames, each followed by its mark.
    const { groups } = groupByMark(twilio.received);
    expect(groups.map((g) => g.mark)).toEqual(server.responses.map((_, i) => `response-${i + 1}`));
    groups.forEach((group, i) => expect(group.audio.equals(padToFrames(convert(SERVICE, MULAW, server.responses[i]!.audio)))).toBe(true));
    expect(after).toBeGreaterThanOrEqual(QUIET_MS - 10);
    expect(after).toBeLessThan(QUIET_MS + SLACK_MS);
  });

  it('a sentence spoken after the last answer began and never answered: incomplete after the stall bound, said', async (ctx) => {
    const { expect } = ctx;
    const server = await reference(ctx, { last: 'never' });
    const { twilio, call: made, warnings } = await call(ctx, server);
    const translator = made.bridge.translator;
    let transcripts = 0;
    translator.on('transcript.done', () => transcripts++);
    // Each part once the sentence before it has been answered (frame = 24 kHz sample / 3 / 160).
    const starts = [...PART_STARTS.map((sample) => Math.floor(sample / 3 / TWILIO_FRAME_BYTES)), CALLER_FRAMES.length];
    for (let part = 0; part + 1 < starts.length; part++) {
      await atLeast(() => transcripts, part, translator, 'transcript.done');
      twilio.media(starts[part]!, starts[part + 1]!);
    }
    twilio.stop();
    await made.done;
    expect(translator.stats.ending).toMatchObject({ complete: false, reason: 'speech-unanswered' });
    expect(warnings.map((w) => w.message)).toEqual([
      expect.stringMatching(/^The service did not answer 0\.\d s of speech sent after its last response began within 1500 ms/),
    ]);
    expect(Date.now() - server.responses.at(-1)!.doneAt).toBeGreaterThanOrEqual(STALL_MS - 10);
  });
});
