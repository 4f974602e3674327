import { describe, expect, it } from 'vitest';
import { twilioClearMessage, twilioMarkMessage, twilioMediaMessage } from '../lib/integrations/twilio-messages.js';
import { twilioMessageJson } from '../lib/integrations/twilio-outbound.js';

describe('twilioMessageJson (outbound text)', () => {
  const audio = Buffer.from([0xff, 0x7f, 0x00, 0x80]);
  it.each(['MZ1', 'MZ"quoted"\\', 'MZ\u0001line\nbreak', ''])('gives what JSON.stringify gives for stream id %j', (sid) => {
    const messages = [
      { event: 'media' as const, streamSid: sid, media: { payload: audio.toString('base64') } },
      { event: 'mark' as const, streamSid: sid, mark: { name: 'm"1' } },
      { event: 'clear' as const, streamSid: sid },
    ];
    for (const message of messages) {
      const text = twilioMessageJson(message);
      expect(text).toBe(JSON.stringify(message));
      expect(JSON.parse(text)).toEqual(message);
    }
  });

  it('follows the stream id from one call to the next', () => {
    const a = twilioMediaMessage('MZa', audio);
    const b = twilioMediaMessage('MZb', audio);
    expect([twilioMessageJson(a), twilioMessageJson(b), twilioMessageJson(a)]).toEqual([JSON.stringify(a), JSON.stringify(b), JSON.stringify(a)]);
    expect(twilioMessageJson(twilioMarkMessage('MZa', 'x'))).toBe(JSON.stringify(twilioMarkMessage('MZa', 'x')));
    expect(twilioMessageJson(twilioClearMessage('MZa'))).toBe('{"event":"clear","streamSid":"MZa"}');
  });
});
