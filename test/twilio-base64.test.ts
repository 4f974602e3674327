import { describe, expect, it } from 'vitest';
import { parseTwilioMessage } from '../lib/integrations/twilio-messages.js';
import { decodeStrictBase64, isBase64 } from '../lib/realtime/codec.js';
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
    // Random text over the alphabet, the padding and characters Node's decoder skips or
    // misreads, in lengths around multiples of 4.
    const letters = ['A', 'z', '0', '+', '/', '=', '=', '-', '_', ' ', '\n', '*', 'é', 'Ł', 'Ł'];
    let seed = 11;
    const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    let accepted = 0;
    for (let k = 0; k < 20_000; k++) {
      let text = '';
      const length = 4 * random(4) + [0, 0, 0, 1, 2, 3][random(6)]!;
      for (let i = 0; i < length; i++) text += random(3) === 0 ? letters[random(letters.length)] : 'AQ+/'[random(4)];
      const decoded = decodeStrictBase64(text);
      expect(decoded !== undefined, JSON.stringify(text)).toBe(isBase64(text));
      if (decoded === undefined) continue;
      accepted++;
      expect(decoded.equals(Buffer.from(text, 'base64'))).toBe(true);
    }
    expect(accepted).toBeGreaterThan(1000);
  });
});
