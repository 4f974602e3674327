/**
 * The audio append as the realtime stream sends it: a string, or from `APPEND_BYTES_FROM` the
 * same text as bytes, sent as a text frame. Internal (not on `rt-translate/protocol`): a Buffer
 * from here must be sent with `binary: false`, which a caller of `ws.send` could easily miss.
 */
import { alignKernel, firKernel } from '../audio/wasm/fir.js';
import { APPEND_PIECE_BYTES, encodeAudioAppend, MAX_APPEND_AUDIO_BYTES, REALTIME_BYTES_PER_FRAME } from './codec.js';

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

/** The text around the base64, from the codec's own empty append (one definition of the event). */
const EMPTY_APPEND = encodeAudioAppend(new Uint8Array(0));
const PREFIX = Buffer.from(EMPTY_APPEND.slice(0, EMPTY_APPEND.indexOf('"audio":"') + '"audio":"'.length), 'latin1');
const SUFFIX = Buffer.from(EMPTY_APPEND.slice(PREFIX.length), 'latin1');

const base64Length = (bytes: number): number => Math.ceil(bytes / 3) * 4;

/**
 * Frames of appends of up to `APPEND_PIECE_BYTES` of audio (the stream's default piece) are
 * written into buffers of this size, which are used again once the socket is done with them
 * (`releaseAppendFrame`): a file piped through at full speed then allocates no frame memory
 * after its first few appends.
 */
const FRAME_CAPACITY = PREFIX.length + base64Length(APPEND_PIECE_BYTES) + SUFFIX.length;
/**
 * Spare frame buffers for the whole process (2.8 MB at most): the frames one socket's send
 * buffer holds at its default bound (1 MiB, 12 frames), more than twice over; more spares are
 * let go.
 */
const MAX_SPARE_FRAMES = 32;
const spareFrames: Buffer[] = [];

/**
 * `encodeAudioAppend` as the bytes of its text frame, the same bytes: the text is ASCII (base64
 * in fixed JSON), so it can be written as bytes directly. The kernel writes the base64 straight
 * into the frame, so no string of the audio's size is made (each would be young-generation
 * garbage, and at full speed V8 grows its young generation to hold them). Sent as a text frame
 * (`send(bytes, cb, false)`). Without the kernel, or for audio the codec rejects (which it then
 * reports), the codec's string is converted.
 */
export function encodeAudioAppendBytes(pcm: Uint8Array): Buffer {
  const n = pcm.byteLength;
  const kernel = firKernel();
  if (kernel === undefined || n > MAX_APPEND_AUDIO_BYTES || n % REALTIME_BYTES_PER_FRAME !== 0) {
    // Latin-1 is a plain copy of V8's one-byte string, and the same bytes as its UTF-8 here.
    return Buffer.from(encodeAudioAppend(pcm), 'latin1');
  }
  const b64 = base64Length(n);
  const length = PREFIX.length + b64 + SUFFIX.length;
  const frame = length <= FRAME_CAPACITY ? (spareFrames.pop() ?? Buffer.alloc(FRAME_CAPACITY)).subarray(0, length) : Buffer.allocUnsafe(length);
  const src = kernel.scratch(alignKernel(n) + b64);
  const dst = src + alignKernel(n);
  const memory = kernel.u8;
  memory.set(pcm, src);
  kernel.exports.base64_encode(src, n, dst);
  PREFIX.copy(frame, 0);
  frame.set(memory.subarray(dst, dst + b64), PREFIX.length);
  SUFFIX.copy(frame, PREFIX.length + b64);
  return frame;
}

/** An append's text frame in the cheaper form for its size (see `APPEND_BYTES_FROM`). */
export function encodeAudioAppendFrame(pcm: Uint8Array): string | Buffer {
  return pcm.byteLength >= APPEND_BYTES_FROM ? encodeAudioAppendBytes(pcm) : encodeAudioAppend(pcm);
}

/**
 * The socket is done with `frame`, a message from `encodeAudioAppendFrame` (written, or never to
 * be): its memory may hold the next frame. Call once per frame, and only then. The buffer is
 * cleared first, so no caller's audio stays in the heap.
 */
export function releaseAppendFrame(frame: string | Buffer): void {
  if (typeof frame === 'string' || frame.byteOffset !== 0 || frame.buffer.byteLength !== FRAME_CAPACITY) return;
  // Only the frame's own bytes were written: the rest of the memory is still zero.
  if (spareFrames.length < MAX_SPARE_FRAMES) spareFrames.push(Buffer.from(frame.buffer, 0, FRAME_CAPACITY).fill(0, 0, frame.length));
}
