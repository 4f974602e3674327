/**
 * The emulator's "speech recognition": plausible transcripts for transcription, dubbing,
 * subtitles and stories, deterministic for the same input.
 *
 * - A known recording (the repository's speech fixtures, recognised by the SHA-256 of the file
 *   or, for a media URL, by its file name) gets its real sentences at their measured times.
 * - Any other 24 kHz mono PCM16 WAV is segmented by voice activity (20 ms frames, -40 dBFS, an
 *   utterance ends after 600 ms of silence) and each utterance is "Speech segment N.".
 * - Anything else gets one segment, "Transcript of NAME.", as long as its text would be spoken.
 * Word timings divide each segment among its words in proportion to their length. Times are in
 * milliseconds (the service's documentation shows them so).
 */
import { createHash } from 'node:crypto';
import { UtteranceSegmenter } from './vad.js';
import { speechDurationMs } from './synth.js';

export interface EmulatedWord {
  word: string;
  start: number;
  end: number;
  confidence: number;
}

/** A segment in the service's wire shape (milliseconds). */
export interface EmulatedSegment {
  start: number;
  end: number;
  text: string;
  speaker: string;
  words?: EmulatedWord[];
}

interface KnownRecording {
  name: string;
  sha256: string;
  sampleRate: number;
  /** Voiced region, text, and the first 32 hex digits of the SHA-256 of the region's PCM16. */
  utterances: ReadonlyArray<readonly [startSample: number, endSample: number, text: string, pcmSha256: string]>;
}

/** The repository's speech recordings (see `test/fixtures/README.md`), with their measured utterances. */
const KNOWN: readonly KnownRecording[] = [
  {
    name: 'speech-en-24k.wav',
    sha256: '16893ecb2318bd3170aaf305adb034f2337d8fa8c0cef565f5090f322e3f1938',
    sampleRate: 24_000,
    utterances: [
      [7680, 62_880, 'Hello, this is a test of live translation.', 'a7bc3d9ab6993cdaea700d542390cbee'],
      [91_680, 120_960, 'The weather is nice today.', '7c812ee11d22c4f14596a24bfdc69b18'],
      [150_240, 176_160, 'Thank you for listening.', 'a59fef504fb0dd8921aa093a94794d9f'],
    ],
  },
  {
    name: 'sample-en.wav',
    sha256: 'f1acbda54be5f931852d2a41ffd3d60f626ad835002ee47589e7aa51312d622a',
    sampleRate: 24_000,
    utterances: [
      [7200, 86_400, 'Good morning. I would like to book a table for two people tonight.', 'f6789c0dddc7ae5a9ea2f618aa5d2e85'],
      [105_600, 143_040, 'Is there anything available at eight?', '642263ee65d14b706082e20c8944fc88'],
    ],
  },
];

const SPEAKER = 'SPEAKER_0';

/**
 * How transcription (HTTP and live) cuts speech into segments: 20 ms frames, -40 dBFS, 600 ms of
 * silence, 15 s at most, no padding (the regions its known recordings were measured with), with
 * the emulator's own detector and independent of the realtime side's settings.
 */
export const TRANSCRIPTION_SEGMENTER = { frameMs: 20, thresholdDbfs: -40, silenceMs: 600, maxUtteranceMs: 15_000, paddingMs: 0 } as const;

const BY_UTTERANCE = new Map(KNOWN.flatMap((k) => k.utterances.map(([, , text, hash]) => [hash, text] as const)));

/**
 * The text of a known utterance, from its voiced region's PCM16 24 kHz mono (as a voice-activity
 * detector with 20 ms frames at -40 dBFS cuts it from a stream that starts where the recording
 * does), or undefined.
 */
export function knownUtteranceText(pcm: Buffer): string | undefined {
  return BY_UTTERANCE.get(createHash('sha256').update(pcm).digest('hex').slice(0, 32));
}

/** Word timings: the segment's time shared among its words by length, with a little confidence noise. */
export function wordTimings(text: string, start: number, end: number): EmulatedWord[] {
  const words = text.split(/\s+/).filter((w) => w !== '');
  const weights = words.map((w) => w.length + 1);
  const total = weights.reduce((a, b) => a + b, 0);
  let at = start;
  return words.map((word, i) => {
    const span = ((end - start) * weights[i]!) / total;
    const timing = { word, start: Math.round(at), end: Math.round(at + span), confidence: 0.9 + ((word.length * 7 + i) % 10) / 100 };
    at += span;
    return timing;
  });
}

function segment(start: number, end: number, text: string): EmulatedSegment {
  return { start, end, text, speaker: SPEAKER };
}

function fromKnown(known: KnownRecording): EmulatedSegment[] {
  return known.utterances.map(([a, b, text]) => segment(Math.round((a * 1000) / known.sampleRate), Math.round((b * 1000) / known.sampleRate), text));
}

/** The PCM16 data of a canonical 24 kHz mono WAV, or undefined. */
function wavPcm24kMono(file: Buffer): Buffer | undefined {
  if (file.length < 44 || file.toString('latin1', 0, 4) !== 'RIFF' || file.toString('latin1', 8, 12) !== 'WAVE') return undefined;
  let pos = 12;
  let ok = false;
  while (pos + 8 <= file.length) {
    const id = file.toString('latin1', pos, pos + 4);
    const size = file.readUInt32LE(pos + 4);
    const body = pos + 8;
    if (id === 'fmt ' && body + 16 <= file.length) {
      ok = file.readUInt16LE(body) === 1 && file.readUInt16LE(body + 2) === 1 && file.readUInt32LE(body + 4) === 24_000 && file.readUInt16LE(body + 14) === 16;
    } else if (id === 'data') {
      return ok ? file.subarray(body, Math.min(file.length, body + size)) : undefined;
    }
    pos = body + size + (size & 1);
  }
  return undefined;
}

function fromVoiceActivity(pcm: Buffer): EmulatedSegment[] {
  const segmenter = new UtteranceSegmenter(TRANSCRIPTION_SEGMENTER);
  // The end of the file closes an utterance still open.
  return [...segmenter.push(pcm), ...segmenter.end()].map(({ voicedStart, voicedEnd }, i) =>
    segment(Math.round(voicedStart / 48), Math.round(voicedEnd / 48), `Speech segment ${i + 1}.`),
  );
}

/** What the emulator knows of an uploaded file or a media URL. */
export interface MediaDescription {
  /** The file name (an upload's, or the URL's last path segment). */
  name: string;
  sha256?: string;
  /** The whole file, when the emulator kept it. */
  data?: Buffer;
}

/** The transcript of `media`, with word timings when `words` is set. */
export function transcribeMedia(media: MediaDescription, words = false): EmulatedSegment[] {
  const known = KNOWN.find((k) => (media.sha256 !== undefined ? k.sha256 === media.sha256 : k.name === media.name));
  const pcm = known || media.data === undefined ? undefined : wavPcm24kMono(media.data);
  let segments = known ? fromKnown(known) : pcm ? fromVoiceActivity(pcm) : [];
  if (segments.length === 0) {
    const text = `Transcript of ${media.name}.`;
    segments = [segment(0, speechDurationMs(text), text)];
  }
  return words ? segments.map((s) => ({ ...s, words: wordTimings(s.text, s.start, s.end) })) : segments;
}

/** The file name of a media URL: its last path segment, decoded. */
export function mediaNameOfUrl(url: string): string {
  try {
    const last = new URL(url).pathname
      .split('/')
      .filter((p) => p !== '')
      .pop();
    return last ? decodeURIComponent(last) : 'media';
  } catch {
    return 'media';
  }
}
