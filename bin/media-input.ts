/**
 * Recordings a command uploads as they are (`transcribe -i`, `voices create --file`): the
 * service decodes them, so they must be media files it can read, recognised by their header
 * (`sniffAudio`: WAV, Ogg, FLAC, MP3, MP4/M4A/MOV, WebM/Matroska, AAC, AIFF, ...). Anything else
 * is refused before any request, saying what it looks like (`sniffOther`: text, JSON, an image,
 * ...; else unknown binary data, or raw samples, which carry no header the service could read).
 * Only the first bytes are read; standard input gets them back and is uploaded whole.
 */
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { isSniffResult, sniffAudio, SNIFF_BYTES, OTHER_SNIFF_BYTES, sniffOther, peekStart } from '../lib/dsp.js';
import { UsageError, type CliIo } from './cli.js';
import { checkInputFile } from './file-errors.js';

/** Bytes read from a recording's start: enough for every header `sniffAudio` confirms, and to call text text. */
const HEAD_BYTES = Math.max(OTHER_SNIFF_BYTES, 8192);

/** A recording that is not a media file: a usage error naming the flag. */
export class NotMediaError extends UsageError {
  constructor(message: string) {
    super(message, 'RTT_INPUT');
    this.name = 'NotMediaError';
  }
}

/**
 * Refuses `head` (the first bytes of the recording given with `flag`, `complete` when they are
 * all of it) unless a media header starts it; `label` names it (`-i talk.wav`, `-i -`).
 */
export function checkMediaHead(head: Buffer, complete: boolean, label: string, accepted: string): void {
  if (head.length === 0) throw new NotMediaError(`${label} is empty: there is no recording to upload.`);
  let result = sniffAudio(head.subarray(0, SNIFF_BYTES), complete && head.length <= SNIFF_BYTES);
  if (!isSniffResult(result)) result = sniffAudio(head.subarray(0, result.needBytes), complete || head.length < result.needBytes);
  if (isSniffResult(result) && result.kind !== 'unknown') return;
  const other = sniffOther(head, complete);
  const what = other !== undefined ? `looks like ${other}` : 'has no media header (unknown binary data, or raw samples without a header)';
  throw new NotMediaError(`${label} ${what}, not a recording the service can read: it takes ${accepted}. Convert it first, e.g. ffmpeg -i IN OUT.wav.`);
}

/**
 * Checks the recording of `flag` before it is uploaded: a file (`path`) must be readable (a
 * `FileError` otherwise) and a media file; standard input (`-`) too, and the stream returned
 * then gives every byte, those read to check it included. Returns the resolved path, or the
 * stream to upload.
 */
export async function checkMediaInput(io: CliIo, path: string, flag: string, accepted: string): Promise<string | Readable> {
  if (path === '-') {
    const { head, stream } = await peekStart(io.stdin, HEAD_BYTES);
    checkMediaHead(head, head.length < HEAD_BYTES, `${flag} - (standard input)`, accepted);
    return stream;
  }
  const absolute = await checkInputFile(io, path, flag, true);
  const handle = await open(absolute, 'r');
  try {
    const head = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await handle.read(head, 0, HEAD_BYTES, 0);
    checkMediaHead(head.subarray(0, bytesRead), bytesRead < HEAD_BYTES, `${flag} ${path}`, accepted);
  } finally {
    await handle.close();
  }
  return absolute;
}
