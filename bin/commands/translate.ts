/**
 * `rt-translate --from TAG --to TAG`: realtime speech translation from a file or stdin to a file
 * or stdout, in the ffmpeg habit. Input is raw PCM16 LE mono 24 kHz or a WAV file of that
 * format; output is raw PCM16, or WAV when the output path ends in `.wav`.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { pipeline } from 'node:stream/promises';
import { PassThrough, Writable, type Readable } from 'node:stream';
import wav from 'wav';
import { RealtimeTranslateStream } from '../../lib/realtime/realtime-translate-stream.js';
import { normalizeRealtimeLanguage } from '../../lib/realtime/languages.js';
import { summarizeServerEvent, REALTIME_SAMPLE_RATE } from '../../lib/realtime/codec.js';
import { ENV_API_KEY, ENV_REALTIME_URL, resolveApiKey, resolveRealtimeUrl } from '../../lib/config.js';
import { ValidationError, ConfigError } from '../../lib/errors.js';
import { startEmulator, EMULATOR_DEFAULT_API_KEY, type RunningEmulator } from '../../lib/emulator/server.js';
import {
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  UsageError,
  isUsageError,
  describeFailure,
  intFlag,
  packageVersion,
  parseCommandLine,
  type CliIo,
} from '../cli.js';

export const TRANSLATE_USAGE = `Usage: rt-translate --from TAG --to TAG [options]      realtime speech translation

  -i, --input PATH      audio in; '-' or absent: stdin. Raw PCM16 LE mono 24 kHz, or a WAV
                        file of that format (recognised by its RIFF header)
  -o, --output PATH     translated audio out; '-' or absent: stdout. A path ending in .wav
                        gets a WAV header; otherwise raw PCM16 LE mono 24 kHz
  --from TAG            source language (ar-ae ar-eg ar-sa de-de en-gb en-us es-es fr-ca
  --to TAG              target language  fr-fr hi-in ja-jp ko-kr pt-br zh-cn)
  --voice ID            use the cloned voice ID
  --text-only           text only (output_modalities ["text"]); no audio written
  --events PATH         every server event as one JSON object per line (audio as byte counts)
  --api-key KEY         or env ${ENV_API_KEY}
  --realtime-url URL    or env ${ENV_REALTIME_URL}; the host, /v1/realtime is appended
  --allow-insecure      allow plain-text ws:// to a host that is not loopback
  --emulator            start the embedded emulator on loopback and use it
  -h, --help; --version

Transcripts and translations are printed to stderr. Exit status: 0 done; 1 service or network
failure (after everything received has been written); 2 usage or configuration error; 130
interrupted twice (a first Ctrl-C stops reading input and lets the last translation finish).

Other commands: rt-translate emulator --help`;

const OPTIONS = {
  input: { type: 'string', short: 'i' },
  output: { type: 'string', short: 'o' },
  from: { type: 'string' },
  to: { type: 'string' },
  voice: { type: 'string' },
  'text-only': { type: 'boolean' },
  events: { type: 'string' },
  'api-key': { type: 'string' },
  'realtime-url': { type: 'string' },
  'allow-insecure': { type: 'boolean' },
  emulator: { type: 'boolean' },
  'quiet-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

const SERVICE_FORMAT = 'PCM16 LE (16-bit integer) mono 24000 Hz';

/** Reads up to `n` bytes without consuming them (they are put back with unshift). */
async function peek(stream: Readable, n: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  while (length < n) {
    const chunk = stream.read() as Buffer | null;
    if (chunk !== null) {
      chunks.push(chunk);
      length += chunk.length;
      continue;
    }
    if (stream.readableEnded) break;
    const more = await new Promise<boolean>((resolve, reject) => {
      const done = (value: boolean, error?: Error) => {
        stream.off('readable', onReadable);
        stream.off('end', onEnd);
        stream.off('error', onError);
        if (error) reject(error);
        else resolve(value);
      };
      const onReadable = () => done(true);
      const onEnd = () => done(false);
      const onError = (error: Error) => done(false, error);
      stream.on('readable', onReadable);
      stream.on('end', onEnd);
      stream.on('error', onError);
    });
    if (!more) break;
  }
  const head = Buffer.concat(chunks);
  if (head.length > 0) stream.unshift(head);
  return head.subarray(0, n);
}

function isWavHeader(head: Buffer): boolean {
  return head.length >= 12 && head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WAVE';
}

interface WavFormat {
  audioFormat: number;
  channels: number;
  sampleRate: number;
  bitDepth: number;
}

/** The PCM inside a WAV input, or a usage error saying what was found and what is accepted. */
async function wavPayload(input: Readable, label: string): Promise<Readable> {
  const reader = new wav.Reader();
  // The wav package is built on an old readable-stream; a core PassThrough gives callers a
  // modern Readable (async iteration, destroy semantics).
  const payload = new PassThrough();
  const parsing = pipeline(input, reader, payload);
  parsing.catch(() => undefined);
  const format = await new Promise<WavFormat>((resolve, reject) => {
    reader.once('format', resolve);
    reader.once('error', (error: Error) => reject(new UsageError(`cannot parse the WAV header of ${label}: ${error.message}`)));
    parsing.catch((error: Error) => reject(new UsageError(`cannot read ${label}: ${error.message}`)));
  });
  if (format.audioFormat !== 1 || format.bitDepth !== 16 || format.channels !== 1 || format.sampleRate !== REALTIME_SAMPLE_RATE) {
    payload.destroy();
    const kind = format.audioFormat === 1 ? `${format.bitDepth}-bit integer PCM` : `WAV format code ${format.audioFormat}`;
    throw new UsageError(
      `${label} is a WAV file of ${kind}, ${format.channels} channel(s), ${format.sampleRate} Hz; ` +
        `accepted: ${SERVICE_FORMAT} (convert it first, e.g. ffmpeg -i IN -ac 1 -ar 24000 -c:a pcm_s16le OUT.wav).`,
    );
  }
  return payload;
}

async function openInput(path: string | undefined, io: CliIo): Promise<{ source: Readable; label: string }> {
  if (path === undefined || path === '-') return { source: io.stdin, label: 'standard input' };
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw new UsageError(`cannot read input ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const info = await handle.stat();
  if (info.isDirectory()) {
    await handle.close();
    throw new UsageError(`cannot read input ${path}: it is a directory`);
  }
  return { source: createReadStream(path, { fd: handle }), label: path };
}

interface AudioSink {
  /** Where translated audio is written. */
  stream: Writable;
  /** Ends the sink and waits until everything is on disk (WAV sizes patched where possible). */
  close(): Promise<void>;
}

function discardSink(): AudioSink {
  const stream = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  return { stream, close: async () => { stream.end(); } };
}

async function openOutput(path: string | undefined, io: CliIo): Promise<AudioSink> {
  if (path === undefined || path === '-') {
    return {
      stream: io.stdout,
      close: async () => {
        if (io.stdout.writableNeedDrain) await once(io.stdout, 'drain');
      },
    };
  }
  const file = createWriteStream(path);
  await new Promise<void>((resolve, reject) => {
    file.once('open', () => resolve());
    file.once('error', (error: NodeJS.ErrnoException) =>
      reject(new UsageError(`cannot write output ${path}: ${error.code ?? error.message}`)),
    );
  });
  if (!path.toLowerCase().endsWith('.wav')) {
    return {
      stream: file,
      close: async () => {
        file.end();
        await once(file, 'close');
      },
    };
  }
  // A WAV of unknown length: placeholder sizes first, the exact header written over them once
  // the audio has ended (when the output is a regular file; a pipe keeps the placeholders).
  const writer = new wav.Writer({ channels: 1, sampleRate: REALTIME_SAMPLE_RATE, bitDepth: 16 });
  let finalHeader: Buffer | undefined;
  writer.on('header', (header: Buffer) => (finalHeader = header));
  const written = pipeline(writer as unknown as Readable, file);
  written.catch(() => undefined);
  return {
    stream: writer as unknown as Writable,
    close: async () => {
      writer.end();
      await written;
      if (finalHeader && (await stat(path)).isFile()) {
        const handle = await open(path, 'r+');
        try {
          await handle.write(finalHeader, 0, finalHeader.length, 0);
        } finally {
          await handle.close();
        }
      }
    },
  };
}

/** Writes a chunk, waiting for drain; never loses what was written before a failure. */
async function writeAll(stream: Writable, chunk: Buffer): Promise<void> {
  if (!stream.write(chunk)) await once(stream, 'drain');
}

function seconds(bytes: number): string {
  return (bytes / (REALTIME_SAMPLE_RATE * 2)).toFixed(1);
}

export async function runTranslate(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandLine(() => parseArgs({ args, options: OPTIONS, strict: true }));
  if (values.help) {
    io.stdout.write(`${TRANSLATE_USAGE}\n`);
    return EXIT_OK;
  }
  if (values.version) {
    io.stdout.write(`${packageVersion()}\n`);
    return EXIT_OK;
  }
  if (values.from === undefined) throw new UsageError('--from TAG is required (see --help).');
  if (values.to === undefined) throw new UsageError('--to TAG is required (see --help).');
  const from = normalizeRealtimeLanguage(values.from, '--from');
  const to = normalizeRealtimeLanguage(values.to, '--to');
  const voiceId = intFlag(values.voice, '--voice', 1);
  const quietPeriodMs = intFlag(values['quiet-ms'], '--quiet-ms', 1);
  const textOnly = values['text-only'] === true;

  const realtimeOption = values['realtime-url'] ?? io.env[ENV_REALTIME_URL];
  const useEmulator = values.emulator === true || !realtimeOption;
  let apiKey = resolveApiKey(values['api-key'], io.env);
  if (!useEmulator && apiKey === undefined) {
    throw new UsageError(`no API key: pass --api-key or set ${ENV_API_KEY}.`);
  }
  // An unusable URL is a configuration error, found before any file is opened or written.
  if (!useEmulator) resolveRealtimeUrl(realtimeOption, { allowInsecure: values['allow-insecure'] === true });

  const { source: rawInput, label } = await openInput(values.input, io);
  const head = await peek(rawInput, 12);
  if (head.length === 0) throw new UsageError(`no audio on ${label}.`);
  const source = isWavHeader(head) ? await wavPayload(rawInput, label) : rawInput;

  const sink = textOnly ? discardSink() : await openOutput(values.output, io);
  const events = values.events ? createWriteStream(values.events) : undefined;
  if (events) {
    await new Promise<void>((resolve, reject) => {
      events.once('open', () => resolve());
      events.once('error', (error: NodeJS.ErrnoException) =>
        reject(new UsageError(`cannot write events to ${values.events}: ${error.code ?? error.message}`)),
      );
    });
  }

  let emulator: RunningEmulator | undefined;
  let realtimeUrl = realtimeOption;
  if (useEmulator) {
    apiKey ??= EMULATOR_DEFAULT_API_KEY;
    emulator = await startEmulator({ apiKeys: [apiKey] });
    realtimeUrl = emulator.realtimeUrl;
    if (values.emulator !== true) {
      io.stderr.write(
        `rt-translate: no realtime URL configured (--realtime-url or ${ENV_REALTIME_URL}); ` +
          `using the embedded emulator at ${emulator.realtimeUrl}\n`,
      );
    }
  }

  const controller = new AbortController();
  let rt: RealtimeTranslateStream;
  try {
    rt = new RealtimeTranslateStream({
      from,
      to,
      apiKey,
      realtimeUrl,
      signal: controller.signal,
      allowInsecure: values['allow-insecure'] === true,
      ...(voiceId !== undefined ? { voiceId } : {}),
      ...(textOnly ? { outputModalities: ['text'] as const } : {}),
      ...(quietPeriodMs !== undefined ? { quietPeriodMs } : {}),
    });
  } catch (error) {
    await emulator?.close();
    if (error instanceof ValidationError || error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }

  // Progress and text lines on stderr.
  const tty = io.stderr.isTTY === true;
  let progressShown = false;
  const clearProgress = () => {
    if (progressShown) io.stderr.write('\r\x1b[K');
    progressShown = false;
  };
  const line = (text: string) => {
    clearProgress();
    io.stderr.write(`${text}\n`);
  };
  const progress = tty
    ? setInterval(() => {
        const s = rt.stats;
        io.stderr.write(`\r\x1b[Ksent ${seconds(s.bytesSent)} s, received ${seconds(s.bytesReceived)} s, ${s.responses} responses`);
        progressShown = true;
      }, 250)
    : undefined;
  progress?.unref();
  rt.on('transcript', (text) => line(`transcript (${from}): ${text}`));
  rt.on('text.done', (text) => line(`translation (${to}): ${text}`));
  rt.on('warning', (warning) => line(`rt-translate: warning: ${warning.message}`));
  if (events) rt.on('server-event', (event) => events.write(`${JSON.stringify(summarizeServerEvent(event))}\n`));

  // First Ctrl-C: stop reading input, let the session finish. Second: abort.
  let stopping = false;
  const onSignal = () => {
    if (stopping) controller.abort(new Error('interrupted'));
    stopping = true;
  };
  process.on('SIGINT', onSignal);

  const pumpInput = async () => {
    for await (const chunk of source) {
      if (stopping || rt.destroyed) break;
      if (!rt.write(chunk)) await once(rt, 'drain');
    }
    if (!rt.destroyed) rt.end();
  };
  const pumpOutput = async () => {
    for await (const chunk of rt) await writeAll(sink.stream, chunk as Buffer);
  };

  let failure: unknown;
  const input = pumpInput().catch((error: unknown) => {
    failure ??= error;
    rt.destroy(error instanceof Error ? error : new Error(String(error)));
  });
  try {
    await pumpOutput();
  } catch (error) {
    failure ??= error;
  }
  // The session is over: stop reading an input that may never end (a microphone, an open pipe).
  if (!source.destroyed) source.destroy();
  await input;
  process.off('SIGINT', onSignal);
  if (progress) clearInterval(progress);
  clearProgress();
  try {
    await sink.close();
    if (events) {
      events.end();
      await once(events, 'close');
    }
  } catch (error) {
    failure ??= error;
  }
  await emulator?.close();
  if (failure === undefined) return EXIT_OK;
  if (controller.signal.aborted) {
    io.stderr.write('rt-translate: interrupted\n');
    return 130;
  }
  io.stderr.write(`${describeFailure(failure)}\n`);
  return isUsageError(failure) ? EXIT_USAGE : EXIT_FAILURE;
}
