/**
 * A program using rt-translate as an application would, compiled by package.test.ts against the
 * built declarations (`dist/`) through the package's `exports`. It is type-checked, never run.
 */
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';
import { pipeline } from 'node:stream/promises';
import {
  AudioInputError,
  DiscordPlaybackAdapter,
  DiscordReceiveAdapter,
  LocalizationClient,
  PcmChunker,
  REALTIME_LANGUAGES,
  RealtimeTranslateStream,
  RtTranslateError,
  TwilioMediaBridge,
  ValidationError,
  WavFileWriter,
  bridgeTwilioSocket,
  createRealtimeRelay,
  fromServiceFormat,
  openAudioSource,
  toServiceFormat,
  translateSpeaker,
  type AudioSourceOptions,
  type RealtimeEvent,
  type RealtimeLanguage,
  type RealtimeRelayOptions,
  type RealtimeTranslateOptions,
  type RelayStats,
} from 'rt-translate';
import { EMULATOR_DEFAULT_API_KEY, startEmulator, type RunningEmulator } from 'rt-translate/emulator';
import { MAX_APPEND_AUDIO_BYTES, decodeServerEvent, encodeAudioAppend, parseTwilioMessage } from 'rt-translate/protocol';
import { designResampler, encodeMulaw, oggPageCrc } from 'rt-translate/dsp';
import { backoffDelay, createTranslatedTts, renderTranscript } from 'rt-translate/http';

// Building blocks are not on the root; each line below fails to compile if one is.
// @ts-expect-error on rt-translate/dsp
import { oggPageCrc as rootCrc } from 'rt-translate';
// @ts-expect-error on rt-translate/dsp
import { averageInt16 } from 'rt-translate';
// @ts-expect-error on rt-translate/dsp
import { designResampler as rootDesign } from 'rt-translate';
// @ts-expect-error on rt-translate/dsp
import { PASSBAND_EDGE } from 'rt-translate';
// @ts-expect-error on rt-translate/protocol
import { encodeSessionUpdate } from 'rt-translate';
// @ts-expect-error the emulator is on its own subpath
import { startEmulator as rootEmulator } from 'rt-translate';
// @ts-expect-error on rt-translate/http
import { backoffDelay as rootBackoff } from 'rt-translate';
// @ts-expect-error on rt-translate/http
import { createTranslatedTts as rootCreate } from 'rt-translate';
// @ts-expect-error a single conversion step: on rt-translate/dsp (createConverter is on the root)
import { Resampler as rootResampler } from 'rt-translate';
// @ts-expect-error a specific HTTP error: on rt-translate/http (its base class is on the root)
import { HttpRateLimitError as rootRateLimit } from 'rt-translate';

void [rootCrc, averageInt16, rootDesign, PASSBAND_EDGE, encodeSessionUpdate, rootEmulator, rootResampler, rootRateLimit];

/** Translates a file through the emulator into a WAV file. */
export async function translateFile(input: string, output: string, to: RealtimeLanguage = 'es-es'): Promise<number> {
  const emulator: RunningEmulator = await startEmulator({ port: 0 });
  const options: RealtimeTranslateOptions = { from: 'en-us', to, apiKey: EMULATOR_DEFAULT_API_KEY, realtimeUrl: emulator.realtimeUrl };
  const translator = new RealtimeTranslateStream(options);
  translator.on('transcript.done', (text: string) => console.log(`heard: ${text}`));
  translator.on('event', (event: RealtimeEvent) => console.log(event.type));
  const sourceOptions: AudioSourceOptions = { ffmpegPath: '/usr/bin/ffmpeg', onFailure: 'end' };
  try {
    const source = await openAudioSource(input, { format: 'wav' }, sourceOptions);
    await pipeline(source, new PcmChunker({ chunkMs: 40 }), translator, new WavFileWriter(output, { rate: 24_000, channels: 1 }));
    return source.failure === undefined ? 0 : 2;
  } catch (error) {
    if (error instanceof AudioInputError) return error.reason === 'empty' ? 2 : 1;
    if (error instanceof ValidationError) console.error(error.field, error.accepted);
    if (error instanceof RtTranslateError) console.error(error.code, error.retryable);
    throw error;
  } finally {
    await emulator.close();
  }
}

/** A relay for browsers on an app's own server, a token for one of its users. */
export function relayFor(apiKey: string): { token: string; stats: RelayStats } {
  const options: RealtimeRelayOptions = {
    server: createServer(),
    apiKey,
    authorize: (req) => (req.headers.cookie?.includes('session=') ? { key: 'user-1', maxSessions: 2 } : false),
    allowedOrigins: ['https://app.example.com'],
    reconnect: { maxAttempts: 3 },
  };
  const relay = createRealtimeRelay(options);
  return { token: relay.mintToken({ ttlMs: 60_000, maxSessions: 1 }), stats: relay.stats };
}

/** The other parts, as their types allow them to be used. */
export async function elsewhere(stdin: NodeJS.ReadableStream): Promise<void> {
  const languages: readonly string[] = REALTIME_LANGUAGES;
  const client = new LocalizationClient({ baseUrl: 'https://example.com/apis', apiKey: 'key' });
  await pipeline(
    stdin,
    toServiceFormat({ format: 's16le', rate: 48_000, channels: 2 }),
    fromServiceFormat({ format: 'mulaw', rate: 8000, channels: 1 }),
    createWriteStream('out.ulaw'),
  );
  const receiver = new DiscordReceiveAdapter({ opusBackend: 'auto' });
  const playback = new DiscordPlaybackAdapter({ output: 'opus' });
  const speaker = translateSpeaker({ opusPackets: receiver, from: 'en-us', to: 'de-de' });
  const bridge = new TwilioMediaBridge({ from: 'en-us', to: 'es-es' });
  const append: string = encodeAudioAppend(Buffer.alloc(480));
  const event = decodeServerEvent('{"type":"session.updated"}');
  const twilio = parseTwilioMessage('{"event":"connected"}');
  const crc: number = oggPageCrc(new Uint8Array(28));
  const mu: number = encodeMulaw(1000);
  void [
    languages,
    client,
    playback,
    speaker,
    bridge,
    bridgeTwilioSocket,
    append,
    event,
    twilio,
    crc,
    mu,
    designResampler,
    MAX_APPEND_AUDIO_BYTES,
    backoffDelay,
    createTranslatedTts,
    renderTranscript,
  ];
}
