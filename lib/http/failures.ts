/**
 * Where a failed HTTP exchange becomes a typed error: shared by the client's requests and by
 * `FlacDownloadStream`, so the same failure gets the same class (`HttpStatusError`,
 * `HttpForbiddenError`, `ServiceValidationError`, `HttpConnectionError`, `HttpTlsError`,
 * `HttpTimeoutError`, ...) whether it happens before a download's first byte or in its middle.
 *
 * Server text is redacted where it is read, before anything is built from it: `readServerJson`
 * parses a body with every string value (and object key) passed through `redact`, and
 * `serverExcerpt` redacts raw text before cutting it short (so a cut never leaves half a key).
 * Every JSON answer of the client and every error body goes through one of the two.
 */
import { AbortError, ProtocolError, RtTranslateError } from '../errors.js';
import {
  HttpAuthError,
  HttpConnectionError,
  HttpForbiddenError,
  HttpStatusError,
  HttpTimeoutError,
  HttpTlsError,
  PaymentRequiredError,
  HttpRateLimitError,
  ServiceValidationError,
  type HttpErrorOptions,
  type HttpRequestInfo,
  type ServiceValidationDetail,
} from './errors.js';
import { NO_CONNECTION_CODES, parseRetryAfter, type HeaderBag } from './retry.js';

/** Replaces the secrets in a piece of text that came from elsewhere. */
export type Redact = (text: string) => string;

/** A request as errors name it, with where in the exchange it failed (`context`). */
export type FailedRequest = HttpRequestInfo & Pick<HttpErrorOptions, 'context'>;

/** The time limits of an exchange, ms, named in timeout errors. */
export interface ExchangeLimits {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

/** The `code` of an error (or of the first error of an AggregateError). */
export function errorCode(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  const inner = (error as { errors?: unknown }).errors;
  if (Array.isArray(inner)) return errorCode(inner[0]);
  return undefined;
}

/** OpenSSL verification codes that do not contain `CERT` or `CRL`. */
const TLS_VERIFY_CODES: ReadonlySet<string> = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'INVALID_CA',
  'INVALID_PURPOSE',
  'PATH_LENGTH_EXCEEDED',
  'HOSTNAME_MISMATCH',
]);

/**
 * True for the codes of a failed TLS handshake: Node's `ERR_TLS_*` and `ERR_SSL_*`, and
 * OpenSSL's certificate verification codes (`DEPTH_ZERO_SELF_SIGNED_CERT`, `CERT_HAS_EXPIRED`,
 * `UNABLE_TO_GET_ISSUER_CERT_LOCALLY`, `UNABLE_TO_VERIFY_LEAF_SIGNATURE`, ...).
 */
export function isTlsFailureCode(code: string | undefined): boolean {
  if (code === undefined) return false;
  return code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || /(^|_)(CERT|CRL)(_|$)/.test(code) || TLS_VERIFY_CODES.has(code);
}

/** A socket error raised by a read or write: the connection had been made. */
function onOpenSocket(error: unknown): boolean {
  const syscall = (error as { syscall?: unknown } | null)?.syscall;
  return syscall === 'read' || syscall === 'write';
}

/**
 * The typed error of a request that failed without an HTTP status (undici or socket error), or
 * undefined when `error` is none of the known kinds. Timeouts name the limit of `limits` that
 * passed; aborts become `AbortError`.
 */
export function typedNetworkError(error: unknown, info: FailedRequest, limits: ExchangeLimits, redact: Redact): RtTranslateError | undefined {
  if (error instanceof RtTranslateError) return error;
  const options: HttpErrorOptions = { ...info, cause: error };
  const code = errorCode(error);
  const detail = redact(error instanceof Error ? error.message : String(error));
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new HttpTimeoutError('headers', limits.headersTimeoutMs, options);
    case 'UND_ERR_BODY_TIMEOUT':
      return new HttpTimeoutError('body', limits.bodyTimeoutMs, options);
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new HttpTimeoutError('connect', limits.connectTimeoutMs, options);
    case 'UND_ERR_ABORTED':
    case 'ABORT_ERR':
      return new AbortError(`${info.method} ${info.path} was aborted.`, { cause: error });
    default:
      break;
  }
  if (isTlsFailureCode(code)) return new HttpTlsError(code!, detail, options);
  if (code !== undefined && NO_CONNECTION_CODES.has(code) && !onOpenSocket(error)) {
    return new HttpConnectionError('connect', code, detail, options);
  }
  if (
    code !== undefined &&
    (code === 'UND_ERR_SOCKET' ||
      code === 'UND_ERR_CLOSED' ||
      code === 'UND_ERR_DESTROYED' ||
      code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' ||
      code.startsWith('HPE_') ||
      /^E[A-Z]+$/.test(code))
  ) {
    return new HttpConnectionError('exchange', code, detail, options);
  }
  if (error instanceof Error && error.name === 'AbortError') {
    return new AbortError(`${info.method} ${info.path} was aborted.`, { cause: error });
  }
  return undefined;
}

/**
 * Parses a JSON body from the service with every string value, and every object key, passed
 * through `redact`. Throws `SyntaxError` for text that is not JSON.
 */
export function readServerJson(text: string, redact: Redact): unknown {
  return JSON.parse(text, function reviver(this: unknown, _key: string, value: unknown): unknown {
    if (typeof value === 'string') return redact(value);
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.some(([name]) => redact(name) !== name)) {
        return Object.fromEntries(entries.map(([name, inner]) => [redact(name), inner]));
      }
    }
    return value;
  });
}

/** Raw server text, redacted, then trimmed and cut to `max` characters. */
export function serverExcerpt(text: string, redact: Redact, max = 200): string {
  return redact(text).trim().slice(0, max);
}

function toDetail(raw: unknown): ServiceValidationDetail[] {
  if (!Array.isArray(raw)) return [];
  return raw.map((entry: unknown) => {
    const e = (entry ?? {}) as { loc?: unknown; msg?: unknown; type?: unknown };
    return {
      loc: Array.isArray(e.loc) ? e.loc.filter((p): p is string | number => typeof p === 'string' || typeof p === 'number') : [],
      msg: typeof e.msg === 'string' ? e.msg : '',
      type: typeof e.type === 'string' ? e.type : '',
    };
  });
}

/**
 * The typed error of a non-2xx answer from its status, headers and (possibly cut) body text:
 * 401 `HttpAuthError`, 403 `HttpForbiddenError`, 422 `ServiceValidationError` with `detail[]`,
 * 402 `PaymentRequiredError`, 429 `HttpRateLimitError`, anything else `HttpStatusError`; the wait of `Retry-After` or
 * `X-RateLimit-Reset` attached. `explanation` replaces the general sentence of a 403.
 */
export function typedStatusError(
  status: number,
  headers: HeaderBag,
  body: string,
  info: FailedRequest,
  redact: Redact,
  explanation?: string,
): RtTranslateError {
  let parsed: Record<string, unknown> | undefined;
  try {
    const value = readServerJson(body, redact);
    if (value !== null && typeof value === 'object') parsed = value as Record<string, unknown>;
  } catch {
    parsed = undefined;
  }
  const said = [parsed?.error, parsed?.detail, parsed?.message].find((v) => typeof v === 'string') as string | undefined;
  const serverMessage = (said ?? (parsed ? '' : serverExcerpt(body, redact))) || undefined;
  const options: HttpErrorOptions = { ...info, status, serverMessage, retryAfterMs: parseRetryAfter(headers) };
  switch (status) {
    case 401:
      return new HttpAuthError(options);
    case 403:
      return new HttpForbiddenError(explanation === undefined ? options : { ...options, explanation });
    case 422:
      return new ServiceValidationError(toDetail(parsed?.detail), options);
    case 402:
      return new PaymentRequiredError(options);
    case 429:
      return new HttpRateLimitError(options);
    default:
      return new HttpStatusError(status, options);
  }
}

/** `ProtocolError` for a 2xx body that is not JSON, with a redacted excerpt. */
export function notJsonError(info: HttpRequestInfo, status: number, text: string, redact: Redact, cause: unknown): ProtocolError {
  return new ProtocolError(`${info.method} ${info.path} answered a body that is not JSON.`, {
    cause,
    status,
    serverMessage: serverExcerpt(text, redact),
  });
}
