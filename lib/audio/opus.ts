/**
 * Opus in Discord's voice format: 48 kHz, stereo, 20 ms packets (960 samples per channel,
 * 3840 bytes of PCM16 LE per frame).
 *
 * Backends: the codec modules prism-media itself loads, in the same order: `@discordjs/opus`
 * (native, fast) first, `opusscript` (WebAssembly, no compiler needed) as the fallback. Both
 * are optional dependencies; which one a codec uses is reported as `backend`, and a caller can
 * ask for one (`'native'`, `'opusscript'`) instead of `'auto'`.
 *
 * Why the codec modules are called directly instead of through prism's `opus.Decoder` /
 * `opus.Encoder` streams: prism chooses its module once per process (a cached global), so a
 * stream cannot ask for a backend; and its Decoder fails the whole stream on one bad packet,
 * while a voice receiver must replace a corrupt packet with silence and carry on. Here every
 * packet is one synchronous call whose failure the caller handles.
 *
 * Loading a backend has no process-wide side effect: `require` of the module, nothing else.
 */
import { createRequire } from 'node:module';
import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError, UnsupportedError, UsageError, ValidationError, describeCause } from '../errors.js';
import { FrameCutter } from './frames.js';
import { describeReceived, intOption } from '../options.js';

/** Sample rate of Discord voice Opus, Hz. */
export const OPUS_SAMPLE_RATE = 48_000;
/** Channels of Discord voice Opus. */
export const OPUS_CHANNELS = 2;
/** Duration of one Discord voice packet, ms. */
export const OPUS_FRAME_MS = 20;
/** Samples per channel in one 20 ms frame at 48 kHz. */
export const OPUS_FRAME_SAMPLES = 960;
/** Bytes of PCM16 LE stereo in one 20 ms frame at 48 kHz. */
export const OPUS_FRAME_BYTES = OPUS_FRAME_SAMPLES * OPUS_CHANNELS * 2;

/** The codec module in use: `@discordjs/opus` (`'native'`) or `opusscript`. */
export type OpusBackend = 'native' | 'opusscript';
/** Which backend to use: `'auto'` (native, else opusscript), or one of them only. */
export type OpusBackendChoice = OpusBackend | 'auto';

export const OPUS_BACKEND_CHOICES: readonly OpusBackendChoice[] = ['auto', 'native', 'opusscript'];

/** The npm package behind each backend, for messages. */
export const OPUS_BACKEND_PACKAGES: Readonly<Record<OpusBackend, string>> = Object.freeze({
  native: '@discordjs/opus',
  opusscript: 'opusscript',
});

/**
 * An Opus encoder and decoder, by default for 48 kHz stereo 20 ms frames (Discord's format).
 * Not thread-safe; one per stream.
 */
export interface OpusCodec {
  readonly backend: OpusBackend;
  readonly sampleRate: number;
  readonly channels: number;
  /** Encodes exactly one 20 ms frame of PCM16 LE (`OPUS_FRAME_BYTES` at the defaults) into one packet. */
  encode(frame: Buffer): Buffer;
  /**
   * Decodes one packet into PCM16 LE at the codec's rate and channels (usually 20 ms: 3840
   * bytes at the defaults; Opus packets may hold 2.5 to 120 ms). Throws on a corrupt packet; the
   * codec stays usable.
   */
  decode(packet: Buffer): Buffer;
  /**
   * `decode`, into memory the codec may use again on its next call: the PCM is valid until then,
   * for a caller that is done with it at once (the receive adapter converts it in the same
   * call). Spares a buffer per packet: 50 a second per speaker, memory the garbage collector
   * would otherwise have to find.
   */
  decodeTransient(packet: Buffer): Buffer;
  /** Releases the codec's memory (opusscript holds WebAssembly memory). Idempotent. */
  close(): void;
}

// --- the two modules, typed locally (both are optional dependencies) --------------------------

interface NativeOpusEncoder {
  encode(pcm: Buffer): Buffer;
  decode(packet: Buffer): Buffer;
  applyEncoderCTL(ctl: number, value: number): void;
}
interface NativeOpusModule {
  OpusEncoder: new (rate: number, channels: number) => NativeOpusEncoder;
}
interface OpusScriptModule {
  new (...args: never[]): unknown;
  Application: { AUDIO: number };
}
/** The handler opusscript's WebAssembly build exports (see `OpusScriptCodec`). */
interface OpusScriptHandler {
  _encode(input: number, bytes: number, output: number, frameSize: number): number;
  _decode(input: number, bytes: number, output: number): number;
  _encoder_ctl(ctl: number, value: number): number;
}
/** What opusscript's WebAssembly build (an Emscripten module) exports. */
interface OpusScriptWasm {
  OpusScriptHandler: { new (rate: number, channels: number, application: number): OpusScriptHandler; destroy_handler(handler: OpusScriptHandler): void };
  _malloc(bytes: number): number;
  _free(pointer: number): void;
  /** Views of the module's memory; replaced by the module when its memory grows. */
  HEAPU8: Uint8Array;
  HEAPU16: Uint16Array;
}

/** `OPUS_SET_BITRATE_REQUEST` from opus_defines.h. */
const OPUS_SET_BITRATE = 4002;

/** Loads a module by name; the default is Node's `require` relative to this file. */
export type ModuleLoader = (name: string) => unknown;

const defaultLoader: ModuleLoader = createRequire(import.meta.url);

interface Loaded {
  backend: OpusBackend;
  module: NativeOpusModule | OpusScriptModule;
}

const cache = new Map<OpusBackend, { module?: NativeOpusModule | OpusScriptModule; error?: unknown }>();

function tryLoad(backend: OpusBackend, loader: ModuleLoader): { module?: NativeOpusModule | OpusScriptModule; error?: unknown } {
  const useCache = loader === defaultLoader;
  const cached = useCache ? cache.get(backend) : undefined;
  if (cached) return cached;
  let result: { module?: NativeOpusModule | OpusScriptModule; error?: unknown };
  try {
    const mod = loader(OPUS_BACKEND_PACKAGES[backend]) as Record<string, unknown> | undefined;
    if (backend === 'native') {
      if (typeof mod?.OpusEncoder !== 'function') throw new UnsupportedError('the module has no OpusEncoder class');
      result = { module: mod as unknown as NativeOpusModule };
    } else {
      const ctor = mod as unknown as OpusScriptModule | undefined;
      if (typeof ctor !== 'function' || typeof ctor.Application?.AUDIO !== 'number') throw new UnsupportedError('the module is not an OpusScript class');
      result = { module: ctor };
    }
  } catch (error) {
    result = { error };
  }
  if (useCache) cache.set(backend, result);
  return result;
}

function validateChoice(value: unknown): OpusBackendChoice {
  if (typeof value === 'string' && (OPUS_BACKEND_CHOICES as readonly string[]).includes(value)) return value as OpusBackendChoice;
  throw new ValidationError('opusBackend', `one of ${OPUS_BACKEND_CHOICES.map((c) => `'${c}'`).join(', ')}`, describeReceived(value));
}

/**
 * Finds the module for `choice`. Throws an `UnsupportedError` naming the package(s) to install
 * when none loads, and a `ValidationError` (field `opusBackend`) for an unknown choice.
 * `loader` replaces `require` (tests use it to simulate a missing module).
 */
export function loadOpusBackend(choice: OpusBackendChoice = 'auto', loader: ModuleLoader = defaultLoader): Loaded {
  const wanted = validateChoice(choice);
  const order: OpusBackend[] = wanted === 'auto' ? ['native', 'opusscript'] : [wanted];
  const reasons: string[] = [];
  for (const backend of order) {
    const { module, error } = tryLoad(backend, loader);
    if (module) return { backend, module };
    reasons.push(`${OPUS_BACKEND_PACKAGES[backend]}: ${describeCause(error)}`);
  }
  const cause = reasons.join('; ');
  if (wanted === 'auto') {
    throw new UnsupportedError(
      `No Opus codec could be loaded: install @discordjs/opus (native, fastest) or opusscript (WebAssembly, no build step). (${cause})`,
    );
  }
  const other: OpusBackend = wanted === 'native' ? 'opusscript' : 'native';
  throw new UnsupportedError(
    `The Opus backend '${wanted}' could not be loaded: install ${OPUS_BACKEND_PACKAGES[wanted]}, or use opusBackend 'auto' or '${other}' (${OPUS_BACKEND_PACKAGES[other]}). (${cause})`,
  );
}

/** Whether `backend` loads in this process. */
export function isOpusBackendAvailable(backend: OpusBackend): boolean {
  return tryLoad(backend, defaultLoader).module !== undefined;
}

export interface OpusCodecOptions {
  /** Default `'auto'`: `@discordjs/opus`, else `opusscript`. */
  backend?: OpusBackendChoice;
  /** Encoder bitrate in bits per second, 6000 to 510000. Default: the codec's own (auto). */
  bitrate?: number;
  /** Replaces `require` for finding the modules (tests). */
  loader?: ModuleLoader;
  /** Rate of the PCM side, one of `OPUS_PCM_RATES`. Default 48000. */
  sampleRate?: number;
  /** Channels of the PCM side, 1 or 2. Default 2. */
  channels?: number;
}

/** The PCM rates libopus encodes from and decodes to. */
export const OPUS_PCM_RATES: readonly number[] = [8000, 12_000, 16_000, 24_000, 48_000];

function validateLayout(options: OpusCodecOptions): { sampleRate: number; channels: number } {
  const sampleRate = options.sampleRate ?? OPUS_SAMPLE_RATE;
  const channels = options.channels ?? OPUS_CHANNELS;
  if (!OPUS_PCM_RATES.includes(sampleRate)) {
    throw new ValidationError('sampleRate', `one of ${OPUS_PCM_RATES.join(', ')} Hz`, describeReceived(sampleRate));
  }
  if (channels !== 1 && channels !== 2) throw new ValidationError('channels', '1 or 2', describeReceived(channels));
  return { sampleRate, channels };
}

function validateBitrate(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  return intOption(value, 'bitrate', { min: 6000, max: 510_000, accepted: 'an integer number of bits per second from 6000 to 510000' });
}

class NativeCodec implements OpusCodec {
  readonly backend = 'native' as const;
  #codec: NativeOpusEncoder | undefined;
  constructor(
    mod: NativeOpusModule,
    bitrate: number | undefined,
    readonly sampleRate: number,
    readonly channels: number,
  ) {
    this.#codec = new mod.OpusEncoder(sampleRate, channels);
    if (bitrate !== undefined) this.#codec.applyEncoderCTL(OPUS_SET_BITRATE, bitrate);
  }
  get #live(): NativeOpusEncoder {
    if (!this.#codec) throw new UsageError('The Opus codec was closed.');
    return this.#codec;
  }
  encode(frame: Buffer): Buffer {
    return this.#live.encode(frame);
  }
  decode(packet: Buffer): Buffer {
    return this.#live.decode(packet);
  }
  decodeTransient(packet: Buffer): Buffer {
    return this.decode(packet); // the addon returns a buffer of its own every time
  }
  close(): void {
    this.#codec = undefined;
  }
}

/** opusscript's WebAssembly module, instantiated once per process on first use. */
let opusscriptWasm: OpusScriptWasm | undefined;

/** Largest packet libopus writes, and the largest PCM its decoder returns (120 ms), in bytes. */
const OPUS_MAX_PACKET_BYTES = 1276 * 3;
const OPUS_MAX_DECODED_SAMPLES = 2880;

/**
 * The `opusscript` backend, bound to its WebAssembly build directly. opusscript's own class
 * places its I/O buffers at twice the address it allocated (it indexes 16-bit memory views with
 * byte addresses), so every instance reads and writes memory that belongs to others, and from
 * about the twentieth instance in a process the addresses fall past the end of memory and every
 * call fails ("memory access out of bounds"): a bot with twenty speakers would stop. This binding
 * allocates buffers of the size the module's functions use (16-bit cells, one per byte of PCM or
 * packet, as they expect) and addresses them correctly, through the module's current memory
 * views (which it replaces when its memory grows).
 */
class OpusScriptCodec implements OpusCodec {
  readonly backend = 'opusscript' as const;
  readonly #wasm: OpusScriptWasm;
  #handler: OpusScriptHandler | undefined;
  /** One allocation: PCM in/out (16-bit cells), then the packet in/out (bytes). */
  readonly #memory: number;
  readonly #pcm: number;
  readonly #packet: number;
  readonly #pcmCells: number;
  /** `decodeTransient`'s output, made on first use. */
  #scratch: Buffer | undefined;

  constructor(
    application: number,
    bitrate: number | undefined,
    readonly sampleRate: number,
    readonly channels: number,
  ) {
    this.#wasm = opusscriptWasm ??= (defaultLoader('opusscript/build/opusscript_native_wasm.js') as () => OpusScriptWasm)();
    this.#handler = new this.#wasm.OpusScriptHandler(sampleRate, channels, application);
    // Cells of the widest PCM the decoder returns (two per sample: one per byte).
    this.#pcmCells = OPUS_MAX_DECODED_SAMPLES * channels * 2;
    this.#memory = this.#wasm._malloc(this.#pcmCells * 2 + OPUS_MAX_PACKET_BYTES);
    if (this.#memory === 0) throw new UnsupportedError('opusscript could not allocate memory for another codec.');
    this.#pcm = this.#memory;
    this.#packet = this.#memory + this.#pcmCells * 2;
    if (bitrate !== undefined) this.#handler._encoder_ctl(OPUS_SET_BITRATE, bitrate);
  }
  get #live(): OpusScriptHandler {
    if (!this.#handler) throw new UsageError('The Opus codec was closed.');
    return this.#handler;
  }
  encode(frame: Buffer): Buffer {
    const handler = this.#live;
    const frameBytes = (this.sampleRate * OPUS_FRAME_MS * this.channels * 2) / 1000;
    if (frame.length !== frameBytes) throw new ValidationError('frame', `${frameBytes} bytes (20 ms of PCM16)`, `${frame.length} bytes`);
    // One 16-bit cell per byte, as the module's encoder reads them.
    this.#wasm.HEAPU16.set(frame, this.#pcm >>> 1);
    const length = handler._encode(this.#pcm, frame.length, this.#packet, frameBytes / this.channels / 2);
    if (length < 0) throw new IntegrityError(`Opus encode failed (libopus error ${length}).`);
    return Buffer.from(this.#wasm.HEAPU8.subarray(this.#packet, this.#packet + length));
  }
  decode(packet: Buffer): Buffer {
    return Buffer.from(this.#decodeCells(packet));
  }
  decodeTransient(packet: Buffer): Buffer {
    const cells = this.#decodeCells(packet);
    this.#scratch ??= Buffer.allocUnsafeSlow(this.#pcmCells);
    const pcm = this.#scratch.subarray(0, cells.length);
    pcm.set(cells);
    return pcm;
  }
  /** Decodes `packet`; returns the PCM's 16-bit cells in the module's memory, one per byte. */
  #decodeCells(packet: Buffer): Uint16Array {
    const handler = this.#live;
    if (packet.length > OPUS_MAX_PACKET_BYTES)
      throw new IntegrityError(`Opus decode failed: a packet of ${packet.length} bytes (at most ${OPUS_MAX_PACKET_BYTES}).`);
    this.#wasm.HEAPU8.set(packet, this.#packet);
    const samples = handler._decode(this.#packet, packet.length, this.#pcm);
    if (samples < 0) throw new IntegrityError(`Opus decode failed (libopus error ${samples}).`);
    return this.#wasm.HEAPU16.subarray(this.#pcm >>> 1, (this.#pcm >>> 1) + samples * this.channels * 2);
  }
  close(): void {
    const handler = this.#handler;
    if (!handler) return;
    this.#handler = undefined;
    this.#wasm.OpusScriptHandler.destroy_handler(handler);
    this.#wasm._free(this.#memory);
  }
}

/**
 * An Opus codec for 48 kHz stereo. Throws `UnsupportedError` when the chosen backend (or, for
 * `'auto'`, either) cannot be loaded, `ValidationError` for a bad option.
 */
export function createOpusCodec(options: OpusCodecOptions = {}): OpusCodec {
  const bitrate = validateBitrate(options.bitrate);
  const { sampleRate, channels } = validateLayout(options);
  const { backend, module } = loadOpusBackend(options.backend ?? 'auto', options.loader);
  return backend === 'native'
    ? new NativeCodec(module as NativeOpusModule, bitrate, sampleRate, channels)
    : new OpusScriptCodec((module as OpusScriptModule).Application.AUDIO, bitrate, sampleRate, channels);
}

/**
 * Cuts a byte stream into fixed-size frames (the library's re-framer, `FrameCutter`): a frame
 * inside one piece is handed out as a view of it, a frame split across pieces is copied once.
 * `finish` pads the last partial frame with zero bytes (digital silence for PCM16) and reports
 * how many it added.
 */
export class FrameAssembler {
  readonly #frames: FrameCutter;

  constructor(readonly frameBytes: number) {
    this.#frames = new FrameCutter(frameBytes);
  }

  /** Bytes waiting for the rest of their frame. */
  get pendingBytes(): number {
    return this.#frames.pendingBytes;
  }

  /**
   * Adds `data`; calls `emit` with each completed frame (a buffer of its own, which the
   * receiver may keep: a view of `data`, or of memory the assembler never reuses).
   */
  add(data: Buffer, emit: (frame: Buffer) => void): void {
    this.#frames.forEachFrame(data, emit);
  }

  /** Emits the last partial frame padded with zeros; returns the padding in bytes (0 if none). */
  finish(emit: (frame: Buffer) => void): number {
    const pending = this.#frames.pendingBytes;
    if (pending === 0) return 0;
    emit(this.#frames.takePending(this.frameBytes, 0));
    return this.frameBytes - pending;
  }
}

export interface OpusPacketEncoderOptions {
  /** Default `'auto'`. */
  opusBackend?: OpusBackendChoice;
  /** Encoder bitrate, bits per second. Default: the codec's own. */
  bitrate?: number;
  /** Packets buffered on the readable side. Default 16 (320 ms). */
  readableHighWaterMark?: number;
  /** Bytes buffered on the writable side. Default 16 KiB. */
  writableHighWaterMark?: number;
}

/**
 * PCM16 LE stereo 48 kHz (any chunking) in, one Opus packet per 20 ms out (object mode, one
 * Buffer per packet). A partial final frame is padded with silence to 20 ms before encoding.
 */
export class OpusPacketEncoder extends Transform {
  readonly opusBackend: OpusBackend;
  /** Packets produced so far. */
  packets = 0;
  readonly #codec: OpusCodec;
  readonly #frames = new FrameAssembler(OPUS_FRAME_BYTES);

  constructor(options: OpusPacketEncoderOptions = {}) {
    const codec = createOpusCodec({ backend: options.opusBackend ?? 'auto', bitrate: options.bitrate });
    super({
      readableObjectMode: true,
      writableObjectMode: false,
      decodeStrings: true,
      readableHighWaterMark: options.readableHighWaterMark ?? 16,
      writableHighWaterMark: options.writableHighWaterMark ?? 16 * 1024,
    });
    this.#codec = codec;
    this.opusBackend = codec.backend;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.#frames.add(chunk, (frame) => this.#encodeFrame(frame));
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.#frames.finish((frame) => this.#encodeFrame(frame));
    } catch (err) {
      callback(err as Error);
      return;
    }
    this.#codec.close();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#codec.close();
    callback(err);
  }

  #encodeFrame(frame: Buffer): void {
    this.packets++;
    this.push(this.#codec.encode(frame));
  }
}
