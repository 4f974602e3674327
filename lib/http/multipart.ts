/**
 * `multipart/form-data` request bodies (RFC 7578) streamed from their sources: a file path is
 * read from disk as the socket takes it (64 KiB at a time), a Readable or async iterable is
 * passed on with its backpressure, so a 200 MB upload never sits in memory. When every part's
 * size is known (paths, Buffers, Blobs) the body has an exact `Content-Length`; otherwise it
 * goes out chunked.
 *
 * A body made only of paths, Buffers and Blobs can be sent again (a retry reopens it). One with
 * a Readable can be sent once: `MultipartBody.canReopen()` turns false as soon as its stream has
 * been read from, and the client then does not retry it.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ValidationError } from '../errors.js';

/** Where an uploaded file's bytes come from. A string is a file path. */
export type UploadData = string | URL | Uint8Array | Blob | Readable | AsyncIterable<Uint8Array>;

/** A file to upload, with the name and type its part announces. */
export interface UploadFile {
  data: UploadData;
  /** File name sent in the part. Default: the path's base name, else `file`. */
  filename?: string;
  /** Default from the name's extension, else `application/octet-stream`. */
  contentType?: string;
}

/** What an upload field takes: the bytes alone, or with a name and type. */
export type Upload = UploadData | UploadFile;

/** Content types by extension for the files the service takes (audio, video, documents). */
const TYPES: Record<string, string> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  flac: 'audio/flac',
  aac: 'audio/aac',
  m4a: 'audio/mp4',
  ogg: 'audio/ogg',
  opus: 'audio/ogg',
  webm: 'video/webm',
  mp4: 'video/mp4',
  mov: 'video/quicktime',
  mkv: 'video/x-matroska',
  mxf: 'application/mxf',
  txt: 'text/plain',
  csv: 'text/csv',
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  json: 'application/json',
};

export function contentTypeFor(filename: string): string {
  const ext = /\.([a-z0-9]+)$/i.exec(filename)?.[1]?.toLowerCase() ?? '';
  return TYPES[ext] ?? 'application/octet-stream';
}

function isUploadFile(value: Upload): value is UploadFile {
  return (
    value !== null &&
    typeof value === 'object' &&
    !(value instanceof URL) &&
    !(value instanceof Uint8Array) &&
    !(value instanceof Blob) &&
    !(value instanceof Readable) &&
    !(Symbol.asyncIterator in value) &&
    'data' in value
  );
}

/** A file part ready to stream: its size when known, and how to (re)open its bytes. */
interface FilePart {
  name: string;
  /** The caller's name of the field, for errors. */
  field: string;
  filename: string;
  contentType: string;
  size: number | undefined;
  open: () => AsyncIterable<Uint8Array>;
  /** False for a one-shot source (a Readable, an iterable). */
  reopenable: boolean;
}

const EXPECTED_UPLOAD = 'a file path, a file: URL, a Buffer or Uint8Array, a Blob, a Readable or an async iterable of bytes';

/** One file of a body: its part name on the wire, and the caller's name for it in errors. */
export interface FileField {
  name: string;
  upload: Upload;
  /** The caller's name of the field (`mediaFile`). Default `name`. */
  field?: string;
}

async function prepareFile({ name, upload, field = name }: FileField): Promise<FilePart> {
  const file: UploadFile = isUploadFile(upload) ? upload : { data: upload };
  const data = file.data;
  let part: Omit<FilePart, 'name' | 'field' | 'filename' | 'contentType'>;
  let defaultName = 'file';
  if (typeof data === 'string' || data instanceof URL) {
    const path = data instanceof URL ? (data.protocol === 'file:' ? fileURLToPath(data) : undefined) : data;
    if (path === undefined || path === '') throw new ValidationError(field, `${EXPECTED_UPLOAD} (a URL must be a file: URL)`, String(data));
    const info = await stat(path).catch((error: NodeJS.ErrnoException) => error.code ?? error.message);
    if (typeof info === 'string' || !info.isFile()) {
      throw new ValidationError(field, 'a readable file', `${JSON.stringify(path)}: ${typeof info === 'string' ? info : 'not a regular file'}`);
    }
    const size = info.size;
    defaultName = basename(path);
    part = { size, reopenable: true, open: () => createReadStream(path, { highWaterMark: 64 * 1024 }) };
  } else if (data instanceof Uint8Array) {
    const bytes = data;
    part = {
      size: bytes.byteLength,
      reopenable: true,
      open: async function* () {
        yield bytes;
      },
    };
  } else if (data instanceof Blob) {
    const blob = data;
    part = { size: blob.size, reopenable: true, open: () => Readable.fromWeb(blob.stream() as never) as AsyncIterable<Uint8Array> };
  } else if (data !== null && typeof data === 'object' && Symbol.asyncIterator in data) {
    const source = data as AsyncIterable<Uint8Array>;
    part = { size: undefined, reopenable: false, open: () => source };
  } else {
    throw new ValidationError(field, EXPECTED_UPLOAD, data === null ? 'null' : typeof data);
  }
  if (part.size === 0) throw new ValidationError(field, 'a non-empty file', '0 bytes');
  const filename = file.filename ?? defaultName;
  return { ...part, name, field, filename, contentType: file.contentType ?? contentTypeFor(filename) };
}

/** A form field's value: strings, numbers and booleans as text; arrays as repeated fields. */
export type FieldValue = string | number | boolean | null | undefined | ReadonlyArray<string | number | boolean>;

/** How much of a body was handed on so far. */
export interface UploadProgress {
  sentBytes: number;
  /** The body's exact length, when every part's size is known. */
  totalBytes: number | undefined;
}

/** A body ready to send. */
export interface MultipartBody {
  contentType: string;
  /** Exact byte length when every part's size is known. */
  length: number | undefined;
  /**
   * A fresh stream of the body (for a one-shot source, the same source continued); `onProgress`
   * is told the bytes handed on after each piece.
   */
  open(onProgress?: (progress: UploadProgress) => void): Readable;
  /** Whether `open()` can give the whole body again (false once a one-shot source was read). */
  canReopen(): boolean;
}

/** `"` and line breaks in a header parameter, as browsers encode them. */
function quote(value: string): string {
  return value.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/**
 * A multipart body of `fields` (a wire body: `undefined` and `null` are left out) and `files`.
 * Checks each file before anything is sent: a path must name a readable, non-empty file
 * (`ValidationError` naming the field otherwise).
 */
export async function multipartBody(fields: Record<string, FieldValue>, files: FileField[]): Promise<MultipartBody> {
  const boundary = `----rt-translate-${randomBytes(12).toString('hex')}`;
  const head: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined || value === null) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      head.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${quote(name)}"\r\n\r\n${String(item)}\r\n`));
    }
  }
  const parts = await Promise.all(files.map(prepareFile));
  const headers = parts.map((part) =>
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${quote(part.name)}"; filename="${quote(part.filename)}"\r\n` +
        `Content-Type: ${part.contentType}\r\n\r\n`,
    ),
  );
  const CRLF = Buffer.from('\r\n');
  const tail = Buffer.from(`--${boundary}--\r\n`);
  const fixed = head.reduce((n, b) => n + b.length, 0) + headers.reduce((n, b) => n + b.length + CRLF.length, 0) + tail.length;
  const length = parts.every((p) => p.size !== undefined) ? fixed + parts.reduce((n, p) => n + p.size!, 0) : undefined;
  let started = false;

  async function* pieces(): AsyncGenerator<Uint8Array> {
    started = true;
    for (const buffer of head) yield buffer;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      yield headers[i]!;
      let sent = 0;
      for await (const chunk of part.open()) {
        sent += chunk.byteLength;
        yield chunk;
      }
      if (part.size !== undefined && sent !== part.size) {
        throw new ValidationError(part.field, `a file that does not change while it is uploaded (${part.size} bytes)`, `${sent} bytes`);
      }
      yield CRLF;
    }
    yield tail;
  }

  async function* body(onProgress: ((progress: UploadProgress) => void) | undefined): AsyncGenerator<Uint8Array> {
    let sentBytes = 0;
    for await (const piece of pieces()) {
      yield piece;
      // Counted once taken: the next piece is asked for when this one was handed on.
      sentBytes += piece.byteLength;
      onProgress?.({ sentBytes, totalBytes: length });
    }
  }

  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    length,
    open: (onProgress) => Readable.from(body(onProgress), { objectMode: false }),
    canReopen: () => !started || parts.every((p) => p.reopenable),
  };
}
