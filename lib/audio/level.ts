/**
 * Signal level arithmetic on PCM16 LE, shared by the client's end-of-session logic and the
 * emulator's voice-activity detector.
 */

/** The mean-square sample value of a PCM16 signal at `dbfs` (relative to full scale, 32768). */
export function dbfsToMeanSquare(dbfs: number): number {
  const amplitude = 32768 * 10 ** (dbfs / 20);
  return amplitude * amplitude;
}

/** Mean of the squared samples of PCM16 LE `buf[start, end)`; `end - start` must be even and > 0. */
export function meanSquare(buf: Buffer, start: number, end: number): number {
  let sum = 0;
  for (let i = start; i < end; i += 2) {
    const sample = buf.readInt16LE(i);
    sum += sample * sample;
  }
  return (sum * 2) / (end - start);
}

/**
 * Whether any frame of `frameBytes` (the last one possibly shorter) of the PCM16 LE `pcm` has a
 * mean square above `threshold` (see `dbfsToMeanSquare`).
 */
export function hasFrameAbove(pcm: Buffer, threshold: number, frameBytes: number): boolean {
  const usable = pcm.length - (pcm.length % 2);
  for (let start = 0; start < usable; start += frameBytes) {
    if (meanSquare(pcm, start, Math.min(start + frameBytes, usable)) > threshold) return true;
  }
  return false;
}
