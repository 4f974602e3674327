import { describe, expect, it } from 'vitest';
import { decodeStrictBase64, parseTwilioMessage } from '../lib/integrations/twilio-messages.js';
import { ProtocolError } from '../lib/errors.js';

describe('decodeStrictBase64 (media payloads)', () => {
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
  ])('refuses %j (%s)', (text) => {
    expect(decodeStrictBase64(text)).toBeUndefined();
  });

  it('a media message with such a payload is a ProtocolError naming the field', () => {
    const message = JSON.stringify({ event: 'media', media: { payload: 'AA=C' }, streamSid: 'MZ1' });
    expect(() => parseTwilioMessage(message)).toThrow(ProtocolError);
    expect(() => parseTwilioMessage(message)).toThrow(/media\.payload is not valid base64/);
  });
});
