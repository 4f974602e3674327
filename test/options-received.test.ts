/**
 * What a bad option received is told one way everywhere (`describeReceived`): numbers and short
 * strings as they are, a long string by its length only, so a key pasted into the wrong option
 * never reaches an error message, a log or a terminal.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../lib/errors.js';
import { describeReceived } from '../lib/options.js';
import { validateSampleFormat } from '../lib/audio/audio-format.js';
import { PcmChunker } from '../lib/audio/pcm-chunker.js';
import { openAudioSource } from '../lib/audio/source.js';
import { Pacer } from '../lib/audio/pacer.js';
import { G711Decoder } from '../lib/audio/g711.js';
import { Readable } from 'node:stream';

const KEY = 'sk-live-4f1d8a2c6e9b7d3a5c1e8f2b6d4a9c7e';

function refusal(make: () => unknown): ValidationError {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('no refusal');
}

describe('describeReceived', () => {
  it.each([
    [42, '42'],
    ['s16le', '"s16le"'],
    [KEY, `a string of ${KEY.length} characters`],
    [null, 'null'],
    [undefined, 'undefined'],
    [[1], 'an array'],
    [{ a: 1 }, 'an object'],
    [new Map(), 'an object (Map)'],
  ])('%s is told as %s', (value, told) => {
    expect(describeReceived(value)).toBe(told);
  });
});

describe('a key given as an audio option stays out of the message', () => {
  const cases: Array<[string, () => unknown]> = [
    ['validateSampleFormat', () => validateSampleFormat(KEY, 'format')],
    ['PcmChunker partialFrame', () => new PcmChunker({ partialFrame: KEY as never })],
    ['Pacer sampleRate', () => new Pacer({ sampleRate: KEY as never })],
    ['G711Decoder law', () => new G711Decoder({ law: KEY as never })],
  ];
  it.each(cases)('%s', (_name, make) => {
    const error = refusal(make);
    expect(error.message).not.toContain(KEY);
    expect(error.received).toBe(`a string of ${KEY.length} characters`);
  });

  it('openAudioSource format', async () => {
    const error = await openAudioSource(Readable.from([Buffer.alloc(4)]), { format: KEY as never }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).not.toContain(KEY);
  });
});
