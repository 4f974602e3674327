/**
 * Resuming a download where it stopped (RFC 9110), as pure functions of the answers' headers:
 * what the next request sends, whether an answer continues the same file (and which of its
 * bytes were already received), and whether a 416 says the file is complete.
 * `ResumableDownload` keeps what is known of the file; these functions only decide.
 *
 * - `If-Range` (13.1.5): the ETag when it is strong; with no ETag at all, the `Last-Modified`
 *   date when it is a strong validator (8.8.2.2: the answer's `Date` at least a second later);
 *   otherwise none (a weak ETag must not be sent, nor a date when an ETag exists).
 * - A 206 may start at the byte asked for or before it (block-aligned ranges), never after. A
 *   200 is the whole file again. Either way its ETag, its `Last-Modified` (when neither answer
 *   has an ETag) and its size must be those seen before, or the file changed (`IntegrityError`).
 * - A 416 whose `Content-Range: bytes * /N` names exactly the bytes received ends the download.
 */
import { IntegrityError, ProtocolError } from '../errors.js';
import { headerValue, type HeaderBag } from '../retry-after.js';

/** What identifies the file across attempts: the validators of the first answer that named any, and its size. */
export interface FileIdentity {
  etag: string | undefined;
  lastModified: string | undefined;
  /** `lastModified` may go into `If-Range`. */
  lastModifiedStrong: boolean;
  /** The size in bytes, once an answer told it. */
  total: number | undefined;
}

/** Nothing known yet. */
export const UNKNOWN_FILE: FileIdentity = Object.freeze({
  etag: undefined,
  lastModified: undefined,
  lastModifiedStrong: false,
  total: undefined,
});

/** Origin and path only: presigned URLs carry their signature in the query. */
export function describeUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/** Whether `lastModified` is a strong validator: `date` (the answer's `Date`) is at least a second after it. */
export function strongDate(lastModified: string | undefined, date: string | undefined): boolean {
  if (lastModified === undefined || date === undefined) return false;
  const modified = Date.parse(lastModified);
  const sent = Date.parse(date);
  return Number.isFinite(modified) && Number.isFinite(sent) && sent - modified >= 1000;
}

/** The `If-Range` validator for `file`, or undefined when none may be sent. */
export function ifRange(file: FileIdentity): string | undefined {
  if (file.etag !== undefined) return file.etag.startsWith('W/') ? undefined : file.etag;
  return file.lastModifiedStrong ? file.lastModified : undefined;
}

/** `Range` (and `If-Range` where allowed) for a request from byte `received`; none from byte 0. */
export function resumeHeaders(received: number, file: FileIdentity): Record<string, string> {
  if (received === 0) return {};
  const headers: Record<string, string> = { range: `bytes=${received}-` };
  const validator = ifRange(file);
  if (validator !== undefined) headers['if-range'] = validator;
  return headers;
}

/** What a 200 or 206 brings: the bytes of its body already received, and the file as known now. */
export interface AcceptedAnswer {
  skip: number;
  file: FileIdentity;
}

/**
 * Checks that a 200 or 206 answer to a request from byte `received` continues `file`. Throws
 * `ProtocolError` for a 206 without a valid `Content-Range` or one that starts after `received`,
 * and `IntegrityError` when the answer is another version of the file. `where` names the file
 * in messages (see `describeUrl`).
 */
export function acceptAnswer(status: number, headers: HeaderBag, received: number, file: FileIdentity, where: string): AcceptedAnswer {
  const etag = headerValue(headers, 'etag');
  const lastModified = headerValue(headers, 'last-modified');
  let total: number | undefined;
  let skip: number;
  if (status === 206) {
    const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(headerValue(headers, 'content-range')?.trim() ?? '');
    if (!match) {
      throw new ProtocolError(`The server answered a request for ${where} from byte ${received} with 206 but no valid Content-Range.`);
    }
    const start = Number(match[1]);
    if (start > received) {
      throw new ProtocolError(
        `The server answered a request for ${where} from byte ${received} with a range that starts later, at byte ${start}: ` +
          `${start - received} bytes would be missing.`,
      );
    }
    skip = received - start;
    if (match[3] !== '*') total = Number(match[3]);
  } else {
    const length = headerValue(headers, 'content-length');
    if (length !== undefined && /^\d+$/.test(length)) total = Number(length);
    skip = received;
  }
  if (received > 0) {
    const differs = (before: string | number | undefined, now: string | number | undefined): boolean =>
      before !== undefined && now !== undefined && before !== now;
    const changed =
      differs(file.etag, etag) || differs(file.total, total) || (file.etag === undefined && etag === undefined && differs(file.lastModified, lastModified));
    if (changed) {
      throw new IntegrityError(`The file at ${where} changed while it was being downloaded (at byte ${received}); start the download again.`);
    }
  }
  const named = file.etag !== undefined || file.lastModified !== undefined;
  return {
    skip,
    file: {
      etag: named ? file.etag : etag,
      lastModified: named ? file.lastModified : lastModified,
      lastModifiedStrong: named ? file.lastModifiedStrong : strongDate(lastModified, headerValue(headers, 'date')),
      total: file.total ?? total,
    },
  };
}

/**
 * For a 416: the file's size when `Content-Range: bytes * /N` (or the size known before) says
 * it has exactly the `received` bytes, so the download is complete; otherwise undefined. A size
 * other than the one known before means the file changed (`IntegrityError`).
 */
export function completeAt416(headers: HeaderBag, received: number, file: FileIdentity, where: string): number | undefined {
  const match = /^bytes \*\/(\d+)$/.exec(headerValue(headers, 'content-range')?.trim() ?? '');
  const size = match ? Number(match[1]) : undefined;
  if (size !== undefined && file.total !== undefined && size !== file.total) {
    throw new IntegrityError(
      `The file at ${where} changed while it was being downloaded (its size went from ${file.total} to ${size} bytes); start the download again.`,
    );
  }
  const known = size ?? file.total;
  return known !== undefined && received > 0 && received === known ? known : undefined;
}
