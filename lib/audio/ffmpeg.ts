/**
 * Decoding any audio or video file the library does not read itself (MP3, MP4, WebM, ...)
 * through an `ffmpeg` binary, straight to a described PCM layout (by default the service
 * format: s16le, 24000 Hz, mono).
 *
 * Policies:
 * - Which ffmpeg: the `ffmpegPath` option, else the file `FFMPEG_PATH` names, else the one
 *   `findFfmpegOnPath` finds in the directories of `PATH`; that exact file is spawned (no shell,
 *   no other lookup: never an `avconv`, a `./ffmpeg` of the working directory or an
 *   `ffmpeg-static` package). The library ships no binary and depends on none; without one the
 *   constructor throws `UnsupportedError`.
 * - Input: a file path (`inputPath`), which ffmpeg opens itself so it can seek (an MP4 whose
 *   index is at the end needs that), or bytes written to this stream (piped to ffmpeg's stdin).
 *   The path is given to ffmpeg as `file:` + the absolute path, so a name such as `concat:x.mp3`
 *   or `http:x` is always a local file, never one of ffmpeg's protocols.
 * - Output: what ffmpeg writes to its stdout, with backpressure (its stdout is paused while
 *   this stream's reader is behind). The readable side ends when ffmpeg exits with status 0
 *   (and, when it produced no audio at all, printed no error); any other exit fails the stream
 *   with `UnsupportedError` carrying the end of ffmpeg's error output (at most 2 KiB of it is
 *   kept). ffmpeg closing its stdin early is not an error by itself: the exit status decides.
 * - `destroy()` kills the process (SIGKILL) and calls back once it has exited (reaped).
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { Duplex } from 'node:stream';
import { spawn, type ChildProcess } from 'node:child_process';
import { UnsupportedError, ValidationError } from '../errors.js';
import { SERVICE_FORMAT, resolveDescription, type AudioDescription, type ResolvedAudioDescription } from './audio-format.js';
import type { AudioTransformOptions } from './processor.js';

/** The environment variable that names the ffmpeg executable to use. */
export const ENV_FFMPEG_PATH = 'FFMPEG_PATH';

/** True when `path` is a regular file this process may execute. */
export function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The path of an executable `ffmpeg` in one of the directories of `pathVariable` (default
 * `process.env.PATH`), or undefined when there is none.
 */
export function findFfmpegOnPath(pathVariable: string | undefined = process.env.PATH): string | undefined {
  if (!pathVariable) return undefined;
  const names = process.platform === 'win32' ? ['ffmpeg.exe', 'ffmpeg'] : ['ffmpeg'];
  for (const dir of pathVariable.split(delimiter)) {
    if (dir === '') continue;
    for (const name of names) {
      const candidate = join(dir, name);
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  return undefined;
}

/**
 * The ffmpeg to run by default: the file `FFMPEG_PATH` names when it is set (checked by the
 * caller or at spawn), else `findFfmpegOnPath(env.PATH)`; undefined when there is none.
 */
export function findFfmpeg(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const named = env[ENV_FFMPEG_PATH];
  return named ? named : findFfmpegOnPath(env.PATH);
}

export interface FfmpegDecoderOptions extends AudioTransformOptions {
  /**
   * A file for ffmpeg to open itself (relative to the working directory, or absolute); without
   * it, the bytes written to this stream are decoded.
   */
  inputPath?: string;
  /** The ffmpeg executable to run. Default: `findFfmpeg()` (`FFMPEG_PATH`, else `PATH`). */
  ffmpegPath?: string;
  /** The PCM layout to produce; default the service format (s16le, 24000 Hz, mono). */
  to?: AudioDescription;
}

/** Bytes of ffmpeg's error output kept for the failure message. */
const STDERR_KEEP = 2048;

/**
 * Runs ffmpeg as a decoder; see the module comment for the policies. Throws `UnsupportedError`
 * when there is no ffmpeg to run, `ValidationError` for a bad option.
 */
export class FfmpegDecoder extends Duplex {
  readonly to: ResolvedAudioDescription;
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;
  #stderrTail = '';
  #pendingWrite: (() => void) | undefined;
  #running = true;
  #bytesOut = 0;

  constructor(options: FfmpegDecoderOptions = {}) {
    const to = resolveDescription(options.to ?? SERVICE_FORMAT, 'to');
    if (options.ffmpegPath !== undefined && (typeof options.ffmpegPath !== 'string' || options.ffmpegPath === '')) {
      throw new ValidationError('ffmpegPath', 'the path of an ffmpeg executable', String(options.ffmpegPath));
    }
    if (options.inputPath !== undefined && (typeof options.inputPath !== 'string' || options.inputPath === '')) {
      throw new ValidationError('inputPath', 'the path of a file', String(options.inputPath));
    }
    const command = options.ffmpegPath ?? findFfmpeg();
    if (command === undefined) {
      throw new UnsupportedError('Cannot run ffmpeg: no ffmpeg executable on PATH (install ffmpeg, set FFMPEG_PATH, or pass ffmpegPath).');
    }
    const fromFile = options.inputPath !== undefined;
    // `file:` and an absolute path: the name is a local file whatever it looks like.
    const input = fromFile ? ['-nostdin', '-i', `file:${resolve(options.inputPath!)}`] : ['-i', 'pipe:0'];
    // ffmpeg's raw muxers have the library's format names (s16le, s16be, f32le, mulaw, alaw).
    const args = [
      '-hide_banner',
      '-loglevel',
      'error',
      ...input,
      '-vn',
      '-sn',
      '-dn',
      '-f',
      to.format,
      '-ar',
      String(to.rate),
      '-ac',
      String(to.channels),
      'pipe:1',
    ];
    super({
      readableHighWaterMark: options.readableHighWaterMark,
      writableHighWaterMark: options.writableHighWaterMark,
      objectMode: false,
      decodeStrings: true,
      allowHalfOpen: true,
    });
    this.to = to;
    const child = spawn(command, args, { stdio: [fromFile ? 'ignore' : 'pipe', 'pipe', 'pipe'], windowsHide: true });
    this.#child = child;
    // EPIPE on stdin is expected when ffmpeg stops reading: the exit status decides.
    child.stdin?.on('error', () => undefined);
    child.stdout!.on('error', () => undefined);
    child.stderr!.on('error', () => undefined);

    child.stdout!.on('data', (chunk: Buffer) => {
      this.#bytesOut += chunk.length;
      if (!this.push(chunk)) child.stdout!.pause();
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (text: string) => {
      this.#stderrTail = (this.#stderrTail + text).slice(-STDERR_KEEP);
    });
    this.#exited = new Promise<void>((resolve) => {
      child.once('error', (error) => {
        this.#running = false;
        this.#release();
        this.destroy(new UnsupportedError(`Cannot run ffmpeg: ${error.message}.`, { cause: error }));
        resolve();
      });
      child.once('close', (code, signal) => {
        this.#running = false;
        this.#release();
        if (!this.destroyed) {
          const detail = this.#stderrTail.trim().split('\n').slice(-3).join(' / ');
          // Some ffmpeg builds exit with 0 after "Invalid data found": no audio and a message
          // is a failure too.
          if (code === 0 && (this.#bytesOut > 0 || detail === '')) this.push(null);
          else {
            const status = code === null ? `signal ${signal}` : `status ${code}`;
            this.destroy(new UnsupportedError(`ffmpeg could not decode the input (exit ${status}): ${detail || 'no message'}`));
          }
        }
        resolve();
      });
    });
    if (fromFile) this.end();
  }

  /** The ffmpeg process id (undefined when it could not be started). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const stdin = this.#child.stdin;
    if (!this.#running || !stdin || stdin.destroyed) {
      callback(); // ffmpeg has stopped reading: its exit status reports the outcome
      return;
    }
    if (stdin.write(chunk)) callback();
    else {
      this.#pendingWrite = () => callback();
      stdin.once('drain', () => this.#release());
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#child.stdin?.end();
    callback();
  }

  override _read(): void {
    this.#child.stdout?.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#release();
    if (this.#running) this.#child.kill('SIGKILL');
    // The process counts as closed once its pipes are: a paused stdout (a reader that fell
    // behind) would otherwise hold unread output, and 'close', forever.
    this.#child.stdout?.destroy();
    this.#exited.then(() => callback(error));
  }

  /** Lets a write that waits on ffmpeg's stdin go on (drained, or the process is gone). */
  #release(): void {
    const pending = this.#pendingWrite;
    this.#pendingWrite = undefined;
    pending?.();
  }
}
