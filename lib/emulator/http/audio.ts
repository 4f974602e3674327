/**
 * Audio for the emulator's HTTP answers: the output formats of `POST /tts-stream` made from
 * synthesized PCM16 (wav, flac, pcm_s16/s32/f32 in both byte orders, and mp3 encoded piece by
 * piece as it streams), a small cache so a repeated text is synthesized once, and a sniffer for
 * uploaded audio.
 *
 * MP3 comes from LAME compiled to WebAssembly (`wasm-media-encoders`: no native build, no
 * process-wide handlers), loaded on the first mp3 request only. ADTS (AAC) is not produced:
 * that package has no AAC encoder, and an AAC one would be a second, larger dependency, so the
 * emulator answers 422 for it.
 */
import { encodeFlac } from '../../audio/flac-encoder.js';
import { synthesizeSpeechPcm } from '../synth.js';
import { OUTPUT_FORMATS, type OutputFormat } from '../../http/schemas.js';
import { UnsupportedError, ValidationError } from '../../errors.js';

/** Formats the emulator can stream; adts (AAC) needs an encoder it does not have. */
export const EMULATED_FORMATS: readonly OutputFormat[] = OUTPUT_FORMATS.filter((format) => format !== 'adts');

/** The sample rates an MP3 stream can carry (MPEG-1, MPEG-2 and MPEG-2.5 layer III). */
export const MP3_SAMPLE_RATES: readonly number[] = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000];

/** Constant bit rate of the emulator's MP3, kbit/s: plenty for synthesized speech. */
const MP3_BITRATE = 64;

/**
 * Encodes PCM16 LE mono to MP3 piece by piece: each `encode` returns the MP3 frames completed so
 * far (possibly none), `finish` the rest. The bytes returned are copies the caller may keep.
 */
export interface Mp3PieceEncoder {
  encode(pcm16le: Buffer): Buffer;
  finish(): Buffer;
}

/** A fresh MP3 encoder for `sampleRate` (one of `MP3_SAMPLE_RATES`). */
export async function createMp3PieceEncoder(sampleRate: number): Promise<Mp3PieceEncoder> {
  if (!MP3_SAMPLE_RATES.includes(sampleRate))
    throw new ValidationError('sampleRate', `one of ${MP3_SAMPLE_RATES.join(', ')} (the rates MP3 carries)`, String(sampleRate));
  const { createMp3Encoder } = await import('wasm-media-encoders');
  const encoder = await createMp3Encoder();
  encoder.configure({ sampleRate, channels: 1, bitrate: MP3_BITRATE });
  return {
    encode(pcm16le) {
      const samples = new Float32Array(pcm16le.length >> 1);
      for (let i = 0; i < samples.length; i++) samples[i] = pcm16le.readInt16LE(i * 2) / 32768;
      // The encoder's answer is a view of its memory, overwritten by the next call: copy it.
      return Buffer.from(encoder.encode([samples]));
    },
    finish() {
      return Buffer.from(encoder.finalize());
    },
  };
}

/** A RIFF/WAVE header for `dataBytes` of PCM. */
export function wavHeader(dataBytes: number, sampleRate: number, channels: number, bitsPerSample: number): Buffer {
  const header = Buffer.alloc(44);
  const blockAlign = (channels * bitsPerSample) / 8;
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVE', 8, 'latin1');
  header.write('fmt ', 12, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * blockAlign, 28);
  header.writeUInt16LE(blockAlign, 32);
  header.writeUInt16LE(bitsPerSample, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(dataBytes, 40);
  return header;
}

/** Converts PCM16 LE mono to `format`; returns the bytes and the content type. */
export function encodeAs(pcm16le: Buffer, format: OutputFormat, sampleRate: number): { bytes: Buffer; contentType: string } {
  const samples = pcm16le.length >> 1;
  const pcmType = (name: string): string => `audio/pcm;encoding=${name};rate=${sampleRate};channels=1`;
  switch (format) {
    case 'wav':
      return { bytes: Buffer.concat([wavHeader(pcm16le.length, sampleRate, 1, 16), pcm16le]), contentType: 'audio/wav' };
    case 'flac':
      return { bytes: encodeFlac(pcm16le, { sampleRate, channels: 1 }), contentType: 'audio/flac' };
    case 'pcm_s16le':
      return { bytes: pcm16le, contentType: pcmType('s16le') };
    case 'pcm_s16be':
      return { bytes: Buffer.from(pcm16le).swap16(), contentType: pcmType('s16be') };
    case 'pcm_s32le':
    case 'pcm_s32be': {
      const out = Buffer.alloc(samples * 4);
      for (let i = 0; i < samples; i++) {
        const v = pcm16le.readInt16LE(i * 2) * 65536;
        if (format === 'pcm_s32le') out.writeInt32LE(v, i * 4);
        else out.writeInt32BE(v, i * 4);
      }
      return { bytes: out, contentType: pcmType(format.slice(4)) };
    }
    case 'pcm_f32le':
    case 'pcm_f32be': {
      const out = Buffer.alloc(samples * 4);
      for (let i = 0; i < samples; i++) {
        const v = pcm16le.readInt16LE(i * 2) / 32768;
        if (format === 'pcm_f32le') out.writeFloatLE(v, i * 4);
        else out.writeFloatBE(v, i * 4);
      }
      return { bytes: out, contentType: pcmType(format.slice(4)) };
    }
    default:
      // mp3 is encoded as it streams (createMp3PieceEncoder); adts is not emulated.
      throw new UnsupportedError(`The emulator cannot produce ${format} in one piece.`);
  }
}

/** Synthesized speech PCM, cached by (text, rate, duration); at most `size` entries. */
export class PcmCache {
  readonly #entries = new Map<string, Buffer>();
  constructor(readonly size = 8) {}

  get(text: string, sampleRate: number, durationMs?: number): Buffer {
    const key = `${sampleRate}:${durationMs ?? ''}:${text}`;
    let pcm = this.#entries.get(key);
    if (pcm) {
      this.#entries.delete(key);
    } else {
      pcm = synthesizeSpeechPcm(text, durationMs === undefined ? { sampleRate } : { sampleRate, durationMs });
    }
    this.#entries.set(key, pcm);
    while (this.#entries.size > this.size) this.#entries.delete(this.#entries.keys().next().value as string);
    return pcm;
  }
}

/** The audio container or codec of an upload, by its first bytes; undefined when not audio. */
export function sniffAudio(data: Buffer): 'wav' | 'flac' | 'mp3' | 'aac' | undefined {
  if (data.length >= 12 && data.toString('latin1', 0, 4) === 'RIFF' && data.toString('latin1', 8, 12) === 'WAVE') return 'wav';
  if (data.length >= 4 && data.toString('latin1', 0, 4) === 'fLaC') return 'flac';
  if (data.length >= 3 && data.toString('latin1', 0, 3) === 'ID3') return 'mp3';
  if (data.length >= 8 && data.toString('latin1', 4, 8) === 'ftyp') return 'aac';
  if (data.length >= 2 && data[0] === 0xff && (data[1]! & 0xf0) === 0xf0) {
    // 0xFFF sync: ADTS when the layer bits are 00, MPEG audio (mp3) otherwise.
    return (data[1]! & 0x06) === 0 ? 'aac' : 'mp3';
  }
  if (data.length >= 2 && data[0] === 0xff && (data[1]! & 0xe0) === 0xe0) return 'mp3';
  return undefined;
}
