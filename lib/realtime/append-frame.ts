/**
 * The audio append as the realtime stream sends it: a string, or from `APPEND_BYTES_FROM` the
 * same text as bytes, sent as a text frame. Internal (not on `rt-translate/protocol`): a Buffer
 * from here must be sent with `binary: false`, which a caller of `ws.send` could easily miss.
 */
import { encodeAudioAppend } from './codec.js';

/**
 * Audio from which an append is sent as bytes rather than as a string: 16 KiB (a third of a
 * second).
 *
 * A string written to the socket is encoded to UTF-8 by Node in memory it frees as soon as the
 * write completes, which costs nothing to the collector but looks at every character; bytes
 * are a plain copy of the base64 but a buffer the collector must find. At the 100 ms appends of
 * a live source (6.4 KB of text) the string is far cheaper: 200 sessions in
 * `npm run bench -- concurrency` cost 2.3 CPU-s per session-hour as strings against 3.1 to 3.4
 * as bytes. At the 64 KiB appends of a file (87 KB of text) the bytes take half the CPU
 * (`npm run bench -- append`).
 */
export const APPEND_BYTES_FROM = 16 * 1024;

/**
 * `encodeAudioAppend` as the bytes of its text frame, the same bytes: the text is ASCII (base64
 * in fixed JSON), so its Latin-1 bytes are its UTF-8 bytes, and Latin-1 is a plain copy of V8's
 * one-byte string. Sent as a text frame (`send(bytes, cb, false)`).
 */
export function encodeAudioAppendBytes(pcm: Uint8Array): Buffer {
  return Buffer.from(encodeAudioAppend(pcm), 'latin1');
}

/** An append's text frame in the cheaper form for its size (see `APPEND_BYTES_FROM`). */
export function encodeAudioAppendFrame(pcm: Uint8Array): string | Buffer {
  return pcm.byteLength >= APPEND_BYTES_FROM ? encodeAudioAppendBytes(pcm) : encodeAudioAppend(pcm);
}
