/**
 * Shared set-up of the HTTP tests: an emulator on 127.0.0.1:0, clients pointed at it, the
 * emulator's control endpoint, and a check that no socket is left open.
 */
import { request } from 'undici';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../lib/emulator/server.js';
import { LocalizationClient, type LocalizationClientOptions } from '../lib/http/client.js';

export const KEY = 'test-key-0123456789';
export const OTHER_KEY = 'other-key-9876543210';

export async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  return startEmulator({ port: 0, apiKeys: [KEY, OTHER_KEY], taskMs: 30, ttsStreamDelayMs: 0, ...options });
}

/** A client with fast retries (1 ms back-off) unless told otherwise. */
export function clientFor(emu: RunningEmulator, options: LocalizationClientOptions = {}): LocalizationClient {
  return new LocalizationClient({
    baseUrl: emu.baseUrl,
    apiKey: KEY,
    retry: { retries: 2, minDelayMs: 1, maxDelayMs: 50 },
    polling: { speech: { initialIntervalMs: 10, maxIntervalMs: 20 }, longMedia: { initialIntervalMs: 10, maxIntervalMs: 20 } },
    ...options,
  });
}

/** Calls the emulator's control endpoint (no key) and returns the parsed answer. */
export async function control(emu: RunningEmulator, method: 'GET' | 'POST' | 'DELETE', name: string, body?: unknown): Promise<any> {
  const response = await request(`${emu.baseUrl}/_emulator/${name}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`control ${name}: ${response.statusCode} ${text}`);
  return JSON.parse(text);
}

/** The requests the emulator logged for `method` and `path`. */
export async function logged(emu: RunningEmulator, method: string, pathPrefix: string): Promise<Array<{ method: string; path: string; status: number }>> {
  const { requests } = (await control(emu, 'GET', 'requests')) as { requests: Array<{ method: string; path: string; status: number }> };
  return requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix));
}

/** A raw request to the emulator, bypassing client-side validation. */
export async function raw(
  emu: RunningEmulator,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  options: { key?: string | null; json?: unknown; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string; json: any; bytes: Buffer }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== null) headers['x-api-key'] = options.key ?? KEY;
  let body = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  const response = await request(`${emu.baseUrl}${path}`, { method, headers, body });
  const bytes = Buffer.from(await response.body.arrayBuffer());
  const text = bytes.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers, text, json, bytes };
}

/** Reads a stream to one buffer. */
export async function collect(stream: AsyncIterable<Buffer | Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** Resolves after `turns` turns of the event loop (no timers involved, so fake timers do not matter). */
export async function ioTurns(turns = 1): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Waits (by event-loop turns, at most `maxTurns`) until `condition` holds. */
export async function until(condition: () => boolean | Promise<boolean>, maxTurns = 20_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (await condition()) return;
    await ioTurns();
  }
  throw new Error('condition not reached');
}

/** Open TCP sockets and servers of this process. */
export function openNetHandles(): string[] {
  return process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap' || name === 'TCPServerWrap');
}
