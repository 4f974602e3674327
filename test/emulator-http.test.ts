import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { MultipartError, multipartBoundary, parseMultipart } from '../lib/emulator/http/multipart.js';
import { MP3_SAMPLE_RATES, sniffAudio, wavHeader } from '../lib/emulator/http/audio.js';
import { createRateLimiter } from '../lib/emulator/http/rate-limit.js';
import { synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { KEY, OTHER_KEY, clientFor, collect, control, emulator, openNetHandles, raw, until } from './http-test-helpers.js';

const WAV = await readFile(new URL('./fixtures/speech-en-24k.wav', import.meta.url));
const FFMPEG = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;

/** Decodes `audio` with ffmpeg (independently of the library) to PCM16 LE mono at `rate`. */
function ffmpegDecode(audio: Buffer, rate: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      FFMPEG,
      ['-v', 'error', '-f', 'mp3', '-i', 'pipe:0', '-f', 's16le', '-ac', '1', '-ar', String(rate), 'pipe:1'],
      { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => (error ? reject(new Error(`ffmpeg: ${error.message} ${stderr.toString()}`)) : resolve(stdout)),
    );
    child.stdin!.end(audio);
  });
}

function rms(pcm: Buffer): number {
  let sum = 0;
  for (let i = 0; i < pcm.length; i += 2) sum += pcm.readInt16LE(i) ** 2;
  return Math.sqrt(sum / (pcm.length / 2));
}

let emu: RunningEmulator;

beforeAll(async () => {
  emu = await emulator();
});

afterAll(async () => {
  await emu.close();
});

const tts = { text: 'Hello', source_language: 'en-us', target_language: 'es-es' };

describe('auth', () => {
  it('401 {error, status} for a missing key', async () => {
    const r = await raw(emu, 'POST', '/translated-tts', { key: null, json: tts });
    expect(r.status).toBe(401);
    expect(r.json).toEqual({ error: 'Missing API key: send it in the x-api-key header.', status: 401 });
  });

  it('401 for an unknown key', async () => {
    const r = await raw(emu, 'GET', '/sub/x', { key: 'nope' });
    expect(r).toMatchObject({ status: 401, json: { error: 'Invalid API key.', status: 401 } });
  });

  it("403 {error, status} for another key's task", async () => {
    const created = await raw(emu, 'POST', '/translated-tts', { key: OTHER_KEY, json: tts });
    const r = await raw(emu, 'GET', `/translated-tts/${created.json.task_id}`);
    expect(r.status).toBe(403);
    expect(r.json).toEqual({ error: `Task ${created.json.task_id} belongs to another API key.`, status: 403 });
  });

  it('presigned files need no key', async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'tts', text: 'file', taskMs: 0 });
    const r = await raw(emu, 'GET', `/tts-result/${seeded.run_id}?output_type=file_url`);
    const file = await request(r.json.output_url);
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('audio/flac');
    await file.body.dump();
  });
});

describe('routing', () => {
  it('404 for an unknown path, 405 for a wrong method', async () => {
    expect(await raw(emu, 'GET', '/nothing-here')).toMatchObject({ status: 404, json: { status: 404 } });
    expect(await raw(emu, 'GET', '/translated-tts')).toMatchObject({ status: 405, json: { status: 405 } });
  });

  it('404 for an unknown task', async () => {
    expect(await raw(emu, 'GET', '/tts/no-such-task')).toMatchObject({ status: 404, json: { status: 404 } });
  });

  it.each(['/translated-tts/%E0%A4%A', '/tts/%', '/sub/abc%ZZ', '/audio-separation/%C3'])(
    '404 {error, status} for a task id that is not valid percent-encoding (%s)',
    async (path) => {
      const answer = await raw(emu, 'GET', path);
      expect(answer.status).toBe(404);
      expect(Object.keys(answer.json).sort()).toEqual(['error', 'status']);
      expect(answer.json.status).toBe(404);
      expect(answer.json.error).toContain('not valid percent-encoding');
    },
  );
});

describe('422 detail', () => {
  it('lists every issue as {loc, msg, type}', async () => {
    const r = await raw(emu, 'POST', '/translated-tts', { json: { text: 'x', source_language: 'en-us', project_name: 'ab', formality: 3 } });
    expect(r.status).toBe(422);
    expect(r.json).toEqual({
      detail: [
        { loc: ['body', 'target_language'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'project_name'], msg: 'String should have at least 3 characters', type: 'string_too_short' },
        { loc: ['body', 'formality'], msg: 'Input should be 1 or 2', type: 'literal_error' },
      ],
    });
  });

  it.each([
    ['a relative media_url', { media_url: '/a.mp4' }, ['body', 'media_url'], 'url_parsing'],
    ['an ftp media_url', { media_url: 'ftp://h/a.mp4' }, ['body', 'media_url'], 'url_scheme'],
    ['folder_id 0', { folder_id: 0 }, ['body', 'folder_id'], 'greater_than_equal'],
    ['three audio tracks', { selected_audio_tracks: [0, 1, 2] }, ['body', 'selected_audio_tracks'], 'too_long'],
    ['no dictionaries', { chosen_dictionaries: [] }, ['body', 'chosen_dictionaries'], 'too_short'],
    ['language id 0', { source_language: 0 }, ['body', 'source_language'], 'value_error'],
  ])('project-setup with %s', async (_name, change, loc, type) => {
    const body = { media_url: 'https://example.com/v.mp4', source_language: 'en-us', target_languages: ['es-es'], ...change };
    const r = await raw(emu, 'POST', '/project-setup', { json: body });
    expect(r.status).toBe(422);
    expect(r.json.detail).toHaveLength(1);
    expect(r.json.detail[0]).toMatchObject({ loc, type });
    expect(typeof r.json.detail[0].msg).toBe('string');
  });

  it('language ids and tags of its lists are accepted; others answer 422 as the service does', async () => {
    const ok = await raw(emu, 'POST', '/project-setup', { json: { media_url: 'https://e.com/v', source_language: 1, target_languages: [54, 'fr-fr'] } });
    expect(ok.status).toBe(200);
    expect(typeof ok.json.task_id).toBe('string');
    const unknown = await raw(emu, 'POST', '/project-setup', {
      json: { media_url: 'https://e.com/v', source_language: 987_654, target_languages: ['es-es', 'xx-yy'] },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.json.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual([
      ['body', 'source_language'],
      ['body', 'target_languages', 1],
    ]);
    expect(unknown.json.detail[1].msg).toContain('"xx-yy"');
  });

  it('duplicate run ids', async () => {
    const r = await raw(emu, 'POST', '/audio-separation-results', { json: { run_ids: [5, 5] } });
    expect(r.json.detail[0]).toMatchObject({ loc: ['body', 'run_ids', 1], type: 'value_error' });
  });

  it('malformed JSON, a bad path parameter, a bad query parameter', async () => {
    const json = await raw(emu, 'POST', '/tts', { body: '{"text": ', headers: { 'content-type': 'application/json' } });
    expect(json.json.detail[0]).toMatchObject({ msg: 'JSON decode error', type: 'json_invalid' });
    const path = await raw(emu, 'GET', '/tts-result/abc');
    expect(path.json).toEqual({
      detail: [{ loc: ['path', 'run_id'], msg: 'Input should be a valid integer, unable to parse string as an integer', type: 'int_parsing' }],
    });
    const query = await raw(emu, 'GET', '/tts-result/1?output_type=zip');
    expect(query.json.detail[0]).toMatchObject({ loc: ['query', 'output_type'], type: 'enum' });
  });

  it('tts-stream: adts is not supported by the emulator (no AAC encoder)', async () => {
    const r = await raw(emu, 'POST', '/tts-stream', { json: { text: 'hello', language: 'en-us', voice_id: 20_299, output_configuration: { format: 'adts' } } });
    expect(r.status).toBe(422);
    expect(r.json.detail).toEqual([
      {
        loc: ['body', 'output_configuration', 'format'],
        msg: expect.stringContaining('adts is not supported by the emulator'),
        type: 'value_error',
      },
    ]);
  });

  it('tts-stream: mp3 at a sample rate MP3 cannot carry', async () => {
    const r = await raw(emu, 'POST', '/tts-stream', {
      json: { text: 'hello', language: 'en-us', voice_id: 20_299, output_configuration: { format: 'mp3', sample_rate: 96_000 } },
    });
    expect(r.status).toBe(422);
    expect(r.json.detail[0]).toMatchObject({ loc: ['body', 'output_configuration', 'sample_rate'], type: 'value_error' });
  });
});

describe('tts-stream', () => {
  it('streams wav progressively in several chunks with X-Credits-Required', async () => {
    const slow = await emulator({ ttsStreamDelayMs: 5, ttsStreamChunkMs: 100 });
    try {
      const response = await request(`${slow.baseUrl}/tts-stream`, {
        method: 'POST',
        headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'Progressive speech here.', language: 'en-us', voice_id: 20_299, output_configuration: { format: 'wav' } }),
      });
      expect(response.statusCode).toBe(200);
      expect(response.headers['x-credits-required']).toBe('24');
      expect(response.headers['content-type']).toBe('audio/wav');
      expect(response.headers['content-length']).toBeUndefined();
      const chunks: Buffer[] = [];
      for await (const chunk of response.body) chunks.push(chunk as Buffer);
      const pcm = synthesizeSpeechPcm('Progressive speech here.', { sampleRate: 24_000 });
      expect(Buffer.concat(chunks).equals(Buffer.concat([wavHeader(pcm.length, 24_000, 1, 16), pcm]))).toBe(true);
      expect(chunks.length).toBeGreaterThan(3);
    } finally {
      await slow.close();
    }
  });
});

describe('tts-stream mp3 (the service default)', () => {
  const text = 'The emulator speaks MP3 now, progressively.';

  it.each([
    ['no output_configuration (the default)', undefined, 24_000],
    ['format mp3 at 16000 Hz', { format: 'mp3', sample_rate: 16_000 }, 16_000],
    ['format mp3 at 44100 Hz', { format: 'mp3', sample_rate: 44_100 }, 44_100],
  ])('%s: audio/mpeg in several pieces that ffmpeg decodes to the synthesized duration', async (_name, output_configuration, rate) => {
    const slow = await emulator({ ttsStreamDelayMs: 2, ttsStreamChunkMs: 100 });
    try {
      const response = await request(`${slow.baseUrl}/tts-stream`, {
        method: 'POST',
        headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ text, language: 'en-us', voice_id: 20_299, output_configuration }),
      });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('audio/mpeg');
      expect(response.headers['x-credits-required']).toBe(String(text.length));
      const chunks: Buffer[] = [];
      for await (const chunk of response.body) chunks.push(chunk as Buffer);
      const mp3 = Buffer.concat(chunks);
      expect(chunks.length).toBeGreaterThan(3);
      expect(sniffAudio(mp3)).toBe('mp3');
      const expected = synthesizeSpeechPcm(text, { sampleRate: rate });
      const decoded = await ffmpegDecode(mp3, rate);
      const samples = decoded.length / 2;
      const expectedSamples = expected.length / 2;
      // A layer III stream holds the encoder's delay and the padding of its last frame: at most
      // three frames (1152 samples each at 32 kHz and above, 576 below) more than the input.
      const frame = rate >= 32_000 ? 1152 : 576;
      expect(samples).toBeGreaterThanOrEqual(expectedSamples);
      expect(samples).toBeLessThanOrEqual(expectedSamples + 3 * frame);
      // Speech, not silence: the level of the decoded audio is that of the synthesized one (within 3 dB).
      const ratio = rms(decoded) / rms(expected);
      expect(ratio).toBeGreaterThan(0.7);
      expect(ratio).toBeLessThan(1.4);
    } finally {
      await slow.close();
    }
  });

  it('offers every sample rate MP3 carries', () => {
    expect(MP3_SAMPLE_RATES).toEqual([8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000]);
  });

  it('loading the encoder installs no process-wide handlers', async () => {
    const events = ['uncaughtException', 'unhandledRejection', 'exit', 'beforeExit', 'SIGINT', 'SIGTERM', 'warning'] as const;
    const before = events.map((e) => process.listenerCount(e));
    const r = await raw(emu, 'POST', '/tts-stream', { json: { text: 'one more time', language: 'en-us', voice_id: 20_299 } });
    expect(r.status).toBe(200);
    expect(events.map((e) => process.listenerCount(e))).toEqual(before);
  });
});

describe('audio separation upload', () => {
  it('accepts a multipart upload of audio and creates a task', async () => {
    const form = new FormData();
    form.append('note', 'not a file');
    form.append('media_file', new Blob([WAV], { type: 'audio/wav' }), 'speech.wav');
    const response = await request(`${emu.baseUrl}/audio-separation`, { method: 'POST', headers: { 'x-api-key': KEY }, body: form });
    const body = (await response.body.json()) as { task_id: string };
    expect(response.statusCode).toBe(200);
    const status = await raw(emu, 'GET', `/audio-separation/${body.task_id}`);
    expect(status.json).toEqual({ status: 'PENDING', run_id: null });
  });

  it('413 for an upload over maxUploadBytes', async () => {
    const small = await emulator({ maxUploadBytes: 1000 });
    try {
      const form = new FormData();
      form.append('media_file', new Blob([WAV]), 'speech.wav');
      const response = await request(`${small.baseUrl}/audio-separation`, { method: 'POST', headers: { 'x-api-key': KEY }, body: form }).catch(
        (e: unknown) => e,
      );
      // The emulator answers 413 and closes; the client may see the answer or the closed socket.
      if (response instanceof Error) {
        expect((response as Error & { code?: string }).code).toMatch(/UND_ERR_SOCKET|ECONNRESET|EPIPE/);
      } else {
        expect((response as { statusCode: number }).statusCode).toBe(413);
        await (response as { body: { dump(): Promise<void> } }).body.dump();
      }
    } finally {
      await small.close();
    }
  });

  it('422 without multipart, or without a file part', async () => {
    expect((await raw(emu, 'POST', '/audio-separation', { json: { a: 1 } })).json.detail[0].loc).toEqual(['body', 'media_file']);
    const form = new FormData();
    form.append('name', 'value');
    const response = await request(`${emu.baseUrl}/audio-separation`, { method: 'POST', headers: { 'x-api-key': KEY }, body: form });
    expect(response.statusCode).toBe(422);
    expect(((await response.body.json()) as { detail: Array<{ type: string }> }).detail[0]!.type).toBe('missing');
  });
});

describe('multipart parser', () => {
  const body = (parts: string[], boundary = 'XyZ'): Buffer =>
    Buffer.from(`preamble\r\n${parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('')}--${boundary}--\r\n`, 'utf8');

  it('reads names, file names (also filename*), types and data', () => {
    const parts = parseMultipart(
      body([
        'Content-Disposition: form-data; name="a"\r\n\r\nvalue one',
        'Content-Disposition: form-data; name="f"; filename="x.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--not-a-boundary',
        'Content-Disposition: form-data; name="g"; filename*=UTF-8\'\'caf%C3%A9.flac\r\n\r\n',
      ]),
      'XyZ',
    );
    expect(parts.map((p) => [p.name, p.filename, p.contentType, p.data.toString()])).toEqual([
      ['a', undefined, undefined, 'value one'],
      ['f', 'x.wav', 'audio/wav', 'RIFF\r\n--not-a-boundary'],
      ['g', 'café.flac', undefined, ''],
    ]);
  });

  it('finds the boundary in a content type, quoted or not', () => {
    expect(multipartBoundary('multipart/form-data; boundary=abc')).toBe('abc');
    expect(multipartBoundary('multipart/form-data; charset=utf-8; boundary="a b"')).toBe('a b');
    expect(multipartBoundary('application/json')).toBeUndefined();
  });

  it('refuses malformed bodies', () => {
    expect(() => parseMultipart(Buffer.from('nothing'), 'XyZ')).toThrow(MultipartError);
    expect(() => parseMultipart(Buffer.from('--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nno end'), 'XyZ')).toThrow(/closing boundary/);
    expect(() => parseMultipart(body(['Content-Type: text/plain\r\n\r\nx']), 'XyZ')).toThrow(/Content-Disposition/);
  });

  it('sniffs audio by content', () => {
    expect(sniffAudio(WAV)).toBe('wav');
    expect(sniffAudio(Buffer.from('fLaC\0\0\0\x22'))).toBe('flac');
    expect(sniffAudio(Buffer.from('ID3\x04'))).toBe('mp3');
    expect(sniffAudio(Buffer.from([0xff, 0xf1, 0x50, 0x80]))).toBe('aac');
    expect(sniffAudio(Buffer.from([0xff, 0xfb, 0x90, 0x00]))).toBe('mp3');
    expect(sniffAudio(Buffer.from('hello'))).toBeUndefined();
  });
});

describe('rate limiting', () => {
  it('a token bucket per key refills at the configured rate', () => {
    let now = 0;
    const limiter = createRateLimiter(2, () => now);
    expect([limiter.take('a').allowed, limiter.take('a').allowed, limiter.take('a').allowed]).toEqual([true, true, false]);
    expect(limiter.take('b').allowed).toBe(true);
    expect(limiter.take('a').retryAfterS).toBe(1);
    now += 500;
    expect(limiter.take('a').allowed).toBe(true);
    expect(limiter.take('a').allowed).toBe(false);
  });

  it('a rate below 1 a second lets one request through, then one every 1/rate seconds (0.5/s: every 2 s)', () => {
    let now = 0;
    const limiter = createRateLimiter(0.5, () => now);
    const seen: Array<[number, boolean, number]> = [];
    for (let i = 0; i <= 8; i++) {
      const decision = limiter.take('k');
      seen.push([now / 1000, decision.allowed, decision.retryAfterS]);
      now += 500;
    }
    expect(seen).toEqual([
      [0, true, 0],
      [0.5, false, 2],
      [1, false, 1],
      [1.5, false, 1],
      [2, true, 0],
      [2.5, false, 2],
      [3, false, 1],
      [3.5, false, 1],
      [4, true, 0],
    ]);
  });

  it('a first request at a rate below 1 is answered, not refused', async () => {
    let now = 5_000_000;
    const limited = await emulator({ rateLimit: 0.5, clock: () => now });
    try {
      expect((await raw(limited, 'POST', '/translated-tts', { json: tts })).status).toBe(200);
      const refused = await raw(limited, 'POST', '/translated-tts', { json: tts });
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('2');
      now += 2000;
      expect((await raw(limited, 'POST', '/translated-tts', { json: tts })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('answers 429 {error, status} with Retry-After past the limit', async () => {
    let now = 1_000_000;
    const limited = await emulator({ rateLimit: 1, clock: () => now });
    try {
      expect((await raw(limited, 'POST', '/translated-tts', { json: tts })).status).toBe(200);
      const refused = await raw(limited, 'POST', '/translated-tts', { json: tts });
      expect(refused.status).toBe(429);
      expect(refused.json).toEqual({ error: 'Rate limit exceeded.', status: 429 });
      expect(refused.headers['retry-after']).toBe('1');
      now += 1000;
      expect((await raw(limited, 'POST', '/translated-tts', { json: tts })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('control endpoint', () => {
  it('refuses a malformed fault with 400 and lists armed ones', async () => {
    const bad = await request(`${emu.baseUrl}/_emulator/faults`, { method: 'POST', body: JSON.stringify({ status: 99 }) });
    expect(bad.statusCode).toBe(400);
    expect(((await bad.body.json()) as { error: string }).error).toContain('status must be an integer 100..599');
    await control(emu, 'POST', 'faults', { status: 500, count: 3, method: 'DELETE' });
    expect((await control(emu, 'GET', 'faults')).faults).toEqual([{ status: 500, count: 3, method: 'DELETE' }]);
    // The method filter leaves other requests alone.
    expect((await raw(emu, 'GET', '/sub/x')).status).toBe(404);
    expect((await raw(emu, 'DELETE', '/delete-voice/1')).status).toBe(500);
    expect((await control(emu, 'GET', 'faults')).faults[0].count).toBe(2);
    await control(emu, 'DELETE', 'faults');
    expect((await control(emu, 'GET', 'faults')).faults).toEqual([]);
  });

  it('a status fault with afterBody answers once the whole request body was read', async () => {
    await control(emu, 'POST', 'faults', { status: 503, retryAfter: 2, afterBody: true, path: '/translate' });
    // 32 MB of spaces: far more than socket buffers hold, so an early answer would come mid-body.
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const upload = Readable.from(
      (async function* () {
        for (let i = 0; i < 512; i++) {
          sent += chunk.length;
          yield chunk;
        }
      })(),
    );
    const answer = await request(`${emu.baseUrl}/translate`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: upload,
    });
    const sentWhenAnswered = sent;
    expect(answer.statusCode).toBe(503);
    expect(answer.headers['retry-after']).toBe('2');
    await answer.body.dump();
    expect(sentWhenAnswered).toBe(512 * chunk.length);
    const bad = await request(`${emu.baseUrl}/_emulator/faults`, { method: 'POST', body: JSON.stringify({ afterBody: true, dropAfterBytes: 10 }) });
    expect(bad.statusCode).toBe(400);
    expect(((await bad.body.json()) as { error: string }).error).toContain('afterBody must be a boolean, with status');
  });

  it('passes file-store fault switches through', async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'tts', text: 'ranges', taskMs: 0 });
    const url = (await raw(emu, 'GET', `/tts-result/${seeded.run_id}?output_type=file_url`)).json.output_url as string;
    await control(emu, 'POST', 'file-faults', { ignoreRange: true });
    const whole = await request(url, { headers: { range: 'bytes=10-' } });
    expect(whole.statusCode).toBe(200);
    expect(whole.headers['accept-ranges']).toBe('none');
    await whole.body.dump();
    await control(emu, 'POST', 'file-faults', {});
    const part = await request(url, { headers: { range: 'bytes=10-' } });
    expect(part.statusCode).toBe(206);
    await part.body.dump();
  });

  it('a task can be seeded with any status', async () => {
    const seeded = await control(emu, 'POST', 'tasks', { kind: 'sub', status: 'PAYMENT_REQUIRED', taskMs: 0 });
    expect((await raw(emu, 'GET', `/sub/${seeded.task_id}`)).json).toEqual({ status: 'PAYMENT_REQUIRED', run_id: null });
  });
});

const VERSION = (JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('the emulator says it answers', () => {
  it('its version on every answer: 200, 401, 404, 422, a presigned file, a control endpoint; a PENDING status says when it will be final', async () => {
    const created = await raw(emu, 'POST', '/translated-tts', { json: tts });
    const pending = await raw(emu, 'GET', `/translated-tts/${created.json.task_id}`);
    const done = await raw(emu, 'GET', `/translated-tts/${created.json.task_id}`);
    const file = await raw(emu, 'GET', `/tts-result/${done.json.run_id}?output_type=file_url`);
    const answers = [
      created,
      pending,
      done,
      await raw(emu, 'GET', '/list-voices', { key: null }),
      await raw(emu, 'GET', '/no-such-endpoint'),
      await raw(emu, 'POST', '/translated-tts', { json: { text: 'Hello' } }),
      await raw(emu, 'GET', new URL(file.json.audio_url as string).pathname + new URL(file.json.audio_url as string).search),
      await raw(emu, 'GET', '/_emulator/requests', { key: null }),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 401, 404, 422, 200, 200]);
    for (const answer of answers) expect(answer.headers['x-rt-translate-emulator']).toBe(VERSION);
    // This emulator's tasks are held by status reads, not by time: the next read may end it.
    expect(pending.json.status).toBe('PENDING');
    expect(pending.headers['x-rt-translate-emulator-ready-in-ms']).toBe('0');
    expect(done.json.status).toBe('SUCCESS');
    expect(done.headers['x-rt-translate-emulator-ready-in-ms']).toBeUndefined();
  });

  it('the time left of a PENDING task, by its clock', async () => {
    let now = 5_000_000;
    const timed = await emulator({ taskMs: 2000, taskPolls: 0, clock: () => now });
    try {
      const created = await raw(timed, 'POST', '/dub', {
        json: { video_url: 'https://example.com/a.mp4', source_language: 'en-us', target_language: 'es-es' },
      });
      now += 1500;
      const status = await raw(timed, 'GET', `/dub/${created.json.task_id}`);
      expect(status.json.status).toBe('PENDING');
      expect(status.headers['x-rt-translate-emulator-ready-in-ms']).toBe('500');
    } finally {
      await timed.close();
    }
  });

  it('announce: false answers as the service does, with neither header', async () => {
    const quiet = await emulator({ announce: false });
    try {
      const created = await raw(quiet, 'POST', '/translated-tts', { json: tts });
      const pending = await raw(quiet, 'GET', `/translated-tts/${created.json.task_id}`);
      expect(pending.json.status).toBe('PENDING');
      for (const answer of [created, pending, await raw(quiet, 'GET', '/nowhere')]) {
        expect(answer.headers['x-rt-translate-emulator']).toBeUndefined();
        expect(answer.headers['x-rt-translate-emulator-ready-in-ms']).toBeUndefined();
      }
    } finally {
      await quiet.close();
    }
  });
});

describe('cleanup', () => {
  it('leaves no socket or server open after clients and emulators close', async () => {
    const before = openNetHandles().length;
    const mine = await emulator({ ttsStreamDelayMs: 2 });
    const client = clientFor(mine);
    const result = await client.translatedTts.run({ text: tts.text, sourceLanguage: tts.source_language, targetLanguage: tts.target_language });
    await collect(result.audio);
    const stream = client.ttsStream({ text: 'A stream that is cut off early. '.repeat(20), language: 'en-us', outputConfiguration: { format: 'pcm_s16le' } });
    await new Promise((resolve) => stream.once('data', resolve));
    stream.destroy();
    await new Promise((resolve) => stream.once('close', resolve));
    await client.close();
    await mine.close();
    // Closed handles are released within a few turns of the event loop.
    await until(() => openNetHandles().length <= before, 2000).catch(() => undefined);
    expect(openNetHandles().length).toBeLessThanOrEqual(before);
  });
});
