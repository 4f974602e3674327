/**
 * Progress of the HTTP subcommands on one line of stderr (`Service.progress`, a `LiveStatus`):
 * task waits (what is waited for, its status, the next check), uploads, audio streams and
 * downloads (bytes, seconds of audio, time), redrawn on a terminal, plain lines with
 * `--progress`, none with `--no-progress`; and the sizes, times and lengths as they are shown.
 */
import type { FlacDownloadRetry, FlacDownloadStream, UploadProgress, TaskKind } from '../../lib/index.js';
import { LiveStatus } from '../status-line.js';

/** A size in decimal units, as file managers show it: `812 B`, `12.3 kB`, `72.7 MB`, `1.20 GB`. */
export function byteText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  if (bytes < 1e9) return `${(bytes / 1e6).toFixed(1)} MB`;
  return `${(bytes / 1e9).toFixed(2)} GB`;
}

/** A time waited or taken, whole seconds: `12 s`, `3 min 05 s`, `1 h 02 min`. */
export function elapsedText(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  if (total < 60) return `${total} s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return `${minutes} min ${String(total % 60).padStart(2, '0')} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** A length of audio: tenths of a second under a minute (`45.0 s`), else as `elapsedText`. */
export function audioText(seconds: number): string {
  return seconds < 60 ? `${seconds.toFixed(1)} s` : elapsedText(seconds * 1000);
}

/** Where a task wait is (times in ms since the epoch). */
export interface WaitProgress {
  kind: TaskKind;
  /** The last status read; undefined before the first. */
  status: string | undefined;
  failedReads: number;
  /** When the next status read is due; undefined once the task is final. */
  nextCheckAt: number | undefined;
  now: number;
  start: number;
}

/**
 * The line of a task wait: what is waited for, the last status, failed reads, when the next
 * check is, and the time waited: `waiting for the dub task (status PENDING, next check in 4 s), 12 s`.
 */
export function waitText(p: WaitProgress): string {
  const parts = [p.status === undefined ? 'submitted' : `status ${p.status}`];
  if (p.failedReads > 0) parts.push(`${p.failedReads} status ${p.failedReads === 1 ? 'read' : 'reads'} failed`);
  if (p.nextCheckAt !== undefined) {
    const inMs = p.nextCheckAt - p.now;
    const next = p.status === undefined && p.failedReads === 0 ? 'first check' : 'next check';
    parts.push(inMs > 0 ? `${next} in ${Math.ceil(inMs / 1000)} s` : 'checking now');
  }
  return `waiting for the ${p.kind} task (${parts.join(', ')}), ${elapsedText(p.now - p.start)}`;
}

/** Where a transfer is. */
export interface TransferProgress {
  /** What moves, in words: `uploading talk.wav`, `receiving the audio`. */
  what: string;
  /** Bytes moved so far; undefined before the first (the service has not answered yet). */
  bytes: number | undefined;
  totalBytes?: number | undefined;
  /** Seconds of audio moved so far and in all, where the stream says. */
  audioSeconds?: number | undefined;
  totalAudioSeconds?: number | undefined;
  elapsedMs: number;
}

/**
 * The line of a transfer: `receiving the audio: 2.1 MB, 45.0 s of audio, 9 s`, or with what the
 * stream says of its whole, `downloading the audio: 12.3 MB of 72.7 MB, 30 min 00 s of audio in
 * all, 14 s`; before the first byte, `...: waiting for the service, 3 s`.
 */
export function transferText(p: TransferProgress): string {
  if (p.bytes === undefined) return `${p.what}: waiting for the service, ${elapsedText(p.elapsedMs)}`;
  const amount = [p.totalBytes !== undefined ? `${byteText(p.bytes)} of ${byteText(p.totalBytes)}` : byteText(p.bytes)];
  if (p.audioSeconds !== undefined) {
    amount.push(`${audioText(p.audioSeconds)}${p.totalAudioSeconds !== undefined ? ` of ${audioText(p.totalAudioSeconds)}` : ''} of audio`);
  } else if (p.totalAudioSeconds !== undefined) {
    amount.push(`${audioText(p.totalAudioSeconds)} of audio in all`);
  }
  return `${p.what}: ${amount.join(', ')}, ${elapsedText(p.elapsedMs)}`;
}

/** What a transfer's source can tell of itself (a download: its size and audio format). */
export interface TransferSource {
  readonly totalBytes?: number | undefined;
  /** Seconds of audio in `bytes` of the stream, and in all, where known. */
  audioSeconds?(bytes: number): number | undefined;
  totalAudioSeconds?(): number | undefined;
}

/**
 * What a transfer step (`withTransfer`) is told as it goes. Its summary reads, for example,
 * `rt-translate: downloaded audio of run 1001 (72.7 MB, 30 min 00 s of audio) in 14 s`.
 */
export interface Transfer {
  /** Counts `bytes` more moved. */
  add(bytes: number): void;
  /** Sets the bytes moved so far (an upload that started again counts from 0). */
  at(bytes: number): void;
  /** Where the sizes and seconds come from, once known. */
  source(source: TransferSource): void;
}

/** A transfer step: what moves (`uploading talk.wav`), what was done once it succeeded (`uploaded talk.wav`). */
export interface TransferStep {
  what: string;
  done: string;
  /** Bytes moved as the step starts: 0 for an upload, which starts at once; by default none until the service answers. */
  bytes?: number;
}

/**
 * Runs `body`, a transfer, as a step of `progress`: what moves, the bytes `body` counts on the
 * `Transfer` it is given, the total and the seconds of audio as its `source` knows them, the
 * time taken; once `body` succeeded, a summary saying what was done where progress is shown.
 */
export async function withTransfer<T>(progress: LiveStatus, step: TransferStep, body: (transfer: Transfer) => Promise<T>): Promise<T> {
  const { what } = step;
  const start = Date.now();
  let bytes = step.bytes;
  let from: TransferSource | undefined;
  const state = (): TransferProgress => ({
    what,
    bytes,
    totalBytes: from?.totalBytes,
    audioSeconds: bytes === undefined ? undefined : from?.audioSeconds?.(bytes),
    totalAudioSeconds: from?.totalAudioSeconds?.(),
    elapsedMs: Date.now() - start,
  });
  progress.show(() => transferText(state()));
  const transfer: Transfer = {
    add: (n) => {
      bytes = (bytes ?? 0) + n;
      progress.refresh();
    },
    at: (n) => {
      bytes = n;
      progress.refresh();
    },
    source: (source) => {
      from = source;
      progress.refresh();
    },
  };
  let result: T;
  try {
    result = await body(transfer);
  } catch (error) {
    progress.stop();
    throw error;
  }
  const p = state();
  const audio = p.audioSeconds ?? p.totalAudioSeconds;
  progress.stop(
    `rt-translate: ${step.done} (${byteText(p.bytes ?? 0)}${audio !== undefined ? `, ${audioText(audio)} of audio` : ''}) in ${elapsedText(p.elapsedMs)}`,
  );
  return result;
}

/**
 * Runs `send`, an upload of `name`, as a step of `progress` (`withTransfer`): `send` passes the
 * callback it is given as the call's `onUploadProgress`.
 */
export function withUploadProgress<T>(progress: LiveStatus, name: string, send: (onUploadProgress: (p: UploadProgress) => void) => Promise<T>): Promise<T> {
  return withTransfer(progress, { what: `uploading ${name}`, done: `uploaded ${name}`, bytes: 0 }, (transfer) => {
    let total: number | undefined;
    transfer.source({
      get totalBytes() {
        return total;
      },
    });
    return send((p) => {
      total = p.totalBytes;
      transfer.at(p.sentBytes);
    });
  });
}

/**
 * What a download knows of itself, from its headers and (a FLAC) STREAMINFO: its size (of the
 * file), the seconds of audio in all, and with `decoded` (the bytes are PCM16) the seconds so far.
 */
export function downloadSource(download: FlacDownloadStream, decoded: boolean): TransferSource {
  return {
    get totalBytes() {
      return decoded ? undefined : download.totalBytes;
    },
    audioSeconds: (bytes) => {
      const format = download.format;
      return decoded && format ? bytes / (format.sampleRate * format.channels * 2) : undefined;
    },
    totalAudioSeconds: () => {
      const format = download.format;
      return format && format.totalSamples > 0 ? format.totalSamples / format.sampleRate : undefined;
    },
  };
}

/** The stderr line for a resumed download. */
export function describeRetry(what: string, info: FlacDownloadRetry): string {
  const reason =
    info.reason === 'expired'
      ? 'the URL expired; asked for a fresh one'
      : info.reason === 'status'
        ? `HTTP ${info.status ?? '?'}`
        : info.reason === 'timeout'
          ? 'no data came in time'
          : info.reason === 'connect'
            ? 'could not connect'
            : 'the connection was lost';
  return `rt-translate: ${what}: ${reason}; going on from byte ${info.offset}`;
}
