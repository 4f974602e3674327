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
  const at = buf.byteOffset + start;
  if (LITTLE_ENDIAN && at % 2 === 0) {
    // A typed view reads the samples without a bounds check per sample.
    const samples = new Int16Array(buf.buffer, at, (end - start) >> 1);
    for (let i = 0; i < samples.length; i++) {
      const sample = samples[i]!;
      sum += sample * sample;
    }
  } else {
    for (let i = start; i < end; i += 2) {
      const sample = buf.readInt16LE(i);
      sum += sample * sample;
    }
  }
  return (sum * 2) / (end - start);
}
