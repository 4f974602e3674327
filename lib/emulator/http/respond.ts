/**
 * Small response and request-body helpers of the emulator's HTTP side: JSON answers in the
 * service's shapes (`{error, status}` for 401/403/404/429, `{detail: [{loc, msg, type}]}` for
 * 422) and a body reader with a size cap.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FieldIssue, Loc } from '../../http/validation.js';

export interface DetailEntry {
  loc: Loc;
  msg: string;
  type: string;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string | number> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** `{error, status}`: the service's body for 401, 403, 429 (and the emulator's 404, 405, 413). */
export function sendError(res: ServerResponse, status: number, error: string, headers: Record<string, string | number> = {}): void {
  sendJson(res, status, { error, status }, headers);
}

/** 422 with `detail[]`. */
export function sendDetail(res: ServerResponse, detail: DetailEntry[]): void {
  sendJson(res, 422, { detail });
}

/** Issues of a shared schema as `detail[]` entries under `prefix` (`body`, `path`, `query`). */
export function issuesToDetail(issues: FieldIssue[], prefix: string): DetailEntry[] {
  return issues.map((i) => ({ loc: [prefix, ...i.loc], msg: i.msg, type: i.type }));
}

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`The request body is larger than ${limit} bytes.`);
  }
}

/** Reads the whole request body, refusing more than `limit` bytes (by header or by count). */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLargeError(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/** Answers 413 and closes the connection (the client may still be sending). */
export function sendTooLarge(req: IncomingMessage, res: ServerResponse, limit: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendError(res, 413, `The request body exceeds the emulator's limit of ${limit} bytes.`, { connection: 'close' });
  res.once('finish', () => req.destroy());
}

/** Parses a JSON body; a syntax error is a 422 entry, as the service reports it. */
export function parseJsonBody(body: Buffer): { value: unknown } | { detail: DetailEntry[] } {
  const text = body.toString('utf8');
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    const position = /position (\d+)/.exec(error instanceof Error ? error.message : '')?.[1];
    return { detail: [{ loc: ['body', position === undefined ? 0 : Number(position)], msg: 'JSON decode error', type: 'json_invalid' }] };
  }
}

/** Writes `chunk` and waits for `drain` when the socket buffer is full. False if the response closed. */
export function writeWithBackpressure(res: ServerResponse, chunk: Buffer): Promise<boolean> {
  if (res.destroyed || res.writableEnded) return Promise.resolve(false);
  if (res.write(chunk)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = (): void => done(true);
    const onClose = (): void => done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}
