/**
 * A streaming `multipart/form-data` parser (RFC 7578) for the emulator's upload endpoints. Bytes
 * are fed as they arrive (`write`), so an upload of any size costs a bounded amount of memory:
 * a file part keeps its size, SHA-256, its first `headBytes` and, only while it is at most
 * `keepBytes`, its whole data. Text fields are kept whole (at most `maxFieldBytes` each).
 * Part headers give `name`, `filename` (also `filename*` in UTF-8) and `Content-Type`.
 *
 * The body's data is searched for `CRLF--boundary` chunk by chunk; only the few bytes that
 * could start a boundary at the end of a chunk are carried over, never the backlog.
 */
import { createHash, type Hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BodyTooLargeError } from './respond.js';

/** A part of a parsed body with its data (the whole-buffer form, `parseMultipart`). */
export interface MultipartPart {
  /** The form field name. */
  name: string;
  /** Present for file parts. */
  filename: string | undefined;
  contentType: string | undefined;
  data: Buffer;
}

/** A file part as the streaming parser describes it. */
export interface FormFile {
  name: string;
  filename: string;
  contentType: string | undefined;
  size: number;
  /** SHA-256 of the data, hex. */
  sha256: string;
  /** The first bytes (for sniffing the format). */
  head: Buffer;
  /** The whole data, when it was at most `keepBytes`. */
  data: Buffer | undefined;
}

/** A parsed form: text fields (repeated names keep every value) and files. */
export interface ParsedForm {
  fields: Map<string, string[]>;
  files: FormFile[];
}

export class MultipartError extends Error {}

export interface MultipartLimits {
  /** Bytes of a file's data kept whole; larger files keep only `head`. Default 16 MiB. */
  keepBytes?: number;
  /** Bytes of each file's beginning kept in `head`. Default 64 KiB. */
  headBytes?: number;
  /** Largest text field, bytes. Default 1 MiB. */
  maxFieldBytes?: number;
}

/** The boundary of a `multipart/form-data` content type, or undefined when it is not one. */
export function multipartBoundary(contentType: string | undefined): string | undefined {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType.trim())) return undefined;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return match?.[1] ?? match?.[2];
}

function parseHeaders(text: string): Map<string, string> {
  const headers = new Map<string, string>();
  for (const line of text.split('\r\n')) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new MultipartError(`Malformed part header line: ${JSON.stringify(line.slice(0, 80))}`);
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

/** `key=value` and `key="quoted value"` parameters of a header value. */
function headerParams(value: string): Map<string, string> {
  const params = new Map<string, string>();
  const re = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  let match: RegExpExecArray | null;
  while ((match = re.exec(value)) !== null) {
    const raw = match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : (match[3] ?? '').trim();
    params.set(match[1]!.toLowerCase(), raw);
  }
  return params;
}

function decodeExtended(value: string): string | undefined {
  const match = /^([\w-]+)'[^']*'(.*)$/.exec(value);
  if (!match || match[1]!.toLowerCase() !== 'utf-8') return undefined;
  try {
    return decodeURIComponent(match[2]!);
  } catch {
    return undefined;
  }
}

const EMPTY = Buffer.alloc(0);
const MAX_HEADER_BYTES = 16 * 1024;

/** Where a part's data goes while it streams. */
interface PartSink {
  name: string;
  filename: string | undefined;
  contentType: string | undefined;
  size: number;
  hash: Hash | undefined;
  head: Buffer[];
  headSize: number;
  kept: Buffer[] | undefined;
}

/** The parser: `write` the body's chunks in order, then `end()` for the form. */
export class MultipartParser {
  readonly #delimiter: Buffer;
  readonly #keepBytes: number;
  readonly #headBytes: number;
  readonly #maxFieldBytes: number;
  #state: 'preamble' | 'afterDelimiter' | 'headers' | 'body' | 'done' = 'preamble';
  /** Bytes not yet parsed outside a part's data (boundaries, headers). A CRLF starts it, so the first boundary matches like the others. */
  #pending: Buffer = Buffer.from('\r\n');
  /** The end of the data so far that could be the start of a boundary. */
  #carry: Buffer = EMPTY;
  #part: PartSink | undefined;
  readonly #form: ParsedForm = { fields: new Map(), files: [] };

  constructor(boundary: string, limits: MultipartLimits = {}) {
    this.#delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
    this.#keepBytes = limits.keepBytes ?? 16 * 1024 * 1024;
    this.#headBytes = limits.headBytes ?? 64 * 1024;
    this.#maxFieldBytes = limits.maxFieldBytes ?? 1024 * 1024;
  }

  /** Parses the next chunk of the body. Throws `MultipartError` on a malformed body. */
  write(chunk: Buffer): void {
    let data = chunk;
    while (data.length > 0) {
      if (this.#state === 'body') {
        data = this.#body(data);
      } else {
        this.#pending = this.#pending.length === 0 ? data : Buffer.concat([this.#pending, data]);
        data = this.#outsideData();
      }
    }
  }

  /** The form, once the closing boundary was read; else `MultipartError`. */
  end(): ParsedForm {
    if (this.#state !== 'done') throw new MultipartError('The body ends before the closing boundary.');
    return this.#form;
  }

  /** Parses `#pending` outside part data; returns bytes that belong to a part's data, if any. */
  #outsideData(): Buffer {
    for (;;) {
      const pending = this.#pending;
      switch (this.#state) {
        case 'preamble': {
          const at = pending.indexOf(this.#delimiter);
          if (at < 0) {
            this.#pending = pending.subarray(Math.max(0, pending.length - this.#delimiter.length + 1));
            return EMPTY;
          }
          this.#pending = pending.subarray(at + this.#delimiter.length);
          this.#state = 'afterDelimiter';
          continue;
        }
        case 'afterDelimiter': {
          if (pending.length < 2) return EMPTY;
          if (pending[0] === 0x2d && pending[1] === 0x2d) {
            this.#state = 'done';
            this.#pending = EMPTY;
            return EMPTY;
          }
          // Transport padding (spaces, tabs) may follow a delimiter, then CRLF.
          let pos = 0;
          while (pos < pending.length && (pending[pos] === 0x20 || pending[pos] === 0x09)) pos++;
          if (pending.length < pos + 2) return EMPTY;
          if (pending[pos] !== 0x0d || pending[pos + 1] !== 0x0a) throw new MultipartError('A boundary is not followed by CRLF.');
          this.#pending = pending.subarray(pos + 2);
          this.#state = 'headers';
          continue;
        }
        case 'headers': {
          let text: string;
          let rest: Buffer;
          if (pending.length >= 2 && pending[0] === 0x0d && pending[1] === 0x0a) {
            text = '';
            rest = pending.subarray(2);
          } else {
            const end = pending.indexOf('\r\n\r\n', 0, 'latin1');
            if (end < 0) {
              if (pending.length > MAX_HEADER_BYTES) throw new MultipartError('A part has no end of headers.');
              return EMPTY;
            }
            text = pending.toString('utf8', 0, end);
            rest = pending.subarray(end + 4);
          }
          this.#openPart(parseHeaders(text));
          this.#pending = EMPTY;
          this.#state = 'body';
          return rest;
        }
        case 'body':
        case 'done':
          this.#pending = EMPTY;
          return EMPTY;
      }
    }
  }

  /** Takes part data up to the next boundary; returns what follows the boundary (or nothing). */
  #body(input: Buffer): Buffer {
    const d = this.#delimiter.length;
    let chunk = input;
    if (this.#carry.length > 0 && chunk.length < d - 1) {
      // Tiny pieces: join them to the few carried bytes (both are shorter than a boundary).
      chunk = Buffer.concat([this.#carry, chunk]);
      this.#carry = EMPTY;
    }
    if (this.#carry.length > 0) {
      // A boundary that starts in the carried bytes ends within the first d - 1 bytes of the chunk.
      const seam = Buffer.concat([this.#carry, chunk.subarray(0, d - 1)]);
      const at = seam.indexOf(this.#delimiter);
      const carried = this.#carry.length;
      if (at >= 0 && at < carried) {
        this.#data(this.#carry.subarray(0, at));
        this.#carry = EMPTY;
        return this.#closePart(chunk.subarray(at + d - carried));
      }
      this.#data(this.#carry);
      this.#carry = EMPTY;
    }
    const at = chunk.indexOf(this.#delimiter);
    if (at >= 0) {
      this.#data(chunk.subarray(0, at));
      return this.#closePart(chunk.subarray(at + d));
    }
    const keep = Math.min(chunk.length, d - 1);
    this.#data(chunk.subarray(0, chunk.length - keep));
    this.#carry = Buffer.from(chunk.subarray(chunk.length - keep));
    return EMPTY;
  }

  #openPart(headers: Map<string, string>): void {
    const disposition = headers.get('content-disposition');
    if (!disposition || !/^form-data\b/i.test(disposition)) throw new MultipartError('A part has no Content-Disposition: form-data.');
    const params = headerParams(disposition);
    const name = params.get('name');
    if (name === undefined) throw new MultipartError('A part has no name.');
    const extended = params.get('filename*');
    const filename = (extended !== undefined ? decodeExtended(extended) : undefined) ?? params.get('filename');
    this.#part = {
      name,
      filename,
      contentType: headers.get('content-type'),
      size: 0,
      hash: filename === undefined ? undefined : createHash('sha256'),
      head: [],
      headSize: 0,
      kept: [],
    };
  }

  #data(bytes: Buffer): void {
    const part = this.#part;
    if (!part || bytes.length === 0) return;
    part.size += bytes.length;
    if (part.hash === undefined) {
      if (part.size > this.#maxFieldBytes) throw new MultipartError(`The field ${part.name} is longer than ${this.#maxFieldBytes} bytes.`);
      part.kept!.push(Buffer.from(bytes));
      return;
    }
    part.hash.update(bytes);
    if (part.headSize < this.#headBytes) {
      const piece = bytes.subarray(0, this.#headBytes - part.headSize);
      part.head.push(Buffer.from(piece));
      part.headSize += piece.length;
    }
    if (part.kept !== undefined) {
      if (part.size > this.#keepBytes) part.kept = undefined;
      else part.kept.push(Buffer.from(bytes));
    }
  }

  #closePart(rest: Buffer): Buffer {
    const part = this.#part!;
    this.#part = undefined;
    this.#state = 'afterDelimiter';
    if (part.hash === undefined) {
      const values = this.#form.fields.get(part.name) ?? [];
      values.push(Buffer.concat(part.kept!).toString('utf8'));
      this.#form.fields.set(part.name, values);
    } else {
      this.#form.files.push({
        name: part.name,
        filename: part.filename!,
        contentType: part.contentType,
        size: part.size,
        sha256: part.hash.digest('hex'),
        head: Buffer.concat(part.head),
        data: part.kept === undefined ? undefined : Buffer.concat(part.kept),
      });
    }
    return rest;
  }
}

/**
 * Reads a request's multipart body as it arrives. Throws `BodyTooLargeError` past `maxBytes`
 * (by `Content-Length` or by count) and `MultipartError` for a malformed body.
 */
export async function readMultipart(req: IncomingMessage, boundary: string, maxBytes: number, limits: MultipartLimits = {}): Promise<ParsedForm> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw new BodyTooLargeError(maxBytes);
  const parser = new MultipartParser(boundary, limits);
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new BodyTooLargeError(maxBytes);
    parser.write(chunk);
  }
  return parser.end();
}

/** Splits a whole body into its parts (every part's data kept). Throws `MultipartError` on a malformed body. */
export function parseMultipart(body: Buffer, boundary: string): MultipartPart[] {
  const parser = new MultipartParser(boundary, { keepBytes: Number.POSITIVE_INFINITY, maxFieldBytes: Number.POSITIVE_INFINITY });
  if (body.indexOf(`--${boundary}`, 0, 'latin1') < 0) throw new MultipartError('The body does not contain the boundary.');
  parser.write(body);
  const form = parser.end();
  const parts: MultipartPart[] = [];
  for (const [name, values] of form.fields) {
    for (const value of values) parts.push({ name, filename: undefined, contentType: undefined, data: Buffer.from(value) });
  }
  for (const file of form.files) parts.push({ name: file.name, filename: file.filename, contentType: file.contentType, data: file.data! });
  return parts;
}
