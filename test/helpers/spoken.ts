/**
 * The speech fixture as a speaker says it: three sentences, each part of the input written only
 * once the service has begun answering the sentence before (its transcript has come), so the
 * service hears the next sentence after its previous answer began, as from a microphone. Paced
 * by the service's answers, never by the clock; a service that answers only once the input
 * pauses answers during the wait, so the script always goes on.
 *
 * Each part but the first starts 200 ms into a sentence: enough for any detector to hear it
 * begin (a service that holds an answer until speech comes again then sends it), while most of
 * the sentence is still to come.
 */
import { loadSpeechFixture } from './speech.js';

const fixture = loadSpeechFixture();

/** 200 ms into a sentence, in samples. */
const INTO_SENTENCE = 4800;

export interface SpokenPart {
  /** PCM16 LE mono 24 kHz. */
  audio: Buffer;
  /** Written once this many transcripts have come (0: at once). */
  afterTranscripts: number;
}

/** The fixture in three parts: each later one once the previous sentence's transcript came. */
export function spokenFixture(pcm: Buffer = fixture.pcm): SpokenPart[] {
  const cuts = fixture.utterances.slice(1).map((u) => (u.startSample + INTO_SENTENCE) * 2);
  const edges = [0, ...cuts, pcm.length];
  return edges.slice(1).map((end, i) => ({ audio: pcm.subarray(edges[i]!, end), afterTranscripts: i }));
}

/**
 * The parts as an async iterable for a stream's writable side: each part once `transcripts()`
 * has reached its count; `changed` is awaited between checks (an event that may change it).
 */
export async function* speak(parts: readonly SpokenPart[], transcripts: () => number, changed: () => Promise<unknown>): AsyncGenerator<Buffer> {
  for (const part of parts) {
    while (transcripts() < part.afterTranscripts) await changed();
    yield part.audio;
  }
}
