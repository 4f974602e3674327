/**
 * The service key kept out of everything the relay sends a browser: a service that echoes the
 * key (in `session.created`, in an error's message, in a close reason) must not hand it to a
 * page. A text frame is searched as written and, when it holds JSON escapes, as parsed (the key
 * could be written with escapes); one that holds the key anywhere is sent parsed, redacted and
 * written again. A binary frame holding the key's bytes has them zeroed.
 */
import { redactSecret } from '../errors.js';
import { redactObject } from '../realtime/realtime-events.js';

/** Longest close reason a WebSocket close frame carries, in bytes. */
const MAX_CLOSE_REASON_BYTES = 123;

/** Whether any string of a parsed JSON value (a key or a value) holds `secret`. */
function holds(value: unknown, secret: string): boolean {
  if (typeof value === 'string') return value.includes(secret);
  if (Array.isArray(value)) return value.some((item) => holds(item, secret));
  if (value !== null && typeof value === 'object') return Object.entries(value).some(([key, item]) => key.includes(secret) || holds(item, secret));
  return false;
}

/** A frame from the service as a browser may see it. */
export function scrubFrame(data: Buffer, isBinary: boolean, secret: string): Buffer {
  if (isBinary) {
    const bytes = Buffer.from(secret, 'utf8');
    if (!data.includes(bytes)) return data;
    const copy = Buffer.from(data);
    for (let at = copy.indexOf(bytes); at >= 0; at = copy.indexOf(bytes, at)) copy.fill(0, at, at + bytes.length);
    return copy;
  }
  // Fast path: neither the key as written nor any escape that could spell it.
  if (!data.includes(secret) && !data.includes('\\')) return data;
  const text = data.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return Buffer.from(redactSecret(text, secret), 'utf8');
  }
  if (!holds(parsed, secret)) return data;
  const holder: Record<string, unknown> = { value: parsed };
  redactObject(holder, secret, false);
  return Buffer.from(JSON.stringify(holder.value), 'utf8');
}

/** Text for a browser (a message, a close reason): the key redacted. */
export function scrubText(text: string, secret: string): string {
  return redactSecret(text, secret);
}

/** `text` cut to fit a close frame's reason (an ellipsis marks the cut; a character cut in two is dropped). */
export function closeReason(text: string): string {
  if (Buffer.byteLength(text) <= MAX_CLOSE_REASON_BYTES) return text;
  const ellipsis = '\u2026'; // 3 bytes
  return (
    Buffer.from(text)
      .subarray(0, MAX_CLOSE_REASON_BYTES - 3)
      .toString('utf8')
      .replace(/\uFFFD$/, '') + ellipsis
  );
}
