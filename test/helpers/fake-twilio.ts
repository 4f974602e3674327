/**
 * Twilio's side of a Media Streams call, for tests: the speech fixture as a caller's 8 kHz
 * mu-law in 20 ms frames, a `ws` client that speaks as Twilio does (`connected`, `start`, media
 * stamped with their stream time, `stop`, marks echoed) and records what the bridge sends, and
 * the bridge's answers grouped by the marks that follow them.
 */
import { WebSocket } from 'ws';
import { SERVICE_FORMAT, resolveDescription, type AudioDescription } from '../../lib/audio/audio-format.js';
import { planConversion } from '../../lib/audio/convert.js';
import { TWILIO_FRAME_BYTES } from '../../lib/integrations/twilio.js';
import { loadSpeechFixture } from './speech.js';

export const MULAW: AudioDescription = { format: 'mulaw', rate: 8000, channels: 1 };
export const SERVICE: AudioDescription = { ...SERVICE_FORMAT };
const FIXTURE = loadSpeechFixture();

/** Runs a whole buffer through a fresh conversion (the bridge's converters are chunking-invariant). */
export function convert(from: AudioDescription, to: AudioDescription, data: Buffer): Buffer {
  const { processor } = planConversion(resolveDescription(from, ''), resolveDescription(to, ''));
  return Buffer.concat([processor.process(data), processor.flush()]);
}

/** Pads mu-law with silence (0xFF) to whole 20 ms frames. */
export function padToFrames(mulaw: Buffer): Buffer {
  const rest = mulaw.length % TWILIO_FRAME_BYTES;
  return rest === 0 ? mulaw : Buffer.concat([mulaw, Buffer.alloc(TWILIO_FRAME_BYTES - rest, 0xff)]);
}

/** The caller: the fixture at 8 kHz mu-law in 160-byte frames. */
export const CALLER = padToFrames(convert(SERVICE, MULAW, FIXTURE.pcm));
export const CALLER_FRAMES = Array.from({ length: CALLER.length / TWILIO_FRAME_BYTES }, (_, k) =>
  CALLER.subarray(k * TWILIO_FRAME_BYTES, (k + 1) * TWILIO_FRAME_BYTES),
);
export const STREAM_SID = 'MZ00000000000000000000000000000001';

export type Outbound = { event: string; streamSid?: string; media?: { payload: string }; mark?: { name: string } };

/** A `ws` client speaking as Twilio does; records every message the bridge sends. */
export class FakeTwilio {
  readonly received: Outbound[] = [];
  /** Binary frames received (Twilio expects text frames only). */
  binaryFrames = 0;
  readonly closed: Promise<number>;
  #sequence = 0;
  #waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) this.binaryFrames += 1;
      this.received.push(JSON.parse(data.toString()) as Outbound);
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.closed = new Promise((resolve) => ws.once('close', (code) => resolve(code)));
  }

  static async connect(url: string, headers?: Record<string, string>): Promise<FakeTwilio> {
    const ws = new WebSocket(url, headers ? { headers } : {});
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new FakeTwilio(ws);
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** `connected` then `start`, as Twilio opens a stream. */
  open(mediaFormat: unknown = { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }): void {
    this.send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
    this.send({
      event: 'start',
      sequenceNumber: String(++this.#sequence),
      start: {
        accountSid: 'AC00000000000000000000000000000001',
        streamSid: STREAM_SID,
        callSid: 'CA00000000000000000000000000000001',
        tracks: ['inbound'],
        mediaFormat,
        customParameters: {},
      },
      streamSid: STREAM_SID,
    });
  }

  /** Caller frames `[from, to)`, stamped with their stream time (20 ms each), wire strings as Twilio sends. */
  media(from: number, to: number, frames: Buffer[] = CALLER_FRAMES): void {
    for (let k = from; k < to; k++) {
      this.send({
        event: 'media',
        sequenceNumber: String(++this.#sequence),
        media: { track: 'inbound', chunk: String(k + 1), timestamp: String(k * 20), payload: frames[k]!.toString('base64') },
        streamSid: STREAM_SID,
      });
    }
  }

  stop(): void {
    this.send({
      event: 'stop',
      sequenceNumber: String(++this.#sequence),
      stop: { accountSid: 'AC00000000000000000000000000000001', callSid: 'CA00000000000000000000000000000001' },
      streamSid: STREAM_SID,
    });
  }

  /** Echoes a mark back, as Twilio does once the audio before it has played. */
  played(name: string): void {
    this.send({ event: 'mark', sequenceNumber: String(++this.#sequence), streamSid: STREAM_SID, mark: { name } });
  }

  /** Resolves once a received message satisfies `test` (already received ones count). */
  async waitFor(test: (message: Outbound) => boolean): Promise<Outbound> {
    for (;;) {
      const found = this.received.find(test);
      if (found) return found;
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }
}

/** The media payloads of `received`, grouped by the mark that follows them; `tail` is what followed the last mark. */
export function groupByMark(received: Outbound[]): { groups: Array<{ mark: string; audio: Buffer; sizes: number[] }>; tail: Buffer } {
  const groups: Array<{ mark: string; audio: Buffer; sizes: number[] }> = [];
  let pieces: Buffer[] = [];
  for (const message of received) {
    if (message.event === 'media') pieces.push(Buffer.from(message.media!.payload, 'base64'));
    if (message.event === 'mark') {
      groups.push({ mark: message.mark!.name, audio: Buffer.concat(pieces), sizes: pieces.map((p) => p.length) });
      pieces = [];
    }
  }
  return { groups, tail: Buffer.concat(pieces) };
}
