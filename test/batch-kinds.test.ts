/**
 * The kinds of batch job (lib/batch/kinds.ts): a record as a job file holds it (JSON values, or
 * CSV strings) checked and turned into the request its create sends; every mistake a
 * `ValidationError` naming the field as the job file spells it, before any request; the digest
 * that tells a rerun whether a job changed.
 */
import { describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { basename, dirname } from 'node:path';
import { ValidationError } from '../lib/errors.js';
import { BATCH_KINDS, checkJob } from '../lib/batch/kinds.js';

function refusal(record: Record<string, unknown>): ValidationError {
  try {
    checkJob(record, 3);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error(`accepted ${JSON.stringify(record)}`);
}

describe('checkJob', () => {
  it("builds each kind's request from the fields of the command of the same name", () => {
    expect(checkJob({ id: 'a', kind: 'tts', text: 'Hello', language: 'en-us', voice: 12, format: 'flac', sampleRate: 16000 }, 1)).toMatchObject({
      id: 'a',
      kind: 'tts',
      line: 1,
      request: { text: 'Hello', language: 'en-us', voiceId: 12, outputConfiguration: { format: 'flac', sampleRate: 16000 } },
    });
    expect(checkJob({ id: 'b', kind: 'translated-tts', text: 'Hello', from: 'en-us', to: 'es-es' }, 2).request).toMatchObject({
      text: 'Hello',
      sourceLanguage: 'en-us',
      targetLanguage: 'es-es',
    });
    expect(checkJob({ id: 'c', kind: 'translate-text', texts: ['one', 'two'], from: 'en-us', to: 'fr-fr', formal: true }, 3).request).toMatchObject({
      texts: ['one', 'two'],
      formality: 2,
    });
    expect(checkJob({ id: 'd', kind: 'transcribe', url: 'https://media.example/a.mp3', language: 'en-us', format: 'srt' }, 4).request).toMatchObject({
      mediaUrl: 'https://media.example/a.mp3',
    });
    expect(checkJob({ id: 'e', kind: 'subtitles', url: 'https://media.example/a.mp4', from: 'en-us' }, 5).request).toMatchObject({ sourceLanguage: 'en-us' });
    expect(checkJob({ id: 'f', kind: 'dub', url: 'https://media.example/a.mp4', from: 'en-us', to: ['es-es', 'de-de'] }, 6).request).toMatchObject({
      videoUrl: 'https://media.example/a.mp4',
      targetLanguages: ['es-es', 'de-de'],
    });
    expect(BATCH_KINDS).toHaveLength(6);
  });

  it('types the strings of a CSV row: numbers, flags and comma-separated lists; empty cells are absent', () => {
    const job = checkJob({ id: '17', kind: 'dub', url: 'https://media.example/a.mp4', from: 'en-us', to: 'es-es, de-de', mode: '' }, 18);
    expect(job.id).toBe('17');
    expect(job.fields).toEqual({ url: 'https://media.example/a.mp4', from: 'en-us', to: ['es-es', 'de-de'] });
    expect(checkJob({ id: 'x', kind: 'tts', text: 'Hello', language: 'en-us', voice: '42' }, 2).fields.voice).toBe(42);
    expect(checkJob({ id: 'y', kind: 'translate-text', text: 'Hi', from: 'en-us', to: 'es-es', casual: 'true' }, 2).request.formality).toBe(1);
  });

  it('names the field as the job file spells it', () => {
    expect(refusal({ id: 'a', kind: 'tts', language: 'en-us' })).toMatchObject({ field: 'text' });
    expect(refusal({ id: 'a', kind: 'tts', text: 'Hello', language: 'en-us', voice: 'twelve' })).toMatchObject({ field: 'voice', received: '"twelve"' });
    expect(refusal({ id: 'a', kind: 'tts', text: 'Hello', language: 'en-us', colour: 'red' }).message).toContain(
      'a field of tts jobs: text, language, voice, format',
    );
    expect(refusal({ id: 'a', kind: 'tts', text: 'Hello', language: 'en-us', format: 'ogg' }).accepted).toContain('one of wav, flac, adts, mp3');
    // The service's own limits, checked before any request: the streaming speech takes 3 to 3000 characters.
    expect(refusal({ id: 'a', kind: 'tts', text: 'Hi', language: 'en-us' })).toMatchObject({ field: 'text', accepted: 'a string of 3 to 3000 characters' });
    expect(refusal({ id: 'a', kind: 'translated-tts', text: 'x', from: 'en-us', to: 'es-es', format: 'mp3' }).accepted).toBe('one of flac, wav');
    expect(refusal({ id: 'a', kind: 'translated-tts', text: 'x', from: 'en-us', to: 'nowhere' }).field).toBe('to');
    expect(refusal({ id: 'a', kind: 'dub', url: 'https://media.example/a.mp4', from: 'en-us', to: [] }).field).toBe('to');
    expect(refusal({ id: 'a', kind: 'speak', text: 'x' }).message).toContain('one of tts, translated-tts, translate-text, transcribe, subtitles, dub');
    expect(refusal({ kind: 'tts', text: 'x', language: 'en-us' }).field).toBe('id');
    expect(refusal({ id: '../escape', kind: 'tts', text: 'x', language: 'en-us' }).field).toBe('id');
    expect(refusal({ id: 'a', kind: 'transcribe', url: 'ftp://media.example/a.mp3', language: 'en-us' }).field).toBe('url');
  });

  it('gives a job the same digest however its fields are ordered or typed, another when a field changes', () => {
    const a = checkJob({ id: 'a', kind: 'tts', text: 'Hello', language: 'en-us', voice: 12 }, 1);
    const b = checkJob({ voice: '12', language: 'en-us', text: 'Hello', kind: 'tts', id: 'a' }, 9);
    const c = checkJob({ id: 'a', kind: 'tts', text: 'Hello!', language: 'en-us', voice: 12 }, 1);
    expect(a.digest).toBe(b.digest);
    expect(a.digest).not.toBe(c.digest);
  });

  it("uploads a transcribe job's input, found from the job file's folder, and checks it is there", () => {
    const fixture = fileURLToPath(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
    const job = checkJob({ id: 'up', kind: 'transcribe', input: basename(fixture), language: 'en-us' }, 1, dirname(fixture));
    expect(job.request).toMatchObject({ mediaFile: fixture, language: 'en-us' });
    expect(job.request.mediaUrl).toBeUndefined();
    expect(refusal({ id: 'up', kind: 'transcribe', input: 'no-such-file.wav', language: 'en-us' })).toMatchObject({ field: 'input' });
    expect(refusal({ id: 'up', kind: 'transcribe', language: 'en-us' })).toMatchObject({ field: 'url', received: 'neither' });
    expect(refusal({ id: 'up', kind: 'transcribe', url: 'https://media.example/a.mp3', input: fixture, language: 'en-us' })).toMatchObject({
      received: 'both',
    });
  });
});
