import { describe, expect, it } from 'vitest';
import { parseTwilioMessage } from '../lib/integrations/twilio-messages.js';
import { decodeStrictBase64, isBase64 } from '../lib/realtime/codec.js';
import { prng } from '../lib/emulator/synth.js';
import { ProtocolError } from '../lib/errors.js';

describe('decodeStrictBase64 (appends, media payloads)', () => {
  it.each([
    ['', ''],
    ['AAEC', '000102'],
    ['//79/A==', 'fffefdfc'],
    ['+/8=', 'fbff'],
    ['AAECAwQF', '000102030405'],
  ])('decodes %j', (text, hex) => {
    expect(decodeStrictBase64(text)?.toString('hex')).toBe(hex);
  });

  it.each([
    ['not base64!', 'characters outside the alphabet'],
    ['AAE', 'a length that is not a multiple of 4'],
    ['AA=C', 'padding inside'],
    ['A===', 'three padding characters'],
    ['====', 'padding only'],
    ['AA\nC', 'a line break'],
    ['AA C', 'a space'],
    ['-_8=', 'the URL-safe alphabet'],
    ['AAé=', 'a non-ASCII letter'],
    ['ŁAAA', 'a letter whose low byte is "A" (Node decodes it as one)'],
    ['AA\u0141=', 'the same before the padding'],
  ])('refuses %j (%s)', (text) => {
    expect(decodeStrictBase64(text)).toBeUndefined();
  });

  it.each(['AA=C', 'ŁAAA'])('a media message with the payload %j is a ProtocolError naming the field', (payload) => {
    const message = JSON.stringify({ event: 'media', media: { payload }, streamSid: 'MZ1' });
    expect(() => parseTwilioMessage(message)).toThrow(ProtocolError);
    expect(() => parseTwilioMessage(message)).toThrow(/media\.payload is not valid base64/);
  });

  it('accepts exactly what isBase64 accepts, and decodes it as Node does', () => {
    // The base64 of random bytes (padded or not), as it is or with one character replaced by
    // one of the alphabet, the padding, or characters Node's decoder skips or misreads; and
    // lengths that are not a multiple of 4.
    const letters = ['A', 'z', '0', '+', '/', '=', '-', '_', ' ', '\n', '\u0000', '*', 'é', 'Ł', '\ud800'];
    const next = prng(11);
    const random = (n: number) => Math.floor(next() * n);
    let accepted = 0;
    let padded = 0;
    let longest = 0;
    for (let k = 0; k < 20_000; k++) {
      let text = Buffer.from(Array.from({ length: random(13) }, () => random(256))).toString('base64');
      if (random(2) === 0 && text.length > 0) {
        const at = random(text.length);
        text = text.slice(0, at) + letters[random(letters.length)] + text.slice(at + 1);
      }
      if (random(8) === 0) text = text.slice(0, Math.max(0, text.length - 1 - random(3)));
      const decoded = decodeStrictBase64(text);
      expect(decoded !== undefined, JSON.stringify(text)).toBe(isBase64(text));
      if (decoded === undefined) continue;
      accepted++;
      if (text.endsWith('=')) padded++;
      longest = Math.max(longest, text.length);
      expect(decoded.equals(Buffer.from(text, 'base64'))).toBe(true);
    }
    expect(accepted).toBeGreaterThan(1000);
    expect(padded).toBeGreaterThan(200);
    expect(longest).toBeGreaterThanOrEqual(12);
  });
});
