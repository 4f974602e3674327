/**
 * Running a realtime stream over some input with pipeline() and keeping everything it gave:
 * the audio, every event (as `events()` would yield them), the error if it failed, and whether
 * its readable side ended before the session did.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { RtTranslateError } from '../../lib/errors.js';
import type { RealtimeEvent } from '../../lib/realtime/realtime-events.js';
import type { RealtimeTranslateStream } from '../../lib/realtime/realtime-translate-stream.js';
import { collector } from './streams.js';

export interface SessionOutcome {
  error: RtTranslateError | undefined;
  output: Buffer;
  events: RealtimeEvent[];
  warnings: RtTranslateError[];
  transcripts: string[];
  /** The readable side ended before the `ended` event (it must not). */
  endedEarly: boolean;
}

/** Starts recording every event of `stream` (call before anything can happen). */
export function recordEvents(stream: RealtimeTranslateStream): RealtimeEvent[] {
  const events: RealtimeEvent[] = [];
  stream.on('event', (event) => events.push(event));
  return events;
}

/**
 * Pipes `input` through `stream` into memory and resolves once the pipeline settles (never
 * rejects: a failure is `error`). Pass the array from `recordEvents` when events must be
 * recorded from before the call.
 */
export async function runSession(
  stream: RealtimeTranslateStream,
  input: Iterable<Buffer> | AsyncIterable<Buffer> | Readable,
  events: RealtimeEvent[] = recordEvents(stream),
): Promise<SessionOutcome> {
  const output: Buffer[] = [];
  let endedEarly = false;
  stream.once('end', () => {
    if (!events.some((e) => e.type === 'ended')) endedEarly = true;
  });
  let error: RtTranslateError | undefined;
  try {
    await pipeline(input instanceof Readable ? input : Readable.from(input), stream, collector(output));
  } catch (caught) {
    error = caught as RtTranslateError;
  }
  return {
    error,
    output: Buffer.concat(output),
    events,
    warnings: events.flatMap((e) => (e.type === 'warning' ? [e.warning] : [])),
    transcripts: events.flatMap((e) => (e.type === 'transcript.done' ? [e.text] : [])),
    endedEarly,
  };
}
