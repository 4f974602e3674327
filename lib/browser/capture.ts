/**
 * The microphone as PCM16 mono 24 kHz chunks: `getUserMedia` with the echo and noise
 * constraints asked for, a `MediaStreamAudioSourceNode` in the caller's AudioContext (at the
 * device's rate), and the capture worklet, which resamples through the library's filter and
 * posts fixed-size chunks. The gain can be lowered while a translation plays (ducking or
 * muting against echo); muted audio is sent as silence, so the service's clock keeps running.
 */
import { RtTranslateError, ValidationError, describeCause } from '../errors.js';
import { intOption, numberOption, describeReceived } from '../options.js';
import { REALTIME_SAMPLE_RATE } from '../realtime/wire-format.js';
import { checkBrowserRate } from './resampler.js';
import { loadWorklet } from './worklet-loader.js';
import { CAPTURE_PROCESSOR, type CaptureCommand, type CaptureMessage, type CaptureProcessorOptions } from './worklet-protocol.js';

export interface MicrophoneOptions {
  /** Ask the browser for echo cancellation. Default true. */
  echoCancellation?: boolean;
  /** Ask the browser for noise suppression. Default true. */
  noiseSuppression?: boolean;
  /** Ask the browser for automatic gain control. Default true. */
  autoGainControl?: boolean;
  /** The input device (`MediaDeviceInfo.deviceId`); default the browser's choice. */
  deviceId?: string;
  /** Audio per chunk, in ms: a multiple of 20 from 20 to 1000. Default 40. */
  chunkMs?: number;
  /** Where the worklet module is served (see `loadWorklet`); default beside this module. */
  workletUrl?: string | URL;
}

export interface ResolvedMicrophoneOptions {
  echoCancellation: boolean;
  noiseSuppression: boolean;
  autoGainControl: boolean;
  deviceId: string | undefined;
  chunkMs: number;
  workletUrl: string | URL | undefined;
}

function flag(value: unknown, field: string): boolean {
  if (value === undefined) return true;
  if (typeof value === 'boolean') return value;
  throw new ValidationError(field, 'true or false', typeof value);
}

/** Checks the microphone options; a `ValidationError` names the first field at fault. */
export function resolveMicrophoneOptions(options: MicrophoneOptions): ResolvedMicrophoneOptions {
  const chunkMs = intOption(options.chunkMs, 'chunkMs', { min: 20, max: 1000, fallback: 40 });
  if (chunkMs % 20 !== 0) throw new ValidationError('chunkMs', 'a multiple of 20 from 20 to 1000', describeReceived(chunkMs));
  if (options.deviceId !== undefined && typeof options.deviceId !== 'string')
    throw new ValidationError('deviceId', 'a device id string', typeof options.deviceId);
  const workletUrl = options.workletUrl;
  if (workletUrl !== undefined && typeof workletUrl !== 'string' && !(workletUrl instanceof URL)) {
    throw new ValidationError('workletUrl', 'a URL or a string', typeof workletUrl);
  }
  return {
    echoCancellation: flag(options.echoCancellation, 'echoCancellation'),
    noiseSuppression: flag(options.noiseSuppression, 'noiseSuppression'),
    autoGainControl: flag(options.autoGainControl, 'autoGainControl'),
    deviceId: options.deviceId,
    chunkMs,
    workletUrl,
  };
}

export class MicrophoneCapture {
  readonly stream: MediaStream;
  /** What the browser applied (`echoCancellation`, `sampleRate`, ...). */
  readonly settings: MediaTrackSettings;
  readonly #source: MediaStreamAudioSourceNode;
  readonly #node: AudioWorkletNode;
  #gain = 1;

  private constructor(stream: MediaStream, source: MediaStreamAudioSourceNode, node: AudioWorkletNode) {
    this.stream = stream;
    this.settings = stream.getAudioTracks()[0]?.getSettings() ?? {};
    this.#source = source;
    this.#node = node;
  }

  /**
   * Opens the microphone into `context` (which must be running at one of `BROWSER_RATES`);
   * `onAudio` gets each PCM16 24 kHz chunk (its own buffer). Rejects with the browser's error
   * when access is refused.
   */
  static async open(context: AudioContext, options: MicrophoneOptions, onAudio: (pcm: Int16Array) => void): Promise<MicrophoneCapture> {
    const resolved = resolveMicrophoneOptions(options);
    checkBrowserRate(context.sampleRate, 'AudioContext.sampleRate');
    if (!globalThis.isSecureContext || !navigator.mediaDevices) {
      throw new RtTranslateError('RTT_INPUT', 'The microphone is only available to pages served over https (or from localhost).');
    }
    const [stream] = await Promise.all([
      navigator.mediaDevices
        .getUserMedia({
          audio: {
            echoCancellation: resolved.echoCancellation,
            noiseSuppression: resolved.noiseSuppression,
            autoGainControl: resolved.autoGainControl,
            channelCount: 1,
            ...(resolved.deviceId !== undefined ? { deviceId: { exact: resolved.deviceId } } : {}),
          },
        })
        .catch((error: unknown) => {
          throw new RtTranslateError('RTT_INPUT', `The microphone could not be opened: ${describeCause(error)}`, { cause: error });
        }),
      loadWorklet(context, resolved.workletUrl),
    ]);
    try {
      const processorOptions: CaptureProcessorOptions = {
        outputRate: REALTIME_SAMPLE_RATE,
        chunkFrames: (resolved.chunkMs * REALTIME_SAMPLE_RATE) / 1000,
      };
      const node = new AudioWorkletNode(context, CAPTURE_PROCESSOR, { numberOfInputs: 1, numberOfOutputs: 0, processorOptions });
      node.port.onmessage = (event: MessageEvent<CaptureMessage>) => {
        if (event.data.type === 'audio') onAudio(event.data.pcm);
      };
      const source = context.createMediaStreamSource(stream);
      source.connect(node);
      return new MicrophoneCapture(stream, source, node);
    } catch (error) {
      for (const track of stream.getTracks()) track.stop();
      throw error;
    }
  }

  /** The gain applied to the microphone, 0 (silence) to 1 (as captured). */
  get gain(): number {
    return this.#gain;
  }

  set gain(value: number) {
    this.#gain = numberOption(value, 'gain', { min: 0, max: 1, fallback: 1 });
    this.#node.port.postMessage({ type: 'gain', gain: this.#gain } satisfies CaptureCommand);
  }

  /** Stops the microphone (the browser's indicator goes off) and disconnects the nodes. */
  close(): void {
    for (const track of this.stream.getTracks()) track.stop();
    this.#source.disconnect();
    this.#node.port.onmessage = null;
    this.#node.port.close();
  }
}
