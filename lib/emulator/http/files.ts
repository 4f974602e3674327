/**
 * The emulator's presigned file store: result audio (TTS results, separated tracks) is kept in
 * memory and served under `/_files/<id>/<name>?expires=<ms>&sig=<hmac>`, like the service's
 * presigned storage URLs: no API key, a limited lifetime, HTTP Range support.
 *
 * - The signature is HMAC-SHA256 over the path and the expiry, with a random secret made once per
 *   store; an expired URL, a bad or missing signature answers 403 with `{error, status}`.
 * - GET and HEAD; `Range: bytes=N-`, `bytes=N-M` and `bytes=-N` (one range; several ranges are
 *   answered with the whole body), `If-Range` with the ETag, 416 for a range past the end.
 * - Fault switches (`store.faults`) for tests: drop the connection or stall after some body
 *   bytes for the next N downloads, or ignore Range requests.
 * - In memory, at most `maxFiles` files are kept; storing one more forgets the oldest. With a
 *   state directory (`state`), files are kept there, for later emulators on it too, at most
 *   `maxBytes` of them (the oldest go first), and `localPath` says where a file's bytes are.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StateDir } from '../state-store.js';
import { UsageError } from '../../errors.js';

export interface FileStoreOptions {
  /** Lifetime of a presigned URL, in milliseconds. */
  urlTtlMs: number;
  /** The clock, in milliseconds since the epoch. Default `Date.now`. Tests inject one to expire URLs. */
  now?: () => number;
  /** Files kept in memory before the oldest is forgotten. Default 256. */
  maxFiles?: number;
  /** Keep the files in this state directory instead of in memory. */
  state?: StateDir;
  /** With `state`: bytes of files kept before the oldest are removed. Default `DEFAULT_STATE_MAX_BYTES`. */
  maxBytes?: number;
}

/** Bytes of result files a state directory keeps before the oldest are removed: 100 MiB. */
export const DEFAULT_STATE_MAX_BYTES = 100 * 1024 * 1024;

export interface StoredFile {
  /** `/_files/<id>/<name>`: the path presigned URLs point at. */
  path: string;
  /** A presigned URL, valid for `urlTtlMs` from `put`. */
  url: string;
  bytes: Buffer;
  contentType: string;
  /** Strong ETag, quoted. */
  etag: string;
}

/**
 * Fault switches, read on every download. Set fields to arm them, for example
 * `store.faults = { dropAfterBytes: 1000, count: 2 }`; clear with `store.faults = {}`.
 */
export interface FileStoreFaults {
  /**
   * Destroy the connection after this many bytes of a GET body (counted from the start of the
   * range served), for the next `count` downloads. The response headers still announce the full
   * length, as a connection lost mid-body would.
   */
  dropAfterBytes?: number;
  /**
   * Stop sending after this many body bytes and keep the connection open until the client
   * gives up (for body idle timeouts), for the next `count` downloads.
   */
  stallAfterBytes?: number;
  /**
   * Downloads the drop or stall applies to; each one hit decrements it, and at 0 the drop and
   * stall are cleared. Default 1.
   */
  count?: number;
  /** While true, Range is ignored: 200 with the whole body and `Accept-Ranges: none`. */
  ignoreRange?: boolean;
}

export interface FileStore {
  /** Stores bytes, returns a presigned URL (absolute, on the emulator's baseUrl) valid for urlTtlMs. */
  put(bytes: Buffer, contentType: string, name: string): StoredFile;
  /** Issues a fresh presigned URL for an already stored file path (new expiry). */
  presign(path: string): string;
  /** Handles GET/HEAD under `/_files/`; returns false when the request is not for the store. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** The fault switches, read on each download; replace or mutate freely. */
  faults: FileStoreFaults;
  /** The stored file at `path`, if still kept. */
  get(path: string): StoredFile | undefined;
  /** Where the bytes of the file at `path` are on disk, when the store keeps its files in a state directory and still has it. */
  localPath(path: string): string | undefined;
}

export const FILES_PREFIX = '/_files/';

function sendError(res: ServerResponse, status: number, error: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ error, status });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

type RangeResult = { start: number; end: number } | 'unsatisfiable' | undefined;

/** One `bytes=` range against `size`; `undefined` when absent, malformed or multiple (serve all). */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (!header) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match) return undefined;
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return undefined;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

/**
 * Creates a store. `baseUrl()` gives the emulator's `http://host:port`, read when a URL is made
 * (so the store can exist before the server listens).
 */
export function createFileStore(options: FileStoreOptions, baseUrl: () => string): FileStore {
  const now = options.now ?? Date.now;
  const ttl = options.urlTtlMs;
  const maxFiles = options.maxFiles ?? 256;
  const { state } = options;
  const maxBytes = options.maxBytes ?? DEFAULT_STATE_MAX_BYTES;
  const secret = randomBytes(32);
  const files = new Map<string, StoredFile>();
  /** When the last file was stored: each one later than the one before, so the oldest go first past the cap. */
  let lastStoredAt = 0;

  /** The id of a stored file's path, `/_files/ID/NAME`. */
  const idOf = (path: string): string | undefined => /^\/_files\/([A-Za-z0-9_-]+)\/[^/]+$/.exec(path)?.[1];

  /** The file at `path`: in memory, or in the state directory. */
  const lookup = (path: string): StoredFile | undefined => {
    if (!state) return files.get(path);
    const id = idOf(path);
    const kept = id === undefined ? undefined : state.readFile(id);
    if (!kept || kept.record.path !== path) return undefined;
    const { contentType, etag } = kept.record;
    return { path, url: '', bytes: kept.bytes, contentType, etag };
  };

  const sign = (path: string, expires: number): Buffer => createHmac('sha256', secret).update(`${path}\n${expires}`).digest();

  const presign = (path: string): string => {
    if (!lookup(path)) throw new UsageError(`No stored file at ${path}: only a stored file gets a presigned URL.`);
    const expires = now() + ttl;
    return `${baseUrl()}${path}?expires=${expires}&sig=${sign(path, expires).toString('base64url')}`;
  };

  /** The fault to apply to this download, consuming one `count`. */
  const takeFault = (): { dropAfter?: number; stallAfter?: number } => {
    const f = store.faults;
    if (f.dropAfterBytes === undefined && f.stallAfterBytes === undefined) return {};
    const taken = { dropAfter: f.dropAfterBytes, stallAfter: f.stallAfterBytes };
    const left = (f.count ?? 1) - 1;
    if (left <= 0) store.faults = { ignoreRange: f.ignoreRange };
    else store.faults = { ...f, count: left };
    return taken;
  };

  const handle = (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = new URL(req.url ?? '/', 'http://emulator');
    if (!url.pathname.startsWith(FILES_PREFIX)) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendError(res, 405, `Method ${req.method} is not allowed on stored files; use GET or HEAD.`, { allow: 'GET, HEAD' });
      return true;
    }
    const expiresText = url.searchParams.get('expires') ?? '';
    const sigText = url.searchParams.get('sig') ?? '';
    const expires = /^\d+$/.test(expiresText) ? Number(expiresText) : NaN;
    const given = Buffer.from(sigText, 'base64url');
    const expected = Number.isFinite(expires) ? sign(url.pathname, expires) : undefined;
    if (!expected || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      sendError(res, 403, 'Invalid or missing URL signature.');
      return true;
    }
    if (now() > expires) {
      sendError(res, 403, 'The presigned URL has expired; request a new one.');
      return true;
    }
    const file = lookup(url.pathname);
    if (!file) {
      sendError(res, 404, 'The file no longer exists.');
      return true;
    }

    const size = file.bytes.length;
    const ignoreRange = store.faults.ignoreRange === true;
    const ifRange = req.headers['if-range'];
    const rangeAllowed = !ignoreRange && (ifRange === undefined || ifRange === file.etag);
    const range = rangeAllowed ? parseRange(req.headers.range, size) : undefined;
    const headers: Record<string, string | number> = {
      'content-type': file.contentType,
      etag: file.etag,
      'accept-ranges': ignoreRange ? 'none' : 'bytes',
      'cache-control': 'private, no-store',
    };
    if (range === 'unsatisfiable') {
      sendError(res, 416, `The range is outside the file (${size} bytes).`, { 'content-range': `bytes */${size}` });
      return true;
    }
    let body = file.bytes;
    if (range) {
      body = file.bytes.subarray(range.start, range.end + 1);
      headers['content-range'] = `bytes ${range.start}-${range.end}/${size}`;
    }
    headers['content-length'] = body.length;
    res.writeHead(range ? 206 : 200, headers);
    if (req.method === 'HEAD') {
      res.end();
      return true;
    }

    const fault = takeFault();
    if (fault.dropAfter !== undefined && fault.dropAfter < body.length) {
      res.write(body.subarray(0, fault.dropAfter), () => res.destroy());
    } else if (fault.stallAfter !== undefined && fault.stallAfter < body.length) {
      res.write(body.subarray(0, fault.stallAfter));
    } else {
      res.end(body);
    }
    return true;
  };

  const store: FileStore = {
    faults: {},
    put(bytes, contentType, name) {
      const id = randomBytes(12).toString('base64url');
      const path = `${FILES_PREFIX}${id}/${encodeURIComponent(name)}`;
      const etag = `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`;
      const file: StoredFile = { path, url: '', bytes, contentType, etag };
      if (state) {
        lastStoredAt = Math.max(now(), lastStoredAt + 1);
        state.putFile(id, { path, name, contentType, etag, size: bytes.length, storedAt: lastStoredAt }, bytes, maxBytes);
      } else {
        files.set(path, file);
        while (files.size > maxFiles) files.delete(files.keys().next().value as string);
      }
      file.url = presign(path);
      return file;
    },
    presign,
    handle,
    get: lookup,
    localPath(path) {
      const id = idOf(path);
      const record = state && id !== undefined ? state.fileRecords.get(id) : undefined;
      return record && record.path === path ? state!.filePath(id!, record.name) : undefined;
    },
  };
  return store;
}
