/**
 * ResponseAssembler without sockets: decoded service events in, what the stream does out (the
 * events it publishes, the audio it delivers, activity for the ending, answers for the replay),
 * with a real SpeechLedger and plain clock values.
 */
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../lib/errors.js';
import type { ServerEvent } from '../lib/realtime/codec.js';
import type { RealtimeEvent } from '../lib/realtime/realtime-events.js';
import { ResponseAssembler, type ResponseSink } from '../lib/realtime/response-assembler.js';
import { SpeechLedger } from '../lib/realtime/speech-ledger.js';
import { speechThenSilence } from './helpers/speech.js';

const KEY = 'assembler-test-key-0123';

/** What the sink was asked to do, in order. */
type Call =
  | ['publish', RealtimeEvent]
  | ['audio', Buffer]
  | ['activity', number]
  | ['answered']
  | ['starting']
  | ['sessionCreated', unknown]
  | ['serverError', string, number | string | undefined];

function assembler(options: { audioExpected?: boolean; sent?: number } = {}) {
  const ledger = new SpeechLedger();
  const calls: Call[] = [];
  const sink: ResponseSink = {
    publish: (event) => calls.push(['publish', event]),
    audio: (audio) => calls.push(['audio', Buffer.from(audio)]),
    activity: (now) => calls.push(['activity', now]),
    answered: () => calls.push(['answered']),
    starting: () => calls.push(['starting']),
    sessionCreated: (info) => calls.push(['sessionCreated', info]),
    serverError: (message, code) => calls.push(['serverError', message, code]),
  };
  const sent = options.sent ?? 0;
  const responses = new ResponseAssembler(ledger, { secret: KEY, audioExpected: options.audioExpected ?? true, sent: () => sent }, sink);
  const published = () => calls.flatMap((c) => (c[0] === 'publish' ? [c[1]] : []));
  const audio = () => Buffer.concat(calls.flatMap((c) => (c[0] === 'audio' ? [c[1]] : [])));
  return { ledger, calls, responses, published, audio };
}

const raw = {};
const ev = {
  audio: (bytes: number[]): ServerEvent => ({ type: 'audio.delta', audio: Buffer.from(bytes), wireType: 'response.audio.delta', raw }),
  audioDone: (): ServerEvent => ({ type: 'audio.done', wireType: 'response.audio.done', raw }),
  transcript: (text: string): ServerEvent => ({ type: 'transcript.done', text, wireType: 'conversation.item.input_audio_transcription.completed', raw }),
  textDelta: (delta: string): ServerEvent => ({ type: 'text.delta', delta, wireType: 'response.text.delta', raw }),
  textDone: (text?: string): ServerEvent => ({ type: 'text.done', text, wireType: 'response.text.done', raw }),
};

describe('ResponseAssembler: output audio', () => {
  it('realigns to whole samples across JSON deltas and binary frames, carrying the odd byte', () => {
    const { responses, audio, calls } = assembler();
    responses.handle(ev.audio([1, 2, 3]), 10);
    const binary = responses.decode(Buffer.from([4, 5, 6]), true)!;
    expect(binary).toMatchObject({ type: 'audio.delta', wireType: 'binary' });
    responses.handle(binary, 11);
    expect(calls.filter((c) => c[0] === 'audio').map((c) => [...(c[1] as Buffer)])).toEqual([
      [1, 2],
      [3, 4, 5, 6],
    ]);
    expect([...audio()]).toEqual([1, 2, 3, 4, 5, 6]);
    expect(responses.bytesReceived).toBe(6);
  });

  it('publishes the realigned audio, then delivers it, then counts it as activity', () => {
    const { responses, calls } = assembler();
    responses.handle(ev.audio([1, 2, 3]), 42);
    expect(calls.map((c) => c[0])).toEqual(['publish', 'audio', 'activity']);
    expect((calls[0]![1] as { audio: Buffer }).audio).toEqual(Buffer.from([1, 2]));
    expect(calls[2]).toEqual(['activity', 42]);
  });

  it('a response whose total is odd loses its last byte, with a warning; the next response starts clean', () => {
    const { responses, audio, published } = assembler();
    responses.handle(ev.audio([1, 2, 3]), 1);
    responses.handle(ev.audioDone(), 2);
    responses.handle(ev.audio([7, 8]), 3);
    expect([...audio()]).toEqual([1, 2, 7, 8]);
    const warnings = published().flatMap((e) => (e.type === 'warning' ? [e.warning] : []));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toBeInstanceOf(ProtocolError);
  });

  it('a lost session drops the carried byte and the text so far: the new session answers again in full', () => {
    const { responses, audio, published } = assembler({ audioExpected: false });
    responses.handle(ev.audio([1, 2, 3]), 1);
    responses.handle(ev.textDelta('hal'), 1);
    responses.sessionLost();
    responses.handle(ev.audio([9, 9]), 2);
    responses.handle(ev.textDelta('hola'), 2);
    responses.handle(ev.textDone(), 3);
    expect([...audio()]).toEqual([1, 2, 9, 9]);
    expect(published().filter((e) => e.type === 'text.done')).toMatchObject([{ text: 'hola' }]);
  });
});

describe('ResponseAssembler: responses', () => {
  it('text.done without its text gets the deltas; one with text keeps it', () => {
    const { responses, published } = assembler();
    responses.handle(ev.textDelta('ho'), 1);
    responses.handle(ev.textDelta('la'), 2);
    responses.handle(ev.textDone(), 3);
    responses.handle(ev.textDelta('x'), 4);
    responses.handle(ev.textDone('adiós'), 5);
    expect(published().flatMap((e) => (e.type === 'text.done' ? [e.text] : []))).toEqual(['hola', 'adiós']);
  });

  it('with audio, a response completes at audio.done: timed from the end of its speech, then answered', () => {
    const { ledger, responses, calls, published } = assembler({ sent: 96_000 });
    const pcm = speechThenSilence();
    ledger.accept(pcm);
    ledger.recordSent(pcm.length, 1000);
    responses.handle(ev.transcript('hello'), 1400);
    responses.handle(ev.textDone('hola'), 1500); // not the end of a response that has audio
    expect(responses.responses).toBe(0);
    responses.handle(ev.audio([0, 0, 0, 0]), 1600);
    responses.handle(ev.audioDone(), 1900);
    expect(responses.responses).toBe(1);
    const response = published().find((e) => e.type === 'response');
    expect(response).toMatchObject({ timing: { index: 1, segments: 1, transcriptMs: 400, firstAudioMs: 600, doneMs: 900, audioBytes: 4 } });
    expect(calls.slice(-3).map((c) => c[0])).toEqual(['publish', 'answered', 'activity']);
    expect(responses.latency().firstAudioMs).toMatchObject({ count: 1, p50: 600, max: 600 });
    expect(ledger.frontier).toBe(24_000 * 2);
    expect(ledger.speechSinceLastResponse).toBe(0);
  });

  it('text only, a response completes at text.done', () => {
    const { responses, published } = assembler({ audioExpected: false });
    responses.handle(ev.textDelta('hola'), 1);
    responses.handle(ev.textDone(), 2);
    expect(responses.responses).toBe(1);
    expect(published().map((e) => e.type)).toEqual(['text.delta', 'text.done', 'response']);
  });

  it('activity is what the service sends about a response, not its other events', () => {
    const { responses, calls } = assembler();
    const others: ServerEvent[] = [
      { type: 'transcript.delta', delta: 'he', wireType: 'x', raw },
      { type: 'session.updated', session: { raw }, wireType: 'session.updated', raw },
      { type: 'unknown', wireType: 'keepalive', raw },
    ];
    for (const event of others) responses.handle(event, 5);
    expect(calls.filter((c) => c[0] === 'activity')).toEqual([]);
    for (const event of [ev.transcript('a'), ev.textDelta('b'), ev.textDone('b'), ev.audioDone()]) responses.handle(event, 6);
    expect(calls.filter((c) => c[0] === 'activity')).toHaveLength(4);
  });
});

describe('ResponseAssembler: session events and decoding', () => {
  it('session.starting is told at once and remembered for this connection only; session.created and errors are published, then acted on', () => {
    const { responses, calls } = assembler();
    responses.handle({ type: 'session.starting', wireType: 'session.starting', raw }, 1);
    expect(responses.sawStarting).toBe(true);
    expect(calls.map((c) => c[0])).toEqual(['starting', 'publish']);
    responses.newConnection();
    expect(responses.sawStarting).toBe(false);
    responses.handle({ type: 'session.created', session: { id: 's1', raw }, wireType: 'session.created', raw }, 2);
    responses.handle({ type: 'server.error', message: 'no credits', code: 'billing', wireType: 'error', raw }, 3);
    expect(calls.slice(2).map((c) => c[0])).toEqual(['publish', 'sessionCreated', 'publish', 'serverError']);
    expect(calls.at(-1)).toEqual(['serverError', 'no credits', 'billing']);
  });

  it('the key echoed by the service is redacted from the event; a frame that is not JSON is a warning', () => {
    const { responses, published } = assembler();
    const echoed = responses.decode(Buffer.from(JSON.stringify({ type: 'error', error: { message: `bad key ${KEY}` } })), false);
    expect(echoed).toMatchObject({ type: 'server.error', message: 'bad key [redacted]' });
    expect(JSON.stringify(echoed)).not.toContain(KEY);
    expect(responses.decode(Buffer.from('not json'), false)).toBeUndefined();
    expect(published().map((e) => e.type)).toEqual(['warning']);
  });
});
