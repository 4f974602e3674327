/**
 * Outputs of the HTTP subcommands in the ffmpeg habit (`-o PATH`, `-` or absent for standard
 * output), files written whole or not at all (`../output-file.ts`): audio and downloads keep
 * what arrived before a failure or an interruption in `NAME.partial` (valid as far as it goes),
 * said on stderr; text is written at once or not at all.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { WavFileWriter, type FlacDownloadStream } from '../../lib/index.js';
import { UsageError, type CliIo } from '../cli.js';
import { openOutputFile, writeOutputFile, type OutputContent, type PartialFile } from '../output-file.js';
import type { Service } from './service.js';
import { describeRetry, downloadSource, withTransfer } from './transfers.js';

/** Where audio goes: a file or standard output. Writes wait for drain; `close` keeps all. */
export interface AudioSink {
  /** `standard output` or the path. */
  label: string;
  toStdout: boolean;
  write(chunk: Buffer): Promise<void>;
  /** Ends the file (never standard output) and waits until everything is written. */
  close(): Promise<void>;
}

function isTerminal(stream: Writable): boolean {
  return (stream as Writable & { isTTY?: boolean }).isTTY === true;
}

/** True when `-o` means standard output. */
export function isStdout(path: string | undefined): boolean {
  return path === undefined || path === '-';
}

/**
 * Checks that audio can go to `path` (absent or `-`: standard output, which must not be a
 * terminal) before any request: a problem is a usage error (a `FileError` for the file). Nothing
 * is created but, with `createDirs`, the missing directories: the file is written as
 * `PATH.partial` and renamed once complete (`../output-file.ts`).
 */
export async function checkOutput(path: string | undefined, io: CliIo, createDirs = false): Promise<void> {
  if (isStdout(path)) {
    if (isTerminal(io.stdout)) {
      throw new UsageError('refusing to write audio to a terminal: pass -o PATH, or redirect standard output.');
    }
    return;
  }
  await openOutputFile(io, path!, { createDirs });
}

async function writeTo(stream: Writable, chunk: Buffer): Promise<void> {
  if (!stream.write(chunk)) await once(stream, 'drain');
}

async function endFile(stream: WriteStream | WavFileWriter): Promise<void> {
  if (stream.destroyed) return;
  const closed = once(stream, 'close');
  stream.end();
  await closed;
}

/** Raw bytes to `path` (checked by `checkOutput`) or standard output. */
export function openRawSink(path: string | undefined, io: CliIo): AudioSink {
  if (isStdout(path)) {
    return {
      label: 'standard output',
      toStdout: true,
      write: (chunk) => writeTo(io.stdout, chunk),
      close: async () => {
        if (io.stdout.writableNeedDrain) await once(io.stdout, 'drain');
      },
    };
  }
  const file = createWriteStream(path!);
  const failed = once(file, 'error').then(([error]) => Promise.reject(error as Error));
  failed.catch(() => undefined);
  return {
    label: path!,
    toStdout: false,
    write: (chunk) => Promise.race([writeTo(file, chunk), failed]),
    close: () => Promise.race([endFile(file), failed]),
  };
}

/** PCM16 LE to a WAV file at `path`, whose header gets the exact sizes on `close`. */
export function openWavSink(path: string, rate: number, channels: number): AudioSink {
  const file = new WavFileWriter(path, { format: 's16le', rate, channels });
  const failed = once(file, 'error').then(([error]) => Promise.reject(error as Error));
  failed.catch(() => undefined);
  return {
    label: path,
    toStdout: false,
    write: (chunk) => Promise.race([writeTo(file, chunk), failed]),
    close: () => Promise.race([endFile(file), failed]),
  };
}

/** PCM16 LE that a command decoded itself: its layout, and whether it goes into a WAV container. */
export interface PcmLayout {
  rate: number;
  channels: number;
  container: 'wav' | 'raw';
}

/**
 * Where a command's audio goes, checked (a usage error otherwise) before the audio is asked for:
 * the function returned copies a source there as it arrives (PCM16 LE laid out as `pcm`, or the
 * bytes as they come). Standard output for `-` or no `output`; else a file written as
 * `OUTPUT.partial` and renamed once complete (for `pcm` in a WAV container, a WAV file with
 * exact sizes). After a failure or an interruption the audio received so far stays in
 * `OUTPUT.partial`, valid as far as it goes (a WAV's sizes, a FLAC's last frame), as a stderr
 * line says (a file without audio is removed); `OUTPUT` is never written half. The copy starts
 * at once, so a source that fails early is never left unwatched; `counted` is shown each piece
 * once written (for progress).
 */
export async function audioOutput(
  service: Service,
  output: string | undefined,
): Promise<(source: Readable, pcm?: PcmLayout, counted?: (chunk: Buffer) => void) => Promise<number>> {
  const { io } = service;
  if (isStdout(output)) return (source, _pcm, counted) => copyToSink(source, openRawSink(undefined, io), counted);
  const file = await openOutputFile(io, output!);
  return (source, pcm, counted) => {
    const content: OutputContent = pcm?.container === 'raw' ? { kind: 'pcm', bytesPerSecond: 2 * pcm.rate * pcm.channels } : { kind: 'file' };
    const sink = (path: string): AudioSink => (pcm?.container === 'wav' ? openWavSink(path, pcm.rate, pcm.channels) : openRawSink(path, io));
    return writeOutputFile(file, (path) => copyToSink(source, sink(path), counted), { content, report: (partial) => service.kept(file, partial) });
  };
}

/** `text` to `output`: standard output, or a file written whole (as `audioOutput` does; nothing kept after a failure). */
export async function writeTextOutput(output: string | undefined, io: CliIo, text: string): Promise<void> {
  if (isStdout(output)) {
    await openRawSink(undefined, io).write(Buffer.from(text));
    return;
  }
  await writeOutputFile(await openOutputFile(io, output!), (path) => writeFile(path, text));
}

/**
 * Copies `source` into `sink` as it arrives, then closes the sink, also after a failure, so
 * what was received is kept. Rethrows the failure (of the source first). Returns the bytes;
 * `counted` is shown each piece once written.
 */
export async function copyToSink(source: Readable, sink: AudioSink, counted?: (chunk: Buffer) => void): Promise<number> {
  let bytes = 0;
  let failure: unknown;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      await sink.write(chunk);
      bytes += chunk.length;
      counted?.(chunk);
    }
  } catch (error) {
    failure = error;
    if (!source.destroyed) source.destroy();
  }
  try {
    await sink.close();
  } catch (error) {
    failure ??= error;
  }
  if (failure !== undefined) throw failure;
  return bytes;
}

/* ----------------------------------------------------------------------------------------- */
/* Downloads to files                                                                        */

/** A download that failed; `partial` names the file holding what was received, if any. */
export class DownloadError extends Error {
  constructor(
    readonly failure: unknown,
    readonly partial: PartialFile | undefined,
  ) {
    super(failure instanceof Error ? failure.message : String(failure));
  }
}

/**
 * Downloads the file `open` opens to `path` (written as `path.partial`, renamed once complete),
 * its progress on the command's line and, when it resumes, a line on stderr (`label` names it).
 * On failure the bytes received stay in `path.partial` (a FLAC there cut after its last complete
 * frame; an empty one is removed), named by the `DownloadError`; after an interruption the
 * service says so at once.
 */
export async function downloadToFile(service: Service, open: () => Promise<FlacDownloadStream>, path: string, label: string): Promise<number> {
  const { io, progress } = service;
  let kept: PartialFile | undefined;
  try {
    const file = await openOutputFile(io, path);
    return await withTransfer(progress, { what: `downloading ${label}`, done: `downloaded ${label}` }, async (transfer) =>
      writeOutputFile(
        file,
        async (partial) => {
          const download = await open();
          transfer.source(downloadSource(download, false));
          download.on('retry', (info) => progress.print(describeRetry(label, info)));
          return copyToSink(download, openRawSink(partial, io), (chunk) => transfer.add(chunk.length));
        },
        {
          report: (partial) => {
            if (service.signal.aborted) service.kept(file, partial);
            else kept = partial;
          },
        },
      ),
    );
  } catch (error) {
    throw new DownloadError(error, kept);
  }
}

/* ----------------------------------------------------------------------------------------- */
/* Progress                                                                                  */
