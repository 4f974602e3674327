/**
 * Uploads: the multipart bodies the client streams (exact bytes, lengths, names, repeated
 * fields, a file that changes while it is sent), the emulator's streaming parser (any chunking
 * gives the same form; a boundary split between chunks), and 200 MB uploaded with bounded memory
 * on both sides: a file from disk, and a generated Readable (which, sent once, is never re-sent).
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { appendFile, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MultipartError, MultipartParser, parseMultipart } from '../lib/emulator/http/multipart.js';
import { RateLimitError, ValidationError } from '../lib/errors.js';
import { multipartBody } from '../lib/http/multipart.js';
import { collect, control, logged, sharedEmulator } from './http-test-helpers.js';

const env = sharedEmulator();
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-uploads-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function wavHeader(dataBytes: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(24_000, 24);
  header.writeUInt32LE(48_000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(dataBytes, 40);
  return header;
}

const CHUNK = 64 * 1024;
/** 251 chunks of distinct content, made before any measurement so that yielding them allocates nothing. */
const PATTERN = Buffer.concat(Array.from({ length: 251 }, (_, index) => Buffer.alloc(CHUNK, index)));

/**
 * A `size`-byte WAV made as it is read, in 64 KiB chunks (views of `PATTERN`, in turn, so a lost
 * or reordered chunk changes the hash), fed into `hash` and counted as it goes.
 */
function generatedWav(size: number, hash: Hash, counted: { bytes: number } = { bytes: 0 }): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    const header = wavHeader(size - 44);
    hash.update(header);
    counted.bytes += header.length;
    yield header;
    for (let offset = 44, index = 0; offset < size; offset += CHUNK, index++) {
      const start = (index % 251) * CHUNK;
      const chunk = PATTERN.subarray(start, start + Math.min(CHUNK, size - offset));
      hash.update(chunk);
      counted.bytes += chunk.length;
      yield chunk;
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

/** Runs `work`, sampling heap and ArrayBuffer use every 20 ms; resolves to the peak growth in bytes. */
async function peakMemoryDuring(work: () => Promise<unknown>): Promise<number> {
  const before = process.memoryUsage();
  let peak = 0;
  const sample = (): void => {
    const now = process.memoryUsage();
    peak = Math.max(peak, now.heapUsed + now.arrayBuffers - (before.heapUsed + before.arrayBuffers));
  };
  const sampler = setInterval(sample, 20);
  try {
    await work();
    sample();
  } finally {
    clearInterval(sampler);
  }
  return peak;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

describe('multipart bodies', () => {
  it('fields (arrays repeated, null left out), then files, with an exact Content-Length', async () => {
    const body = await multipartBody({ voice_name: 'Mine', gender: 2, enhance: true, dictionaries: [4, 5], none: null, missing: undefined }, [
      { name: 'file', upload: { data: Buffer.from('RIFF....WAVE'), filename: 'a "quoted"\nname.wav' } },
    ]);
    const bytes = await collect(body.open());
    expect(bytes.length).toBe(body.length);
    const boundary = /boundary=(.+)$/.exec(body.contentType)![1]!;
    expect(bytes.toString('latin1')).toBe(
      `--${boundary}\r\nContent-Disposition: form-data; name="voice_name"\r\n\r\nMine\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="gender"\r\n\r\n2\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="enhance"\r\n\r\ntrue\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="dictionaries"\r\n\r\n4\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="dictionaries"\r\n\r\n5\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a %22quoted%22%0Aname.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF....WAVE\r\n` +
        `--${boundary}--\r\n`,
    );
    expect(parseMultipart(bytes, boundary).map((p) => [p.name, p.data.toString()])).toEqual([
      ['voice_name', 'Mine'],
      ['gender', '2'],
      ['enhance', 'true'],
      ['dictionaries', '4'],
      ['dictionaries', '5'],
      ['file', 'RIFF....WAVE'],
    ]);
    expect(body.canReopen()).toBe(true);
    expect((await collect(body.open())).equals(bytes)).toBe(true);
  });

  it('a Readable has no known length and can be sent once', async () => {
    const body = await multipartBody({}, [{ name: 'media_file', upload: Readable.from([Buffer.from('abc')]) }]);
    expect(body.length).toBeUndefined();
    expect(body.canReopen()).toBe(true);
    await collect(body.open());
    expect(body.canReopen()).toBe(false);
  });

  it('a file that grows while it is read fails with a ValidationError naming the field', async () => {
    const path = join(dir, 'growing.wav');
    await writeFile(path, Buffer.alloc(1000, 1));
    const body = await multipartBody({}, [{ name: 'media_file', field: 'mediaFile', upload: path }]);
    await appendFile(path, Buffer.alloc(10, 2));
    const error = await collect(body.open()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field: 'mediaFile' });
  });

  it('refuses what is not an upload, before anything is sent', async () => {
    await expect(multipartBody({}, [{ name: 'file', upload: 42 as never }])).rejects.toMatchObject({ field: 'file' });
    await expect(multipartBody({}, [{ name: 'file', upload: new URL('https://example.com/a.wav') }])).rejects.toMatchObject({ field: 'file' });
    await expect(multipartBody({}, [{ name: 'file', upload: dir }])).rejects.toMatchObject({ field: 'file' });
  });
});

describe('upload progress (onUploadProgress)', () => {
  it("a file: the bytes handed on grow to the body's exact length, which the emulator received", async () => {
    const path = join(dir, 'progress.wav');
    await writeFile(path, Buffer.concat([wavHeader(600_000), Buffer.alloc(600_000, 3)]));
    await control(env.emu, 'DELETE', 'requests');
    const seen: Array<{ sentBytes: number; totalBytes: number | undefined }> = [];
    await env.client.transcription.create({ language: 'en-us', mediaFile: path }, { onUploadProgress: (p) => seen.push({ ...p }) });
    const total = seen[0]!.totalBytes!;
    expect(total).toBeGreaterThan(600_044);
    // The file goes in pieces of 64 KiB: several reports, each later one further, the last the whole body.
    expect(seen.length).toBeGreaterThan(9);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.sentBytes).toBeGreaterThan(seen[i - 1]!.sentBytes);
    expect(seen.every((p) => p.totalBytes === total)).toBe(true);
    expect(seen.at(-1)!.sentBytes).toBe(total);
    expect((await logged(env.emu, 'POST', '/transcribe'))[0]!.uploads![0]!.size).toBe(600_044);
  });

  it('a Readable: no total, and the bytes handed on count the whole body', async () => {
    const seen: Array<{ sentBytes: number; totalBytes: number | undefined }> = [];
    const data = Readable.from([wavHeader(140_000), Buffer.alloc(70_000, 1), Buffer.alloc(70_000, 2)]);
    await env.client.voices.create(
      { file: { data, filename: 'voice.wav' }, voiceName: 'Progress', gender: 2 },
      { onUploadProgress: (p) => seen.push({ ...p }) },
    );
    expect(seen.every((p) => p.totalBytes === undefined)).toBe(true);
    expect(seen.at(-1)!.sentBytes).toBeGreaterThan(140_000);
  });

  it('a retried upload counts again from the start', async () => {
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { status: 429, retryAfter: 0, afterBody: true, count: 1, path: '/transcribe' });
    const seen: number[] = [];
    await env.client.transcription.create(
      { language: 'en-us', mediaFile: Buffer.concat([wavHeader(48_000), Buffer.alloc(48_000)]) },
      { onUploadProgress: (p) => seen.push(p.sentBytes) },
    );
    expect((await logged(env.emu, 'POST', '/transcribe')).map((e) => e.status)).toEqual([429, 200]);
    const restart = seen.findIndex((bytes, i) => i > 0 && bytes < seen[i - 1]!);
    expect(restart).toBeGreaterThan(0);
    expect(seen[restart - 1]).toBe(seen.at(-1));
  });
});

describe("the emulator's streaming parser", () => {
  const boundary = 'b0undary';
  const data = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 31) % 256));
  const body = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="x"\r\n\r\nhello\r\n--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="f.bin"\r\n\r\n`,
    ),
    data,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);

  it('gives the same form for any chunking, boundaries split between chunks included', () => {
    const whole = new MultipartParser(boundary);
    whole.write(body);
    const expected = whole.end();
    expect(expected.files[0]).toMatchObject({ size: 3000, sha256: createHash('sha256').update(data).digest('hex') });
    expect(expected.files[0]!.data!.equals(data)).toBe(true);
    let seed = 7;
    for (let run = 0; run < 50; run++) {
      const parser = new MultipartParser(boundary);
      for (let at = 0; at < body.length;) {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        const size = run === 0 ? 1 : 1 + (seed % 40);
        parser.write(body.subarray(at, at + size));
        at += size;
      }
      const form = parser.end();
      expect(form.fields.get('x')).toEqual(['hello']);
      expect(form.files[0]!.sha256).toBe(expected.files[0]!.sha256);
      expect(form.files[0]!.data!.equals(data)).toBe(true);
    }
  });

  it('keeps only the head of a file larger than keepBytes; refuses an over-long field and a cut body', () => {
    const small = new MultipartParser(boundary, { keepBytes: 1000, headBytes: 16 });
    small.write(body);
    const file = small.end().files[0]!;
    expect(file.data).toBeUndefined();
    expect(file.head.equals(data.subarray(0, 16))).toBe(true);
    const strict = new MultipartParser(boundary, { maxFieldBytes: 3 });
    expect(() => strict.write(body)).toThrow(MultipartError);
    const cut = new MultipartParser(boundary);
    cut.write(body.subarray(0, 200));
    expect(() => cut.end()).toThrow(/closing boundary/);
  });
});

describe('a 200 MB upload', () => {
  it('streams from disk with bounded memory; the emulator receives every byte', async () => {
    const size = 200 * 1024 * 1024;
    const path = join(dir, 'long.wav');
    await writeFile(path, wavHeader(size - 44));
    await truncate(path, size); // sparse: zeros after the header, nothing written to disk
    const expectedHash = await sha256Of(path);

    const peak = await peakMemoryDuring(async () => {
      const task = await env.client.audioSeparation.create({ mediaFile: path });
      expect(typeof task.taskId).toBe('string');
    });
    const [entry] = await logged(env.emu, 'POST', '/audio-separation');
    expect(entry!.uploads).toEqual([{ name: 'media_file', filename: 'long.wav', size, sha256: expectedHash }]);
    // Far below the file's size: neither side held it whole.
    expect(peak).toBeLessThan(64 * 1024 * 1024);
  });

  // A generated stream, not a file: its length is unknown (chunked), and it can be read once.
  const streamed = [
    {
      method: 'createCustomVoice',
      path: '/create-custom-voice',
      field: 'file',
      send: (data: Readable | Buffer) => env.client.voices.create({ file: { data, filename: 'long.wav' }, voiceName: 'Long reference', gender: 2 }),
      created: (answer: unknown) => expect((answer as { voiceId: number }).voiceId).toBeGreaterThan(0),
    },
    {
      method: 'createTranscription',
      path: '/transcribe',
      field: 'media_file',
      send: (data: Readable | Buffer) => env.client.transcription.create({ language: 'en-us', mediaFile: { data, filename: 'long.wav' } }),
      created: (answer: unknown) => expect(typeof (answer as { taskId: string }).taskId).toBe('string'),
    },
  ];

  it.each(streamed)('$method streams a generated Readable with bounded memory; the emulator receives every byte', async ({ path, field, send, created }) => {
    const size = 200 * 1024 * 1024;
    const hash = createHash('sha256');
    await control(env.emu, 'DELETE', 'requests');
    const upload = generatedWav(size, hash);
    const peak = await peakMemoryDuring(async () => created(await send(upload)));
    const entries = await logged(env.emu, 'POST', path);
    expect(entries.map((e) => e.status)).toEqual([200]);
    expect(entries[0]!.uploads).toEqual([{ name: field, filename: 'long.wav', size, sha256: hash.digest('hex') }]);
    expect(peak).toBeLessThan(64 * 1024 * 1024);
  });

  it.each(streamed)('$method: a 429 once the whole Readable was sent is not retried (its bytes cannot be sent again)', async ({ path, send, created }) => {
    const size = 200 * 1024 * 1024;
    const counted = { bytes: 0 };
    await control(env.emu, 'DELETE', 'faults');
    // The service did not act on a 429: a Buffer, which can be sent again, is.
    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { status: 429, retryAfter: 0, afterBody: true, count: 1, path });
    created(await send(Buffer.concat([wavHeader(48_000), Buffer.alloc(48_000)])));
    expect((await logged(env.emu, 'POST', path)).map((e) => e.status)).toEqual([429, 200]);

    await control(env.emu, 'DELETE', 'requests');
    await control(env.emu, 'POST', 'faults', { status: 429, retryAfter: 0, afterBody: true, count: 2, path });
    const upload = generatedWav(size, createHash('sha256'), counted);
    let error: unknown;
    const peak = await peakMemoryDuring(async () => {
      error = await send(upload).catch((e: unknown) => e);
    });
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ status: 429 });
    expect(counted.bytes).toBe(size);
    expect((await logged(env.emu, 'POST', path)).map((e) => e.status)).toEqual([429]);
    expect(peak).toBeLessThan(64 * 1024 * 1024);
    await control(env.emu, 'DELETE', 'faults');
  });
});
