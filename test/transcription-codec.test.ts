/**
 * The live transcription wire format without sockets: the handshake query both ways, the
 * client's control messages, and the server's messages in every shape the official clients read.
 */
import { describe, expect, it } from 'vitest';
import { ProtocolError, ValidationError } from '../lib/errors.js';
import {
  DEFAULT_LIVE_PARAMS,
  decodeLiveClientMessage,
  decodeLiveServerEvent,
  encodeCloseStream,
  encodeKeepAlive,
  encodeLiveError,
  encodeLiveQuery,
  encodeReady,
  encodeResults,
  liveSampleBytes,
  parseLiveQuery,
} from '../lib/realtime/transcription-codec.js';

describe('handshake query', () => {
  it('fills in the defaults and reads back what it wrote', () => {
    const query = encodeLiveQuery({ encoding: 'mulaw', sampleRate: 8000, language: 'ES-ES' });
    expect(query.toString()).toBe('model=boli-v5&language=es-es&encoding=mulaw&sample_rate=8000&channels=1');
    expect(parseLiveQuery(query)).toEqual({ params: { ...DEFAULT_LIVE_PARAMS, encoding: 'mulaw', sampleRate: 8000, language: 'es-es' } });
    expect(parseLiveQuery(new URLSearchParams())).toEqual({ params: DEFAULT_LIVE_PARAMS });
  });

  it.each([
    [{ encoding: 'opus' }, 'encoding'],
    [{ sampleRate: 7999 }, 'sampleRate'],
    [{ channels: 0 }, 'channels'],
    [{ language: 'spanish' }, 'language'],
    [{ model: '' }, 'model'],
  ])('%j is refused naming %s', (params, field) => {
    expect(() => encodeLiveQuery(params as never)).toThrow(ValidationError);
    try {
      encodeLiveQuery(params as never);
    } catch (error) {
      expect((error as ValidationError).field).toBe(field);
    }
  });

  it('a query that is not a number where one is wanted is refused on the server side too', () => {
    const parsed = parseLiveQuery(new URLSearchParams('sample_rate=fast'));
    expect('error' in parsed && parsed.error.field).toBe('sampleRate');
  });

  it('sample sizes', () => {
    expect([liveSampleBytes('linear16'), liveSampleBytes('linear32'), liveSampleBytes('mulaw'), liveSampleBytes('alaw')]).toEqual([2, 4, 1, 1]);
  });
});

describe('client messages', () => {
  it('KeepAlive and CloseStream, and anything else as unknown', () => {
    expect(decodeLiveClientMessage(encodeKeepAlive())).toEqual({ type: 'KeepAlive' });
    expect(decodeLiveClientMessage(encodeCloseStream())).toEqual({ type: 'CloseStream' });
    expect(decodeLiveClientMessage('{"type":"Finalize","x":1}')).toEqual({ type: 'unknown', wireType: 'Finalize', raw: { type: 'Finalize', x: 1 } });
    expect(() => decodeLiveClientMessage('not json')).toThrow(ProtocolError);
    expect(() => decodeLiveClientMessage('{"kind":"KeepAlive"}')).toThrow(/no type/);
  });
});

describe('server messages', () => {
  const words = [
    { word: 'Hello,', start: 0.32, end: 0.8, confidence: 0.97 },
    { word: 'world.', start: 0.8, end: 1.3, confidence: 0.91 },
  ];

  it('Ready, Results and Error round-trip', () => {
    expect(decodeLiveServerEvent(encodeReady('r-1'))).toEqual({ type: 'Ready', requestId: 'r-1' });
    const text = encodeResults({
      isFinal: true,
      start: 0.32,
      duration: 0.98,
      transcript: 'Hello, world.',
      confidence: 0.94,
      words,
      requestId: 'r-1',
      model: 'boli-v5',
    });
    expect(JSON.parse(text)).toEqual({
      type: 'Results',
      is_final: true,
      start: 0.32,
      duration: 0.98,
      channel: { alternatives: [{ transcript: 'Hello, world.', confidence: 0.94, words }] },
      metadata: { request_id: 'r-1', model_info: { name: 'boli-v5' } },
    });
    expect(decodeLiveServerEvent(text)).toMatchObject({ type: 'Results', isFinal: true, transcript: 'Hello, world.', words, requestId: 'r-1' });
    expect(decodeLiveServerEvent(encodeLiveError('IDLE_TIMEOUT', 'quiet'))).toEqual({ type: 'Error', code: 'IDLE_TIMEOUT', message: 'quiet' });
  });

  it('tolerates what other releases send: Final, numeric codes, description, no alternatives', () => {
    expect(decodeLiveServerEvent('{"type":"Final","channel":{"alternatives":[{"transcript":"Hi"}]}}')).toMatchObject({
      type: 'Results',
      isFinal: true,
      transcript: 'Hi',
      words: [],
    });
    expect(decodeLiveServerEvent('{"type":"Results","is_final":false}')).toMatchObject({ isFinal: false, transcript: '', alternatives: [] });
    expect(decodeLiveServerEvent('{"type":"Error","code":4008,"description":"too fast"}')).toEqual({ type: 'Error', code: '4008', message: 'too fast' });
    expect(decodeLiveServerEvent('{"type":"Metadata","duration":3}')).toEqual({
      type: 'unknown',
      wireType: 'Metadata',
      raw: { type: 'Metadata', duration: 3 },
    });
    expect(() => decodeLiveServerEvent('[1]')).toThrow(ProtocolError);
  });
});
