/**
 * What the page and the browser module's two audio worklet processors say to each other over
 * their ports: the processors' names, their options and their messages. Types and names only,
 * so the worklet module and the page's modules share them without sharing code.
 */

/** The capture processor: microphone in, PCM16 24 kHz chunks out. */
export const CAPTURE_PROCESSOR = 'rt-translate-capture';
/** The playback processor: PCM16 24 kHz in, the device's rate out. */
export const PLAYBACK_PROCESSOR = 'rt-translate-playback';

export interface CaptureProcessorOptions {
  /** The rate of the chunks posted (24 kHz for the service). */
  outputRate: number;
  /** Frames per chunk posted. */
  chunkFrames: number;
}

/** To the capture processor: the gain applied to the microphone from now on (ramped over one render quantum). */
export type CaptureCommand = { type: 'gain'; gain: number };

/** From the capture processor: one chunk of PCM16 at `outputRate`, its buffer transferred. */
export type CaptureMessage = { type: 'audio'; pcm: Int16Array };

export interface PlaybackProcessorOptions {
  /** The rate of the audio queued (24 kHz from the service). */
  inputRate: number;
  /** Render quanta between two position reports while playing. */
  reportEvery: number;
}

/** To the playback processor: audio to play after what is queued, or drop everything queued. */
export type PlaybackCommand = { type: 'audio'; pcm: Int16Array } | { type: 'interrupt' };

/**
 * From the playback processor, on every change between playing and idle and every
 * `reportEvery` quanta while playing: frames (at `inputRate`) played so far in all, frames
 * still queued or inside the filter, and whether audio is playing. After an interrupt,
 * `dropped` counts the frames it threw away.
 */
export type PlaybackMessage = { type: 'position'; played: number; queued: number; playing: boolean; dropped: number };
