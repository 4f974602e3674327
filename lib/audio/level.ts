/**
 * Signal level arithmetic on PCM16 LE, shared by the voice-activity detector (`vad.ts`: the
 * client's count of the speech it sent, the emulator's utterances) and the Twilio barge-in
 * detector.
 */

/** The mean-square sample value of a PCM16 signal at `dbfs` (relative to full scale, 32768). */
export function dbfsToMeanSquare(dbfs: number): number {
  const amplitude = 32768 * 10 ** (dbfs / 20);
  return amplitude * amplitude;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Mean of the squared samples of PCM16 LE `buf[start, end)`; `end - start` must be even and > 0. */
export function meanSquare(buf: Buffer, start: number, end: number): number {
  let sum = 0;
  let i = start;
  let at = buf.byteOffset + start;
  if (LITTLE_ENDIAN && at % 2 === 0) {
    if (at % 4 !== 0) {
      const sample = buf.readInt16LE(i);
      sum += sample * sample;
      i += 2;
      at += 2;
    }
    // Two samples per 32-bit read through a typed view (no bounds check per sample), squared
    // in integer arithmetic: half the loads and twice as fast as one sample at a time.
    const pairs = (end - i) >> 2;
    const words = new Int32Array(buf.buffer, at, pairs);
    for (let k = 0; k < pairs; k++) {
      const word = words[k]!;
      const low = (word << 16) >> 16;
      const high = word >> 16;
      sum += Math.imul(low, low) + Math.imul(high, high);
    }
    i += pairs * 4;
  }
  for (; i < end; i += 2) {
    const sample = buf.readInt16LE(i);
    sum += sample * sample;
  }
  return (sum * 2) / (end - start);
}
