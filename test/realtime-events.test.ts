/**
 * Realtime events as log records (one name, the wire name as a field, no base64) and the
 * redaction of a key the service echoes.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionError, TimeoutError } from '../lib/errors.js';
import { decodeBinaryAudio, decodeServerEvent } from '../lib/realtime/codec.js';
import { eventToRecord, redactObject } from '../lib/realtime/realtime-events.js';

const KEY = 'sk-live-0123456789abcdef';

describe('eventToRecord', () => {
  it('writes audio as its byte count under the one name, never base64', () => {
    const json = decodeServerEvent('{"type":"response.audio.delta","response_id":"r_1","delta":"AQIDBAUG"}');
    expect(eventToRecord(json)).toEqual({ type: 'audio.delta', wireType: 'response.audio.delta', bytes: 6 });
    expect(eventToRecord(decodeBinaryAudio(Buffer.alloc(9600)))).toEqual({ type: 'audio.delta', wireType: 'binary', bytes: 9600 });
  });

  it.each([
    ['{"type":"session.starting"}', { type: 'session.starting', wireType: 'session.starting' }],
    [
      '{"type":"session.created","session":{"id":"s-1","source_language":"en-us","target_language":"es-es"}}',
      {
        type: 'session.created',
        wireType: 'session.created',
        session: { id: 's-1', sourceLanguage: 'en-us', targetLanguage: 'es-es' },
        raw: { type: 'session.created', session: { id: 's-1', source_language: 'en-us', target_language: 'es-es' } },
      },
    ],
    [
      '{"type":"conversation.item.input_audio_transcription.completed","transcript":"Hello."}',
      { type: 'transcript.done', wireType: 'conversation.item.input_audio_transcription.completed', text: 'Hello.' },
    ],
    ['{"type":"response.text.done","text":"Hola."}', { type: 'text.done', wireType: 'response.text.done', text: 'Hola.' }],
    ['{"type":"error","error":{"message":"Out of credits.","code":402}}', { type: 'server.error', wireType: 'error', message: 'Out of credits.', code: 402 }],
    [
      '{"type":"rate_limits.updated","rate_limits":[]}',
      { type: 'unknown', wireType: 'rate_limits.updated', raw: { type: 'rate_limits.updated', rate_limits: [] } },
    ],
  ])('records %s under its one name', (wire, record) => {
    expect(JSON.parse(JSON.stringify(eventToRecord(decodeServerEvent(wire))))).toEqual(record);
  });

  it('records the stream own events with their errors as code and message', () => {
    const cause = new ConnectionError('The connection was cut.', { closeCode: 1006 });
    expect(eventToRecord({ type: 'reconnecting', attempt: 2, delayMs: 750, cause })).toEqual({
      type: 'reconnecting',
      attempt: 2,
      delayMs: 750,
      cause: { code: 'RTT_CONNECTION', message: 'The connection was cut.', retryable: true },
    });
    expect(eventToRecord({ type: 'warning', warning: new TimeoutError('Gave up.', 30_000) })).toEqual({
      type: 'warning',
      warning: { code: 'RTT_TIMEOUT', message: 'Gave up.', retryable: true },
    });
    expect(eventToRecord({ type: 'ended', complete: false, reason: 'speech-unanswered', unansweredSpeechMs: 1200 })).toEqual({
      type: 'ended',
      complete: false,
      reason: 'speech-unanswered',
      unansweredSpeechMs: 1200,
    });
  });
});

describe('redactObject', () => {
  it('replaces the key in every string and key of a parsed event, however deep', () => {
    const raw = {
      type: 'session.created',
      session: { id: 's', api_key: KEY, notes: [`key=${KEY}`, { nested: `${KEY}${KEY}` }], [KEY]: 1 },
    };
    redactObject(raw, KEY, true);
    expect(JSON.stringify(raw)).not.toContain(KEY);
    expect(raw.session.api_key).toBe('[redacted]');
    expect(raw.session.notes).toEqual(['key=[redacted]', { nested: '[redacted][redacted]' }]);
    expect((raw.session as Record<string, unknown>)['[redacted]']).toBe(1);
  });

  it('leaves an audio payload alone', () => {
    const raw = { type: 'response.audio.delta', delta: 'AQIDBA==' };
    redactObject(raw, 'AQID', true);
    expect(raw.delta).toBe('AQIDBA==');
  });

  it.each(['response.text.delta', 'conversation.item.input_audio_transcription.delta'])('redacts the text delta of %s', (type) => {
    const raw = { type, delta: `said ${KEY}` };
    redactObject(raw, KEY, true);
    expect(raw.delta).toBe('said [redacted]');
  });
});
