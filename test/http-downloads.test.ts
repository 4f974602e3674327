/**
 * Result audio through the client as resumable `FlacDownloadStream`s, against the emulator over
 * loopback: `/tts-result` raw bytes (getTtsResultAudio, translateAndSpeak) resumed after a cut
 * connection, separated tracks resumed with Range and refreshed when their presigned URL
 * expired, the key kept out of inspection, and the retry rule of `DELETE /delete-voice`.
 */
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient } from '../lib/http/client.js';
import { separateTracks, synthesizeFlac, synthesizeSpeechPcm } from '../lib/emulator/synth.js';
import { ConfigError, ConnectionError, ValidationError } from '../lib/errors.js';
import { HttpConnectionError, HttpForbiddenError, HttpStatusError } from '../lib/http/errors.js';
import { FlacDownloadStream } from '../lib/http/flac-download-stream.js';
import { isRetryable } from '../lib/http/retry.js';
import { KEY, OTHER_KEY, clientFor, collect, control, emulator, logged, openNetHandles, retries, until } from './http-test-helpers.js';

const RATE = 24_000;

let emu: RunningEmulator;
let client: LocalizationClient;

beforeAll(async () => {
  emu = await emulator({ clonedVoices: { [KEY]: [7001, 7002, 7003] } });
  client = clientFor(emu);
});

afterAll(async () => {
  await client.close();
  await emu.close();
});

/** A finished TTS run whose audio is `text` spoken, seeded without polling. */
async function seededRun(text: string, apiKey = KEY): Promise<number> {
  const seeded = (await control(emu, 'POST', 'tasks', { kind: 'tts', text, taskMs: 0, apiKey })) as { run_id: number };
  return seeded.run_id;
}

describe('getTtsResultAudio: a resumable FlacDownloadStream', () => {
  it('delivers exactly the synthesized FLAC after the connection is cut mid-body', async () => {
    const text = 'A result long enough to be cut in the middle of its body.';
    const runId = await seededRun(text);
    await control(emu, 'DELETE', 'requests');
    await control(emu, 'POST', 'faults', { dropAfterBytes: 1000, path: '/tts-result/' });
    const result = await client.textToSpeech.result(runId);
    expect(result.audio).toBeInstanceOf(FlacDownloadStream);
    const seen = retries(result.audio);
    const bytes = await collect(result.audio);
    const expected = synthesizeFlac(text, { sampleRate: RATE });
    expect(bytes.length).toBe(expected.length);
    expect(bytes.equals(expected)).toBe(true);
    expect(result).toMatchObject({ contentType: 'audio/flac', contentLength: expected.length });
    expect(seen.map((r) => [r.reason, r.offset])).toEqual([['interrupted', 1000]]);
    // The cut request (no status) and the one that finished the download.
    expect((await logged(emu, 'GET', '/tts-result/')).map((r) => r.status)).toEqual([0, 200]);
  });

  it('with decode, two cuts still give exactly the synthesized PCM (MD5 checked)', async () => {
    const text = 'Decoded while downloading, through two broken connections.';
    const runId = await seededRun(text);
    await control(emu, 'POST', 'faults', [
      { dropAfterBytes: 700, path: '/tts-result/' },
      { dropAfterBytes: 3000, path: '/tts-result/' },
    ]);
    const result = await client.textToSpeech.result(runId, { decode: true });
    const seen = retries(result.audio);
    const pcm = await collect(result.audio);
    const expected = synthesizeSpeechPcm(text, { sampleRate: RATE });
    expect(pcm.length).toBe(expected.length);
    expect(pcm.equals(expected)).toBe(true);
    expect(result.contentType).toBe(`audio/pcm;encoding=s16le;rate=${RATE};channels=1`);
    expect(result.contentLength).toBe(expected.length);
    expect(seen.map((r) => r.offset)).toEqual([700, 3000]);
  });

  it('translateAndSpeak returns the text and audio that survives a cut', async () => {
    await control(emu, 'POST', 'faults', { dropAfterBytes: 2048, path: '/tts-result/' });
    const result = await client.translatedTts.run({ text: 'Good evening, everyone.', sourceLanguage: 'en-us', targetLanguage: 'de-de' });
    expect(result.translatedText).toBe('[de-de] Good evening, everyone.');
    expect(result.audio).toBeInstanceOf(FlacDownloadStream);
    const seen = retries(result.audio);
    const bytes = await collect(result.audio);
    expect(bytes.equals(synthesizeFlac('[de-de] Good evening, everyone.', { sampleRate: RATE }))).toBe(true);
    expect(seen.map((r) => r.offset)).toEqual([2048]);
  });

  it('a run without a result rejects with the typed status error before any audio', async () => {
    const pending = (await control(emu, 'POST', 'tasks', { kind: 'tts', text: 'later', taskMs: 60_000 })) as { run_id: number };
    const missing = await client.textToSpeech.result(pending.run_id).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(HttpStatusError);
    expect(missing).toMatchObject({ status: 404, code: 'RTT_HTTP', method: 'GET', path: `/tts-result/${pending.run_id}` });
    const foreign = await client.textToSpeech.result(await seededRun('not yours', OTHER_KEY)).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(HttpForbiddenError);
    expect(foreign).toMatchObject({ status: 403, code: 'RTT_FORBIDDEN' });
  });

  it('retry: false downloads once: a cut ends the stream with ConnectionError after the bytes received', async () => {
    const runId = await seededRun('This one is not resumed because retries are off.');
    await control(emu, 'POST', 'faults', { dropAfterBytes: 500, path: '/tts-result/' });
    const result = await client.textToSpeech.result(runId, { retry: false });
    const received: Buffer[] = [];
    result.audio.on('data', (chunk: Buffer) => received.push(chunk));
    const error = await new Promise<unknown>((resolve) => result.audio.once('error', resolve));
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ code: 'RTT_CONNECTION' });
    expect(Buffer.concat(received).length).toBeLessThanOrEqual(500);
    expect(Buffer.concat(received).subarray(0, 4).toString('latin1')).toBe('fLaC');
  });

  it('never shows the API key when the download is inspected or serialized', async () => {
    const result = await client.textToSpeech.result(await seededRun('Inspect me, please.'));
    try {
      expect(inspect(result.audio, { depth: 5, showHidden: true })).not.toContain(KEY);
      expect(inspect(result, { depth: 5 })).not.toContain(KEY);
      expect(JSON.stringify(result.audio)).not.toContain(KEY);
      expect(inspect(result.audio)).toMatch(/^FlacDownloadStream \{/);
    } finally {
      result.audio.destroy();
    }
  });

  it('fails in the middle of a download with the same typed classes as before the first byte', async () => {
    const text = 'A result that first breaks off and then meets a server error on the way.';
    const runId = await seededRun(text);
    await control(emu, 'POST', 'faults', [
      { dropAfterBytes: 3000, path: '/tts-result/' },
      { status: 500, count: 2, path: '/tts-result/' },
    ]);
    const result = await client.textToSpeech.result(runId);
    const error = await collect(result.audio).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpStatusError);
    expect(error).toMatchObject({ status: 500, code: 'RTT_HTTP', retryable: true, method: 'GET', path: `/tts-result/${runId}` });
    expect(result.audio.bytesReceived).toBe(3000);
    expect((error as Error).message).not.toContain(KEY);
  });

  it('a 403 from /tts-result in the middle of a download is HttpForbiddenError about permission, not about refreshUrl', async () => {
    const runId = await seededRun('Permission withdrawn halfway through this download.');
    await control(emu, 'POST', 'faults', [
      { dropAfterBytes: 2000, path: '/tts-result/' },
      { status: 403, path: '/tts-result/' },
    ]);
    const result = await client.textToSpeech.result(runId);
    const seen = retries(result.audio);
    const error = await collect(result.audio).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpForbiddenError);
    expect((error as Error).message).toContain('the API key has no permission for this resource');
    expect((error as Error).message).not.toMatch(/refreshUrl/);
    expect(seen.map((r) => r.reason)).toEqual(['interrupted']);
  });

  it('openFlacDownload refuses to send the key to another origin', () => {
    expect(() => client.openFlacDownload({ url: 'https://storage.example.com/x.flac', authenticate: true })).toThrow(ConfigError);
    const stream = client.openFlacDownload({ url: 'https://storage.example.com/x.flac' });
    expect(stream).toBeInstanceOf(FlacDownloadStream);
    stream.destroy();
  });
});

describe('openSeparationTrack', () => {
  let now = 1_700_000_000_000;
  let timed: RunningEmulator;
  let timedClient: LocalizationClient;

  beforeAll(async () => {
    timed = await emulator({ urlTtlS: 5, clock: () => now });
    timedClient = clientFor(timed);
  });

  afterAll(async () => {
    await timedClient.close();
    await timed.close();
  });

  async function seededSeparation(): Promise<{ runId: number; tracks: ReturnType<typeof separateTracks> }> {
    const seeded = (await control(timed, 'POST', 'tasks', { kind: 'audio-separation', apiKey: KEY, taskMs: 0 })) as { task_id: string; run_id: number };
    return { runId: seeded.run_id, tracks: separateTracks(seeded.task_id, { sampleRate: RATE }) };
  }

  it('resumes both tracks with Range after cut connections', async () => {
    const [a, b] = [await seededSeparation(), await seededSeparation()];
    const batch = [a.runId, b.runId];
    // Each of the next two responses is cut 900 bytes after the start of what it serves.
    await control(timed, 'POST', 'file-faults', { dropAfterBytes: 900, count: 2 });
    const foreground = await timedClient.audioSeparation.openTrack(batch, a.runId, 'foreground');
    const fgRetries = retries(foreground);
    expect((await collect(foreground)).equals(a.tracks.foreground)).toBe(true);
    // The second request asked for the rest (Range), so its cut came 900 bytes further on.
    expect(fgRetries.map((r) => [r.reason, r.offset])).toEqual([
      ['interrupted', 900],
      ['interrupted', 1800],
    ]);
    await control(timed, 'POST', 'file-faults', { dropAfterBytes: 900, count: 1 });
    const background = await timedClient.audioSeparation.openTrack(batch, b.runId, 'background');
    const bgRetries = retries(background);
    expect((await collect(background)).equals(b.tracks.background)).toBe(true);
    expect(bgRetries.map((r) => [r.reason, r.offset])).toEqual([['interrupted', 900]]);
  });

  it('refreshes an expired URL by looking the runs up again', async () => {
    const [a, b] = [await seededSeparation(), await seededSeparation()];
    const batch = [b.runId, a.runId];
    const url = (await timedClient.audioSeparation.getResults(batch)).get(a.runId)!.backgroundAudioUrl!;
    now += 6_000;
    await control(timed, 'DELETE', 'requests');
    const track = await timedClient.audioSeparation.openTrack(batch, a.runId, 'background', { url });
    expect((await collect(track)).equals(a.tracks.background)).toBe(true);
    const files = await logged(timed, 'GET', '/_files/');
    expect(files.map((r) => r.status)).toEqual([403, 200]);
    expect(await logged(timed, 'POST', '/audio-separation-results')).toHaveLength(1);
  });

  it('a run on its own ([runId]) is looked up again through GET /audio-separation-result/{run_id} when its URL expired', async () => {
    const a = await seededSeparation();
    const url = (await timedClient.audioSeparation.result(a.runId)).foregroundAudioUrl!;
    now += 6_000;
    await control(timed, 'DELETE', 'requests');
    const track = await timedClient.audioSeparation.openTrack([a.runId], a.runId, 'foreground', { url });
    expect((await collect(track)).equals(a.tracks.foreground)).toBe(true);
    expect((await logged(timed, 'GET', '/_files/')).map((r) => r.status)).toEqual([403, 200]);
    expect(await logged(timed, 'GET', `/audio-separation-result/${a.runId}`)).toHaveLength(1);
    expect(await logged(timed, 'POST', '/audio-separation-results')).toEqual([]);
  });

  it('an URL that expires mid-download is refreshed and the download goes on from where it stopped', async () => {
    const [a, b] = [await seededSeparation(), await seededSeparation()];
    await control(timed, 'POST', 'file-faults', { dropAfterBytes: 1200, count: 1 });
    const track = await timedClient.audioSeparation.openTrack([a.runId, b.runId], a.runId, 'foreground');
    // The first request is under way with a fresh URL; it lapses before the second one.
    now += 6_000;
    const seen = retries(track);
    expect((await collect(track)).equals(a.tracks.foreground)).toBe(true);
    expect(seen.map((r) => [r.reason, r.offset])).toEqual([
      ['interrupted', 1200],
      ['expired', 1200],
    ]);
  });

  it("getTtsResultAudio with outputType 'file_url': an URL that expires mid-download is replaced by asking file_url again", async () => {
    const text = 'Fetched through its presigned URL, which lapses halfway.';
    const seeded = (await control(timed, 'POST', 'tasks', { kind: 'tts', text, taskMs: 0, apiKey: KEY })) as { run_id: number };
    await control(timed, 'DELETE', 'requests');
    await control(timed, 'POST', 'file-faults', { dropAfterBytes: 1200, count: 1 });
    const result = await timedClient.textToSpeech.result(seeded.run_id, { outputType: 'file_url' });
    now += 6_000;
    const seen = retries(result.audio);
    expect((await collect(result.audio)).equals(synthesizeFlac(text, { sampleRate: RATE }))).toBe(true);
    expect(result.contentType).toBe('audio/flac');
    expect(seen.map((r) => [r.reason, r.offset])).toEqual([
      ['interrupted', 1200],
      ['expired', 1200],
    ]);
    // Two file_url lookups (the first URL, then a fresh one); the file itself: cut, expired, the rest.
    expect(await logged(timed, 'GET', '/tts-result/')).toHaveLength(2);
    expect((await logged(timed, 'GET', '/_files/')).map((r) => r.status)).toEqual([0, 403, 206]);
  });

  it('checks its arguments before any request', async () => {
    await expect(timedClient.audioSeparation.openTrack([5, 6], 7, 'foreground')).rejects.toMatchObject({ field: 'runIds' });
    await expect(timedClient.audioSeparation.openTrack([], 5, 'foreground')).rejects.toMatchObject({ field: 'runIds' });
    await expect(timedClient.audioSeparation.openTrack([6], 5, 'foreground')).rejects.toBeInstanceOf(ValidationError);
    await expect(timedClient.audioSeparation.openTrack([5, 6], 5, 'middle' as 'foreground')).rejects.toMatchObject({ field: 'track' });
  });

  it('a run without tracks is reported with its status and error', async () => {
    const [a] = [await seededSeparation()];
    const failed = (await control(timed, 'POST', 'tasks', {
      kind: 'audio-separation',
      apiKey: KEY,
      taskMs: 0,
      status: 'ERROR',
      message: 'unreadable audio',
    })) as { run_id: number };
    const error = await timedClient.audioSeparation.openTrack([a.runId, failed.run_id], failed.run_id, 'foreground').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RTT_PROTOCOL' });
    expect((error as Error).message).toContain(`run ${failed.run_id} has no foreground track (status ERROR: unreadable audio)`);
  });
});

describe('DELETE /delete-voice is retried only where the service surely did not act', () => {
  it('isRetryable treats a deletion like a creation', () => {
    const cut = new HttpConnectionError('exchange', 'UND_ERR_SOCKET', 'other side closed', { method: 'DELETE', path: '/delete-voice/1' });
    const refused = new HttpConnectionError('connect', 'ECONNREFUSED', 'refused', { method: 'DELETE', path: '/delete-voice/1' });
    expect([isRetryable(cut, 'read'), isRetryable(cut, 'delete'), isRetryable(cut, 'create')]).toEqual([true, false, false]);
    expect(isRetryable(refused, 'delete')).toBe(true);
    expect(isRetryable(new HttpStatusError(502, { method: 'DELETE', path: '/delete-voice/1' }), 'delete')).toBe(false);
  });

  it('an answer lost after the voice was deleted is not repeated (a repeat would be refused with 403)', async () => {
    await control(emu, 'DELETE', 'requests');
    await control(emu, 'POST', 'faults', { dropAfterBytes: 0, path: '/delete-voice/7001' });
    const error = await client.voices.delete(7001).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpConnectionError);
    expect(error).toMatchObject({ phase: 'exchange', code: 'RTT_CONNECTION' });
    expect(await logged(emu, 'DELETE', '/delete-voice/')).toHaveLength(1);
    // The service did act: the voice is gone.
    await expect(client.voices.delete(7001)).rejects.toBeInstanceOf(HttpForbiddenError);
  });

  it('a 503 with Retry-After (the service did not act) is repeated and the voice deleted', async () => {
    await control(emu, 'DELETE', 'requests');
    await control(emu, 'POST', 'faults', { status: 503, retryAfter: 0, path: '/delete-voice/7002' });
    await expect(client.voices.delete(7002)).resolves.toEqual({ status: 'ok' });
    expect((await logged(emu, 'DELETE', '/delete-voice/')).map((r) => r.status)).toEqual([503, 200]);
  });
});

describe('cleanup', () => {
  it('leaves no socket open once downloads ended and the client closed', async () => {
    const before = openNetHandles().length;
    const mine = await emulator();
    const own = clientFor(mine);
    const seeded = (await control(mine, 'POST', 'tasks', { kind: 'tts', text: 'closing time', taskMs: 0 })) as { run_id: number };
    await control(mine, 'POST', 'faults', { dropAfterBytes: 300, path: '/tts-result/' });
    await collect((await own.textToSpeech.result(seeded.run_id)).audio);
    const early = await own.textToSpeech.result(seeded.run_id);
    early.audio.destroy();
    await new Promise((resolve) => early.audio.once('close', resolve));
    await own.close();
    await mine.close();
    await until(() => openNetHandles().length <= before, 2000).catch(() => undefined);
    expect(openNetHandles().length).toBeLessThanOrEqual(before);
  });
});
