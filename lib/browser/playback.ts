/**
 * Gapless playback of PCM16 mono 24 kHz: every chunk goes into one queue in the playback
 * worklet, which resamples to the AudioContext's rate through the library's filter (no
 * AudioBufferSourceNode per chunk, so no seams between chunks). `interrupt()` drops what is
 * queued. The position (frames of the queued audio that have been output) comes back from
 * the worklet while it plays and whenever it starts or stops.
 */
import { REALTIME_SAMPLE_RATE } from '../realtime/wire-format.js';
import { TypedEmitter } from './emitter.js';
import { checkBrowserRate } from './resampler.js';
import { loadWorklet } from './worklet-loader.js';
import { PLAYBACK_PROCESSOR, type PlaybackCommand, type PlaybackMessage, type PlaybackProcessorOptions } from './worklet-protocol.js';

/** Where playback is, in frames of the queued audio (24 kHz) and milliseconds. */
export interface PlaybackPosition {
  /** Frames output so far, in all. */
  playedFrames: number;
  playedMs: number;
  /** Frames queued and not yet output. */
  queuedFrames: number;
  /** Frames dropped by `interrupt()`, in all. */
  droppedFrames: number;
  /** Whether audio is playing, by the worklet's latest report (false once the queue has played out). */
  playing: boolean;
}

export interface PcmPlayerEvents {
  /** Playing started (true) or the queue played out or was interrupted (false). */
  playing: [playing: boolean];
  /** A new position from the worklet. */
  position: [position: PlaybackPosition];
}

/** Render quanta between position reports while playing: about every 50 ms at 48 kHz. */
const REPORT_EVERY = 18;

export class PcmPlayer extends TypedEmitter<PcmPlayerEvents> {
  readonly #node: AudioWorkletNode;
  /** The worklet's latest report. */
  #report: PlaybackMessage = { type: 'position', played: 0, queued: 0, playing: false, dropped: 0 };
  /** Frames sent to the worklet, in all. */
  #sent = 0;

  private constructor(node: AudioWorkletNode) {
    super();
    this.#node = node;
    node.port.onmessage = (event: MessageEvent<PlaybackMessage>) => this.#onReport(event.data);
  }

  /** A player in `context` (running at one of `BROWSER_RATES`), connected to `destination` (default the speakers). */
  static async create(context: AudioContext, options: { workletUrl?: string | URL; destination?: AudioNode } = {}): Promise<PcmPlayer> {
    checkBrowserRate(context.sampleRate, 'AudioContext.sampleRate');
    await loadWorklet(context, options.workletUrl);
    const processorOptions: PlaybackProcessorOptions = { inputRate: REALTIME_SAMPLE_RATE, reportEvery: REPORT_EVERY };
    const node = new AudioWorkletNode(context, PLAYBACK_PROCESSOR, {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [context.destination.channelCount],
      processorOptions,
    });
    node.connect(options.destination ?? context.destination);
    return new PcmPlayer(node);
  }

  /** Queues PCM16 mono 24 kHz to play after what is queued (copied; the caller keeps `pcm`). */
  enqueue(pcm: Int16Array): void {
    if (pcm.length === 0) return;
    const copy = pcm.slice();
    this.#sent += copy.length;
    this.#node.port.postMessage({ type: 'audio', pcm: copy } satisfies PlaybackCommand, [copy.buffer]);
  }

  /** Drops everything queued; playing stops within one render quantum. */
  interrupt(): void {
    this.#node.port.postMessage({ type: 'interrupt' } satisfies PlaybackCommand);
  }

  /**
   * Where playback is, by the worklet's latest report; frames enqueued since that report count
   * as queued, so `queuedFrames` is 0 only once everything enqueued has played (or was dropped).
   */
  get position(): PlaybackPosition {
    const { played, queued, dropped, playing } = this.#report;
    // The worklet has seen every frame it has played, queued or dropped.
    const unseen = Math.max(0, this.#sent - (played + queued + dropped));
    return { playedFrames: played, playedMs: (played * 1000) / REALTIME_SAMPLE_RATE, queuedFrames: queued + unseen, droppedFrames: dropped, playing };
  }

  #onReport(message: PlaybackMessage): void {
    if (message.type !== 'position') return;
    const wasPlaying = this.#report.playing;
    this.#report = message;
    if (message.playing !== wasPlaying) this.emit('playing', message.playing);
    this.emit('position', this.position);
  }

  /** Stops playing and disconnects the worklet. */
  close(): void {
    this.#node.port.onmessage = null;
    this.#node.port.close();
    this.#node.disconnect();
  }
}
