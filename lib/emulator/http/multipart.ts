/**
 * A `multipart/form-data` parser (RFC 7578) for the emulator's upload endpoint. It works on a
 * body already read under a size cap: finds the boundary in the `Content-Type`, splits the parts
 * on `CRLF--boundary`, and reads each part's `Content-Disposition` (`name`, `filename`, also
 * `filename*` in UTF-8) and `Content-Type`. Part data are views into the body (no copies).
 */

export interface MultipartPart {
  /** The form field name. */
  name: string;
  /** Present for file parts. */
  filename: string | undefined;
  contentType: string | undefined;
  data: Buffer;
}

export class MultipartError extends Error {}

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

/** Splits `body` into its parts. Throws `MultipartError` on a malformed body. */
export function parseMultipart(body: Buffer, boundary: string): MultipartPart[] {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const separator = Buffer.from(`\r\n--${boundary}`, 'latin1');
  let pos = body.indexOf(delimiter);
  if (pos < 0) throw new MultipartError('The body does not contain the boundary.');
  pos += delimiter.length;
  const parts: MultipartPart[] = [];
  for (;;) {
    if (body[pos] === 0x2d && body[pos + 1] === 0x2d) return parts; // closing "--"
    // Transport padding (spaces, tabs) may follow a delimiter, then CRLF.
    while (body[pos] === 0x20 || body[pos] === 0x09) pos++;
    if (body[pos] !== 0x0d || body[pos + 1] !== 0x0a) throw new MultipartError('A boundary is not followed by CRLF.');
    pos += 2;
    const headerEnd = body.indexOf('\r\n\r\n', pos, 'latin1');
    let headersText: string;
    let dataStart: number;
    if (body[pos] === 0x0d && body[pos + 1] === 0x0a) {
      headersText = '';
      dataStart = pos + 2;
    } else {
      if (headerEnd < 0) throw new MultipartError('A part has no end of headers.');
      headersText = body.toString('utf8', pos, headerEnd);
      dataStart = headerEnd + 4;
    }
    const next = body.indexOf(separator, dataStart);
    if (next < 0) throw new MultipartError('The body ends before the closing boundary.');
    const headers = parseHeaders(headersText);
    const disposition = headers.get('content-disposition');
    if (!disposition || !/^form-data\b/i.test(disposition)) throw new MultipartError('A part has no Content-Disposition: form-data.');
    const params = headerParams(disposition);
    const name = params.get('name');
    if (name === undefined) throw new MultipartError('A part has no name.');
    const extended = params.get('filename*');
    parts.push({
      name,
      filename: (extended !== undefined ? decodeExtended(extended) : undefined) ?? params.get('filename'),
      contentType: headers.get('content-type'),
      data: body.subarray(dataStart, next),
    });
    pos = next + separator.length;
  }
}
