/**
 * Uploads: the multipart bodies the client streams (exact bytes, lengths, names, repeated
 * fields, a file that changes while it is sent), the emulator's streaming parser (any chunking
 * gives the same form; a boundary split between chunks), and a 200 MB file uploaded from disk
 * with bounded memory on both sides.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { appendFile, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MultipartError, MultipartParser, parseMultipart } from '../lib/emulator/http/multipart.js';
import { ValidationError } from '../lib/errors.js';
import { multipartBody } from '../lib/http/multipart.js';
import { collect, logged, sharedEmulator } from './http-test-helpers.js';

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

describe('the emulator\'s streaming parser', () => {
  const boundary = 'b0undary';
  const data = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 31) % 256));
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="x"\r\n\r\nhello\r\n--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="f.bin"\r\n\r\n`),
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
      for (let at = 0; at < body.length; ) {
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

    const before = process.memoryUsage();
    let peak = 0;
    const sample = (): void => {
      const now = process.memoryUsage();
      peak = Math.max(peak, now.heapUsed + now.arrayBuffers - (before.heapUsed + before.arrayBuffers));
    };
    const sampler = setInterval(sample, 20);
    try {
      const task = await env.client.createAudioSeparation({ mediaFile: path });
      sample();
      expect(typeof task.taskId).toBe('string');
    } finally {
      clearInterval(sampler);
    }
    const [entry] = await logged(env.emu, 'POST', '/audio-separation');
    expect(entry!.uploads).toEqual([{ name: 'media_file', filename: 'long.wav', size, sha256: expectedHash }]);
    // Far below the file's size: neither side held it whole.
    expect(peak).toBeLessThan(64 * 1024 * 1024);
  });
});
