import { describe, expect, it } from 'vitest';
import { ProtocolError, ValidationError } from '../lib/errors.js';
import {
  MAX_APPEND_AUDIO_BYTES,
  MAX_CLIENT_EVENT_BYTES,
  decodeBinaryAudio,
  decodeClientEvent,
  decodeServerEvent,
  encodeAudioAppend,
  encodeBareEvent,
  encodeServerEvent,
  encodeSessionUpdate,
  normalizeSessionConfig,
  type SessionConfigInput,
} from '../lib/realtime/codec.js';
import { APPEND_BYTES_FROM, encodeAudioAppendBytes, encodeAudioAppendFrame, releaseAppendFrame } from '../lib/realtime/append-frame.js';
import { alignKernel, firKernel } from '../lib/audio/wasm/fir.js';
import { REALTIME_LANGUAGES } from '../lib/realtime/languages.js';
import { caught } from './helpers/caught.js';

/** The 14 tags of the interface, written out so a drift in languages.ts fails here. */
const TAGS_14 = ['ar-ae', 'ar-eg', 'ar-sa', 'de-de', 'en-gb', 'en-us', 'es-es', 'fr-ca', 'fr-fr', 'hi-in', 'ja-jp', 'ko-kr', 'pt-br', 'zh-cn'];

/** Lets a test pass values the types forbid, as a JavaScript caller could. */
function untyped(value: unknown): SessionConfigInput {
  return value as SessionConfigInput;
}

const base = { source_language: 'en-us', target_language: 'es-es' };

describe('limits', () => {
  it('are the interface values: 1 MiB of event text, 256 KiB of decoded audio', () => {
    expect(MAX_CLIENT_EVENT_BYTES).toBe(1_048_576);
    expect(MAX_APPEND_AUDIO_BYTES).toBe(262_144);
    expect([...REALTIME_LANGUAGES]).toEqual(TAGS_14);
  });
});

describe('encodeSessionUpdate', () => {
  it('encodes a minimal configuration', () => {
    expect(encodeSessionUpdate(base)).toBe('{"type":"session.update","session":{"source_language":"en-us","target_language":"es-es"}}');
  });

  it('normalizes language tags in mixed case to lower case', () => {
    expect(encodeSessionUpdate({ source_language: 'En-US', target_language: 'zH-Cn' })).toBe(
      '{"type":"session.update","session":{"source_language":"en-us","target_language":"zh-cn"}}',
    );
  });

  it.each(TAGS_14)('accepts %s in upper case as source and target', (tag) => {
    const upper = tag.toUpperCase();
    expect(encodeSessionUpdate({ source_language: upper, target_language: upper })).toBe(
      `{"type":"session.update","session":{"source_language":"${tag}","target_language":"${tag}"}}`,
    );
  });

  it.each([
    { modalities: ['text'], wire: '["text"]' },
    { modalities: ['audio', 'text'], wire: '["audio","text"]' },
    { modalities: ['text', 'audio'], wire: '["text","audio"]' },
    { modalities: ['audio', 'audio', 'text', 'audio'], wire: '["audio","text"]' },
  ])('encodes output_modalities $modalities as $wire', ({ modalities, wire }) => {
    expect(encodeSessionUpdate({ ...base, output_modalities: modalities })).toBe(
      '{"type":"session.update","session":{"source_language":"en-us","target_language":"es-es",' + `"output_modalities":${wire}}}`,
    );
  });

  it('encodes the default voice', () => {
    expect(encodeSessionUpdate({ ...base, voice: { type: 'default' } })).toBe(
      '{"type":"session.update","session":{"source_language":"en-us","target_language":"es-es",' + '"voice":{"type":"default"}}}',
    );
  });

  it('encodes a cloned voice with its id', () => {
    expect(encodeSessionUpdate({ ...base, output_modalities: ['audio', 'text'], voice: { type: 'cloned', voice_id: 4242 } })).toBe(
      '{"type":"session.update","session":{"source_language":"en-us","target_language":"es-es",' +
        '"output_modalities":["audio","text"],"voice":{"type":"cloned","voice_id":4242}}}',
    );
  });

  it('puts the key in auth.api_key only when authApiKey is given', () => {
    expect(encodeSessionUpdate(base, { authApiKey: 'rtt-key-0123456789' })).toBe(
      '{"type":"session.update","session":{"source_language":"en-us","target_language":"es-es"},' + '"auth":{"api_key":"rtt-key-0123456789"}}',
    );
  });

  it.each([
    { name: 'no options', options: undefined },
    { name: 'empty options', options: {} },
  ])('carries no auth object and no key with $name', ({ options }) => {
    const text = encodeSessionUpdate(base, options);
    expect(text).not.toContain('auth');
    expect(text).not.toContain('api_key');
    expect(JSON.parse(text)).toEqual({ type: 'session.update', session: base });
  });

  it('refuses an empty authApiKey', () => {
    const err = caught(() => encodeSessionUpdate(base, { authApiKey: '' }));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'RTT_VALIDATION', field: 'auth.api_key' });
  });

  it('refuses an event over 1 MiB of text without echoing the key', () => {
    const key = 'rtt-secret-' + 'k'.repeat(MAX_CLIENT_EVENT_BYTES);
    const err = caught(() => encodeSessionUpdate(base, { authApiKey: key }));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'RTT_VALIDATION', field: 'session.update event' });
    const message = (err as Error).message;
    expect(message).toContain(String(MAX_CLIENT_EVENT_BYTES));
    expect(message).not.toContain('rtt-secret-');
  });

  describe.each(['source_language', 'target_language'] as const)('an unsupported %s', (key) => {
    it.each([
      { label: "'en'", value: 'en' },
      { label: "'it-it'", value: 'it-it' },
      { label: "'en_us'", value: 'en_us' },
      { label: "''", value: '' },
      { label: 'the number 1', value: 1 },
      { label: 'undefined', value: undefined },
    ])('$label throws ValidationError naming session.' + key + ' and the 14 tags', ({ value }) => {
      const err = caught(() => encodeSessionUpdate(untyped({ ...base, [key]: value })));
      expect(err).toBeInstanceOf(ValidationError);
      expect(err).toMatchObject({ code: 'RTT_VALIDATION', field: `session.${key}` });
      const message = (err as Error).message;
      for (const tag of TAGS_14) expect(message).toContain(tag);
      expect(message).toContain('case-insensitive');
    });
  });

  it.each([
    { label: 'an empty array', value: [], got: 'an empty array' },
    { label: "['video']", value: ['video'], got: '"video"' },
    { label: "['text', 'video']", value: ['text', 'video'], got: '"video"' },
    { label: "['TEXT']", value: ['TEXT'], got: '"TEXT"' },
    { label: "the string 'audio'", value: 'audio', got: 'string' },
    { label: 'null', value: null, got: 'object' },
  ])('output_modalities $label throws ValidationError naming the field', ({ value, got }) => {
    const err = caught(() => encodeSessionUpdate(untyped({ ...base, output_modalities: value })));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'RTT_VALIDATION', field: 'session.output_modalities' });
    const message = (err as Error).message;
    expect(message).toContain('"text"');
    expect(message).toContain('"audio"');
    expect(message).toContain(`(got ${got})`);
  });

  it.each([
    { label: 'a cloned voice without voice_id', voice: { type: 'cloned' }, field: 'session.voice.voice_id', accepts: 'voice id' },
    { label: 'voice_id 1.5', voice: { type: 'cloned', voice_id: 1.5 }, field: 'session.voice.voice_id', accepts: 'positive integer' },
    { label: "voice_id '4242'", voice: { type: 'cloned', voice_id: '4242' }, field: 'session.voice.voice_id', accepts: 'positive integer' },
    { label: 'voice_id 0', voice: { type: 'cloned', voice_id: 0 }, field: 'session.voice.voice_id', accepts: 'positive integer' },
    { label: 'voice_id -7', voice: { type: 'cloned', voice_id: -7 }, field: 'session.voice.voice_id', accepts: 'positive integer' },
    { label: "type 'custom'", voice: { type: 'custom', voice_id: 4242 }, field: 'session.voice.type', accepts: '"default" or "cloned"' },
    { label: "type 'Cloned'", voice: { type: 'Cloned', voice_id: 4242 }, field: 'session.voice.type', accepts: '"default" or "cloned"' },
    { label: 'a voice without type', voice: {}, field: 'session.voice.type', accepts: '"default" or "cloned"' },
    { label: "the string 'default'", voice: 'default', field: 'session.voice', accepts: '{ type: "default" }' },
  ])('$label throws ValidationError naming $field', ({ voice, field, accepts }) => {
    const err = caught(() => encodeSessionUpdate(untyped({ ...base, voice })));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'RTT_VALIDATION', field });
    expect((err as Error).message).toContain(accepts);
  });

  it('checks the source language before the rest', () => {
    const err = caught(() => encodeSessionUpdate(untyped({ source_language: 'xx', target_language: 'yy', output_modalities: [] })));
    expect(err).toMatchObject({ field: 'session.source_language' });
  });

  it('refuses a configuration that is not an object', () => {
    const err = caught(() => encodeSessionUpdate(untyped(null)));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ field: 'session' });
  });
});

describe('normalizeSessionConfig', () => {
  it('returns the wire form and leaves the input untouched', () => {
    const input = Object.freeze({
      source_language: 'EN-GB',
      target_language: 'Ja-Jp',
      output_modalities: Object.freeze(['text', 'text']),
      voice: Object.freeze({ type: 'cloned', voice_id: 77 }),
    });
    expect(normalizeSessionConfig(input)).toEqual({
      source_language: 'en-gb',
      target_language: 'ja-jp',
      output_modalities: ['text'],
      voice: { type: 'cloned', voice_id: 77 },
    });
    expect(input.source_language).toBe('EN-GB');
  });

  it('names fields under the given prefix', () => {
    const err = caught(() => normalizeSessionConfig(untyped({ ...base, voice: { type: 'cloned' } }), 'update.session'));
    expect(err).toMatchObject({ field: 'update.session.voice.voice_id' });
  });
});

describe('encodeAudioAppend', () => {
  it('encodes a small buffer', () => {
    expect(encodeAudioAppend(Buffer.from([0x01, 0x02, 0x03, 0x04, 0xff, 0xfe]))).toBe('{"type":"input_audio_buffer.append","audio":"AQIDBP/+"}');
  });

  it('encodes only the bytes of a Uint8Array view with a non-zero byteOffset', () => {
    const backing = new ArrayBuffer(16);
    new Uint8Array(backing).forEach((_, i, all) => (all[i] = i));
    const view = new Uint8Array(backing, 4, 6);
    expect(encodeAudioAppend(view)).toBe('{"type":"input_audio_buffer.append","audio":"BAUGBwgJ"}');
  });

  it('encodes only the bytes of a Buffer slice of a larger buffer', () => {
    const whole = Buffer.from([9, 9, 9, 9, 4, 5, 6, 7, 8, 9, 9, 9]);
    expect(encodeAudioAppend(whole.subarray(4, 10))).toBe('{"type":"input_audio_buffer.append","audio":"BAUGBwgJ"}');
  });

  it('accepts exactly 262144 bytes and keeps every byte', () => {
    const pcm = Buffer.alloc(262_144);
    for (let i = 0; i < pcm.length; i++) pcm[i] = (i * 7 + (i >> 8)) & 0xff;
    const event = JSON.parse(encodeAudioAppend(pcm)) as { type: string; audio: string };
    expect(event.type).toBe('input_audio_buffer.append');
    expect(Buffer.from(event.audio, 'base64').equals(pcm)).toBe(true);
  });

  it.each([
    { label: '262146 bytes (over 256 KiB)', bytes: 262_146, says: '262144' },
    { label: '3 bytes (odd)', bytes: 3, says: 'even number of bytes' },
    { label: '262143 bytes (odd)', bytes: 262_143, says: 'even number of bytes' },
  ])('rejects $label with a ValidationError naming the append audio', ({ bytes, says }) => {
    const err = caught(() => encodeAudioAppend(new Uint8Array(bytes)));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'RTT_VALIDATION', field: 'input_audio_buffer.append audio' });
    const message = (err as Error).message;
    expect(message).toContain(says);
    expect(message).toContain(`(got ${bytes} bytes)`);
  });

  it('encodeAudioAppendBytes is the UTF-8 of the same text, for every size and for views', () => {
    const whole = Buffer.from(Array.from({ length: 6002 }, (_, i) => (i * 37 + (i >> 7)) & 0xff));
    for (const size of [0, 2, 4, 6, 8, 1000, 4800, 6000]) {
      for (const at of [0, 1, 2]) {
        const piece = whole.subarray(at, at + size);
        const view = new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength);
        const bytes = encodeAudioAppendBytes(view);
        expect(bytes.equals(Buffer.from(encodeAudioAppend(view), 'utf8')), `${size} bytes at ${at}`).toBe(true);
      }
    }
    // The frame form: a string below APPEND_BYTES_FROM, the same text as bytes from there on.
    for (const size of [APPEND_BYTES_FROM - 2, APPEND_BYTES_FROM, 65_536]) {
      const pcm = Buffer.alloc(size, 7);
      const frame = encodeAudioAppendFrame(pcm);
      expect(typeof frame === 'string', `${size} bytes`).toBe(size < APPEND_BYTES_FROM);
      expect(Buffer.from(frame as string).equals(Buffer.from(encodeAudioAppend(pcm)))).toBe(true);
    }
    expect(() => encodeAudioAppendBytes(new Uint8Array(3))).toThrow(ValidationError);
    expect(() => encodeAudioAppendBytes(new Uint8Array(262_146))).toThrow(/262144/);
  });

  it("the kernel's base64 is Node's, for every length and alignment and all 64 digits", () => {
    const kernel = firKernel();
    expect(kernel, 'the WebAssembly kernel loads on Node 20').toBeDefined();
    // Every byte value in every position of a group of three, so every digit and padding occurs.
    const data = Buffer.from(Array.from({ length: 3 * 256 + 40 }, (_, i) => (i % 3 === 0 ? i / 3 : i * 101 + (i >> 8)) & 0xff));
    const encode = (bytes: Uint8Array): string => {
      const src = kernel!.scratch(alignKernel(bytes.length) + Math.ceil(bytes.length / 3) * 4);
      const dst = src + alignKernel(bytes.length);
      kernel!.u8.set(bytes, src);
      kernel!.exports.base64_encode(src, bytes.length, dst);
      return Buffer.from(kernel!.u8.subarray(dst, dst + Math.ceil(bytes.length / 3) * 4)).toString('latin1');
    };
    for (let length = 0; length <= 80; length++) {
      for (const at of [0, 1, 5]) {
        const piece = data.subarray(at, at + length);
        expect(encode(piece), `${length} bytes at ${at}`).toBe(piece.toString('base64'));
      }
    }
    for (const length of [data.length - 1, 65_536, 262_144]) {
      const piece = length <= data.length ? data.subarray(0, length) : Buffer.concat(Array(Math.ceil(length / data.length)).fill(data)).subarray(0, length);
      expect(encode(piece), `${length} bytes`).toBe(piece.toString('base64'));
    }
  });

  it('frames of up to 64 KiB of audio reuse the memory of released frames, cleared; others are let go', () => {
    const first = encodeAudioAppendBytes(Buffer.alloc(65_536, 1));
    const memory = first.buffer;
    releaseAppendFrame(first);
    // Released memory is cleared at once: no caller's audio stays in the heap.
    expect(new Uint8Array(memory).every((b) => b === 0)).toBe(true);
    const pcm = Buffer.from(Array.from({ length: 20_000 }, (_, i) => (i * 7) & 0xff));
    const second = encodeAudioAppendBytes(pcm);
    expect(second.buffer).toBe(memory);
    expect(second.toString('latin1')).toBe(encodeAudioAppend(pcm));
    releaseAppendFrame(second);
    // Larger appends get memory of their own, which is not kept; strings are ignored.
    const large = encodeAudioAppendBytes(Buffer.alloc(131_072, 3));
    expect(large.buffer).not.toBe(memory);
    releaseAppendFrame(large);
    releaseAppendFrame(encodeAudioAppend(Buffer.alloc(4)));
    const third = encodeAudioAppendBytes(Buffer.alloc(65_536, 9));
    expect(third.buffer).toBe(memory);
    expect(large.toString('latin1')).toBe(encodeAudioAppend(Buffer.alloc(131_072, 3)));
  });

  it('round trips: JSON.parse then base64 decode gives the input back', () => {
    // 100 ms of a 440 Hz tone, PCM16 LE mono 24 kHz.
    const pcm = Buffer.alloc(4800);
    for (let i = 0; i < 2400; i++) pcm.writeInt16LE(Math.round(12_000 * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
    const { audio } = JSON.parse(encodeAudioAppend(pcm)) as { audio: string };
    expect(Buffer.from(audio, 'base64')).toEqual(pcm);
  });
});

describe('decodeServerEvent', () => {
  it('decodes session.starting without payload', () => {
    expect(decodeServerEvent('{"type":"session.starting"}')).toEqual({
      type: 'session.starting',
      wireType: 'session.starting',
      raw: { type: 'session.starting' },
    });
  });

  it('decodes session.created into camelCase with the id and the echoed voice and model, keeping the wire object', () => {
    const wire =
      '{"type":"session.created","session":{"id":"3f1c5a52-8d0e-4c7b-9a51-2f5b7d0c9e14",' +
      '"source_language":"en-us","target_language":"es-es","output_modalities":["text","audio"],' +
      '"voice":{"type":"cloned","voice_id":4242,"name":"Ana"},"model":"iris"}}';
    const event = decodeServerEvent(wire);
    expect(event.type).toBe('session.created');
    if (event.type !== 'session.created') return;
    const { raw, ...session } = event.session;
    expect(session).toEqual({
      id: '3f1c5a52-8d0e-4c7b-9a51-2f5b7d0c9e14',
      sourceLanguage: 'en-us',
      targetLanguage: 'es-es',
      outputModalities: ['text', 'audio'],
      voice: { type: 'cloned', voiceId: 4242 },
      model: 'iris',
    });
    expect(raw).toEqual((JSON.parse(wire) as { session: unknown }).session);
  });

  it('decodes session.created without a session object as an empty session', () => {
    const event = decodeServerEvent('{"type":"session.created"}');
    expect(event).toMatchObject({ type: 'session.created', session: { raw: {} } });
  });

  it('decodes session.updated', () => {
    expect(
      decodeServerEvent('{"type":"session.updated","session":{"source_language":"fr-fr","target_language":"de-de","voice":{"type":"default"}}}'),
    ).toMatchObject({
      type: 'session.updated',
      wireType: 'session.updated',
      session: { sourceLanguage: 'fr-fr', targetLanguage: 'de-de', voice: { type: 'default' } },
    });
  });

  it.each([
    {
      wire: '{"type":"conversation.item.input_audio_transcription.completed","transcript":"Good morning, everyone."}',
      expected: { type: 'transcript.done', text: 'Good morning, everyone.' },
    },
    {
      wire: '{"type":"conversation.item.input_audio_transcription.delta","delta":"Good mor"}',
      expected: { type: 'transcript.delta', delta: 'Good mor' },
    },
    {
      wire: '{"type":"response.text.delta","delta":"Buenos d\\u00edas"}',
      expected: { type: 'text.delta', delta: 'Buenos días' },
    },
    {
      wire: '{"type":"response.text.done","text":"Buenos días a todos."}',
      expected: { type: 'text.done', text: 'Buenos días a todos.' },
    },
    {
      wire: '{"type":"response.text.done"}',
      expected: { type: 'text.done', text: undefined },
    },
    {
      wire: '{"type":"response.audio.done"}',
      expected: { type: 'audio.done' },
    },
  ])('decodes $wire under its one name, keeping the wire name', ({ wire, expected }) => {
    const raw = JSON.parse(wire) as { type: string };
    expect(decodeServerEvent(wire)).toEqual({ ...expected, wireType: raw.type, raw });
  });

  it.each([
    { field: 'delta', wire: '{"type":"response.audio.delta","delta":"AID/fw=="}' },
    { field: 'audio', wire: '{"type":"response.audio.delta","audio":"AID/fw=="}' },
  ])('decodes response.audio.delta with the base64 in $field', ({ wire }) => {
    const event = decodeServerEvent(wire);
    expect(event.type).toBe('audio.delta');
    if (event.type !== 'audio.delta') return;
    expect(event.audio).toEqual(Buffer.from([0x00, 0x80, 0xff, 0x7f]));
    expect(event.wireType).toBe('response.audio.delta');
    expect(event.raw).toEqual(JSON.parse(wire));
  });

  it('prefers delta when an audio delta carries both fields', () => {
    const event = decodeServerEvent('{"type":"response.audio.delta","delta":"AQIDBA==","audio":"b2s="}');
    expect(event).toMatchObject({ type: 'audio.delta', audio: Buffer.from([1, 2, 3, 4]) });
  });

  it('lets the caller rewrite the parsed object before it is read (redaction)', () => {
    const event = decodeServerEvent('{"type":"response.text.done","text":"key k-123 echoed"}', (raw) => {
      raw.text = String(raw.text).replace('k-123', '[redacted]');
    });
    expect(event).toMatchObject({ type: 'text.done', text: 'key [redacted] echoed' });
  });

  it.each([
    { label: 'no payload', wire: '{"type":"response.audio.delta"}' },
    { label: 'a numeric delta', wire: '{"type":"response.audio.delta","delta":1234}' },
  ])('throws ProtocolError for an audio delta with $label', ({ wire }) => {
    const err = caught(() => decodeServerEvent(wire));
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err).toMatchObject({ code: 'RTT_PROTOCOL' });
  });

  it.each([
    {
      label: 'message and numeric code',
      wire: '{"type":"error","error":{"message":"Invalid API key.","code":401}}',
      message: 'Invalid API key.',
      code: 401,
    },
    {
      label: 'message and string code',
      wire: '{"type":"error","error":{"message":"Out of credits.","code":"billing"}}',
      message: 'Out of credits.',
      code: 'billing',
    },
    {
      label: 'a message only',
      wire: '{"type":"error","error":{"message":"response.cancel is not supported."}}',
      message: 'response.cancel is not supported.',
      code: undefined,
    },
    {
      label: 'a plain string error',
      wire: '{"type":"error","error":"Voice 147320 is not a cloned voice of this account."}',
      message: 'Voice 147320 is not a cloned voice of this account.',
      code: undefined,
    },
    {
      label: 'a top-level message',
      wire: '{"type":"error","message":"Session ended."}',
      message: 'Session ended.',
      code: undefined,
    },
    {
      label: 'no message at all',
      wire: '{"type":"error","error":{"code":500}}',
      message: 'The service reported an error without a message.',
      code: 500,
    },
  ])('decodes an error with $label as server.error', ({ wire, message, code }) => {
    expect(decodeServerEvent(wire)).toEqual({ type: 'server.error', message, code, wireType: 'error', raw: JSON.parse(wire) });
  });

  it.each([
    '{"type":"rate_limits.updated","rate_limits":[{"name":"audio","remaining":10}]}',
    '{"type":"keepalive"}',
    '{"type":"response.created","response":{"id":"r_1"}}',
    '{"type":""}',
  ])('keeps the unknown event %s as unknown', (wire) => {
    const raw = JSON.parse(wire) as { type: string };
    expect(decodeServerEvent(wire)).toEqual({ type: 'unknown', wireType: raw.type, raw });
  });

  it.each([
    { label: 'non-JSON text', text: 'not json at all' },
    { label: 'truncated JSON', text: '{"type":"response.text.delta","delta":"Hol' },
    { label: 'an empty frame', text: '' },
    { label: 'an array', text: '[{"type":"session.created"}]' },
    { label: 'null', text: 'null' },
    { label: 'a bare string', text: '"session.created"' },
    { label: 'an object without type', text: '{"event":"session.created"}' },
    { label: 'a numeric type', text: '{"type":7}' },
    { label: 'a null type', text: '{"type":null}' },
  ])('throws ProtocolError for $label', ({ text }) => {
    const err = caught(() => decodeServerEvent(text));
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err).toMatchObject({ code: 'RTT_PROTOCOL' });
  });

  it('decodes a binary frame as audio.delta with wireType binary', () => {
    const frame = Buffer.alloc(9600, 0x11);
    expect(decodeBinaryAudio(frame)).toEqual({ type: 'audio.delta', audio: frame, wireType: 'binary', raw: undefined });
  });
});

describe('decodeClientEvent (emulator side)', () => {
  it('decodes what encodeSessionUpdate sends', () => {
    const event = decodeClientEvent(encodeSessionUpdate({ ...base, voice: { type: 'cloned', voice_id: 4242 } }, { authApiKey: 'rtt-key-0123456789' }));
    expect(event).toMatchObject({
      type: 'session.update',
      session: { source_language: 'en-us', target_language: 'es-es', voice: { type: 'cloned', voice_id: 4242 } },
      auth: { api_key: 'rtt-key-0123456789' },
    });
  });

  it('decodes a session.update without auth', () => {
    expect(decodeClientEvent(encodeSessionUpdate(base))).toMatchObject({ type: 'session.update', session: base, auth: undefined });
  });

  it('decodes what encodeAudioAppend sends, bytes intact', () => {
    const pcm = Buffer.from([0x00, 0x80, 0xff, 0x7f, 0x01, 0x02]);
    const event = decodeClientEvent(encodeAudioAppend(pcm));
    expect(event.type).toBe('input_audio_buffer.append');
    if (event.type !== 'input_audio_buffer.append') return;
    expect(Buffer.from(event.audio as string, 'base64')).toEqual(pcm);
  });

  it.each(['input_audio_buffer.clear', 'input_audio_buffer.commit', 'response.cancel'] as const)('encodes and decodes the bare event %s', (type) => {
    const text = encodeBareEvent(type);
    expect(text).toBe(`{"type":"${type}"}`);
    expect(decodeClientEvent(text)).toEqual({ type, raw: { type } });
  });

  it('keeps an unknown client event as unknown', () => {
    expect(decodeClientEvent('{"type":"conversation.item.create","item":{}}')).toEqual({
      type: 'unknown',
      wireType: 'conversation.item.create',
      raw: { type: 'conversation.item.create', item: {} },
    });
  });

  it.each([
    { label: 'non-JSON text', text: 'hello' },
    { label: 'an array', text: '[]' },
    { label: 'an object without type', text: '{"session":{}}' },
  ])('throws ProtocolError for $label', ({ text }) => {
    const err = caught(() => decodeClientEvent(text));
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err).toMatchObject({ code: 'RTT_PROTOCOL' });
  });
});

describe('encodeServerEvent (emulator side)', () => {
  it.each([
    { name: 'sessionStarting', text: encodeServerEvent.sessionStarting(), wire: '{"type":"session.starting"}' },
    { name: 'audioDone', text: encodeServerEvent.audioDone(), wire: '{"type":"response.audio.done"}' },
    {
      name: 'audioDelta',
      text: encodeServerEvent.audioDelta(Buffer.from([1, 2, 3, 4])),
      wire: '{"type":"response.audio.delta","delta":"AQIDBA=="}',
    },
    {
      name: 'transcriptCompleted',
      text: encodeServerEvent.transcriptCompleted('Hello.'),
      wire: '{"type":"conversation.item.input_audio_transcription.completed","transcript":"Hello."}',
    },
    { name: 'textDelta', text: encodeServerEvent.textDelta('Ho'), wire: '{"type":"response.text.delta","delta":"Ho"}' },
    { name: 'textDone', text: encodeServerEvent.textDone('Hola.'), wire: '{"type":"response.text.done","text":"Hola."}' },
    {
      name: 'error with code',
      text: encodeServerEvent.error('Out of credits: the session is stopped.', 402),
      wire: '{"type":"error","error":{"message":"Out of credits: the session is stopped.","code":402}}',
    },
    {
      name: 'error without code',
      text: encodeServerEvent.error('response.cancel is not supported.'),
      wire: '{"type":"error","error":{"message":"response.cancel is not supported."}}',
    },
  ])('$name is exact JSON', ({ text, wire }) => {
    expect(text).toBe(wire);
  });

  it('session.created round trips through decodeServerEvent', () => {
    const session = {
      id: '0b6f1c2e-6a53-4f0e-9a7c-1d2e3f4a5b6c',
      source_language: 'en-us',
      target_language: 'es-es',
      output_modalities: ['text', 'audio'],
      voice: { type: 'default' },
    };
    const camel = {
      id: session.id,
      sourceLanguage: 'en-us',
      targetLanguage: 'es-es',
      outputModalities: ['text', 'audio'],
      voice: { type: 'default' },
      raw: session,
    };
    expect(decodeServerEvent(encodeServerEvent.sessionCreated(session))).toMatchObject({ type: 'session.created', session: camel });
    expect(decodeServerEvent(encodeServerEvent.sessionUpdated(session))).toMatchObject({ type: 'session.updated', session: camel });
  });

  it('text with quotes, newlines and non-ASCII round trips', () => {
    const text = 'Él dijo: "¡basta!"\n— 終わり';
    expect(decodeServerEvent(encodeServerEvent.textDelta(text))).toMatchObject({ type: 'text.delta', delta: text });
    expect(decodeServerEvent(encodeServerEvent.textDone(text))).toMatchObject({ type: 'text.done', text });
    expect(decodeServerEvent(encodeServerEvent.transcriptCompleted(text))).toMatchObject({
      type: 'transcript.done',
      text,
    });
  });

  it('audio round trips byte for byte', () => {
    const pcm = Buffer.alloc(19_200);
    for (let i = 0; i < pcm.length; i++) pcm[i] = (i * 31) & 0xff;
    const event = decodeServerEvent(encodeServerEvent.audioDelta(pcm));
    expect(event.type).toBe('audio.delta');
    if (event.type !== 'audio.delta') return;
    expect(event.audio.equals(pcm)).toBe(true);
  });

  it.each([
    { label: 'with code', code: 401 as number | undefined },
    { label: 'without code', code: undefined },
  ])('error $label round trips', ({ code }) => {
    const message = 'Invalid "x-api-key".';
    expect(decodeServerEvent(encodeServerEvent.error(message, code))).toMatchObject({ type: 'server.error', message, code });
  });
});
