/**
 * The failures of the HTTP interface, one class per failure, each with a stable `code` and a
 * `retryable` hint. They extend the library's general classes where one fits (`AuthError`,
 * `ForbiddenError`, `ConnectionError`, `TimeoutError`), so `instanceof AuthError` holds for a
 * realtime and an HTTP 401 alike.
 *
 * Every HTTP error carries `method` and `path` (the path without its query string, so the
 * signature of a presigned URL never lands in a message or a log). No message ever contains the
 * API key: text that came from the server passes through `redactSecret` before it gets here.
 */
import {
  AuthError,
  BillingError,
  ConnectionError,
  ForbiddenError,
  RateLimitError,
  RtTranslateError,
  TimeoutError,
  type RtTranslateErrorOptions,
} from '../errors.js';
import { fromWireName } from './wire.js';

/** Where a request failed; names the request without its query string. */
export interface HttpRequestInfo {
  method: string;
  /** Path of the request URL, query string removed. */
  path: string;
}

export interface HttpErrorOptions extends RtTranslateErrorOptions, HttpRequestInfo {
  /** Wait the service asked for (from `Retry-After` or `X-RateLimit-Reset`), in ms. */
  retryAfterMs?: number;
  /**
   * What the status means here and what to do, replacing the class's general sentence (a 403
   * from a presigned URL means something else than a 403 from the API).
   */
  explanation?: string;
  /** Where in the exchange it happened (`at byte 5000 of the file`), added to the message of a
   * status, connection or timeout error. */
  context?: string;
}

function where(info: HttpRequestInfo & { context?: string }): string {
  return info.context ? `${info.method} ${info.path} (${info.context})` : `${info.method} ${info.path}`;
}

/** The service's own words for the end of a message, after `lead`, ending in one full stop. */
function serviceSaid(options: HttpErrorOptions, lead = ' The service said: '): string {
  const message = options.serverMessage?.trim().replace(/\.+$/, '');
  return message ? `${lead}${message}.` : '';
}

/** 401: the key is missing or unknown. Not retryable: fix the key. */
export class HttpAuthError extends AuthError {
  readonly method: string;
  readonly path: string;
  constructor(options: HttpErrorOptions) {
    const said = serviceSaid(options);
    super(`${where(options)} was refused with 401: the API key is missing or invalid.${said}`, { ...options, status: 401, retryable: false });
    this.method = options.method;
    this.path = options.path;
  }
}

/** 403: the key is valid but lacks permission for this resource (or a presigned URL expired). */
export class HttpForbiddenError extends ForbiddenError {
  readonly method: string;
  readonly path: string;
  constructor(options: HttpErrorOptions) {
    const said = serviceSaid(options);
    const explanation = options.explanation ?? 'the API key has no permission for this resource.';
    super(`${where(options)} was refused with 403: ${explanation}${said}`, { ...options, status: 403, retryable: false });
    this.method = options.method;
    this.path = options.path;
  }
}

/** One entry of a 422 body's `detail[]`. */
export interface ServiceValidationDetail {
  /** Location of the offending value, e.g. `['body', 'project_name']`. */
  loc: (string | number)[];
  msg: string;
  type: string;
}

/**
 * 422: the service rejected the request's content. `detail` holds the service's entries as
 * structured fields (wire names); `field` is the first entry's location without the leading
 * `body`/`path`/`query` part, in the caller's camelCase names (`projectName`, `runIds.2`). Same `code` as the client-side `ValidationError`
 * (`RTT_VALIDATION`): the input is wrong either way; `status` 422 tells them apart.
 */
export class ServiceValidationError extends RtTranslateError {
  readonly method: string;
  readonly path: string;
  readonly detail: ServiceValidationDetail[];
  readonly field: string | undefined;
  constructor(detail: ServiceValidationDetail[], options: HttpErrorOptions) {
    const first = detail[0];
    const list = detail
      .slice(0, 5)
      .map((d) => `${d.loc.join('.')}: ${d.msg}`)
      .join('; ');
    const text = list || options.serverMessage || 'no detail given';
    super('RTT_VALIDATION', `${where(options)} was rejected with 422 (validation): ${text}.`, {
      ...options,
      status: 422,
      retryable: false,
    });
    this.method = options.method;
    this.path = options.path;
    this.detail = detail;
    const loc = first ? first.loc.filter((part, i) => !(i === 0 && ['body', 'path', 'query'].includes(String(part)))) : [];
    this.field = first ? loc.map((part) => (typeof part === 'string' ? fromWireName(part) : part)).join('.') : undefined;
  }
}

/** 429: too many requests, a `RateLimitError` like a realtime handshake refused with 429. */
export class HttpRateLimitError extends RateLimitError {
  readonly method: string;
  readonly path: string;
  constructor(options: HttpErrorOptions) {
    const wait = options.retryAfterMs === undefined ? '' : ` It asked to wait ${options.retryAfterMs} ms.`;
    super(`${where(options)} was rate limited (429).${wait} Slow down or retry later.`, { ...options, status: 429 });
    this.method = options.method;
    this.path = options.path;
  }
}

/** Any other non-2xx status. Retryable for 408 and 5xx. */
export class HttpStatusError extends RtTranslateError {
  readonly method: string;
  readonly path: string;
  readonly retryAfterMs: number | undefined;
  /** True when the status was 503 and the service said when to come back (see retry.ts). */
  readonly unavailable: boolean;
  constructor(status: number, options: HttpErrorOptions) {
    super('RTT_HTTP', `${where(options)} failed with HTTP ${status}${serviceSaid(options, ': ') || '.'}`, {
      ...options,
      status,
      retryable: status === 408 || status >= 500,
    });
    this.method = options.method;
    this.path = options.path;
    this.retryAfterMs = options.retryAfterMs;
    this.unavailable = status === 503 && options.retryAfterMs !== undefined;
  }
}

/** When a connection failed: before anything was sent, or with the request possibly sent. */
export type ConnectionPhase = 'connect' | 'exchange';

/**
 * The network failed: refused, reset, closed mid-response, DNS failure. `phase` is `connect`
 * when the failure is known to precede sending (refused, unknown host): the service cannot have
 * acted. `syscall` is the system or undici error code (`ECONNREFUSED`, `UND_ERR_SOCKET`).
 * Retryable, except for its subclass `HttpTlsError`.
 */
export class HttpConnectionError extends ConnectionError {
  readonly method: string;
  readonly path: string;
  readonly phase: ConnectionPhase;
  readonly syscall: string | undefined;
  constructor(phase: ConnectionPhase, syscall: string | undefined, detail: string, options: HttpErrorOptions, message?: string) {
    const what = phase === 'connect' ? 'could not connect' : 'lost its connection';
    super(message ?? `${where(options)} ${what} (${syscall ?? 'network error'}: ${detail}). Check the base URL and the network.`, {
      ...options,
      retryable: options.retryable ?? true,
    });
    this.method = options.method;
    this.path = options.path;
    this.phase = phase;
    this.syscall = syscall;
  }
}

/**
 * The TLS handshake failed: the server's certificate is self-signed, expired, issued for another
 * host or by an authority this machine does not trust, or the two sides share no protocol.
 * `syscall` holds the TLS or OpenSSL code (`DEPTH_ZERO_SELF_SIGNED_CERT`,
 * `ERR_TLS_CERT_ALTNAME_INVALID`, `CERT_HAS_EXPIRED`, ...). Phase `connect` (nothing was sent)
 * and not retryable: the same certificate fails the same way until someone changes it.
 */
export class HttpTlsError extends HttpConnectionError {
  constructor(code: string, detail: string, options: HttpErrorOptions) {
    super(
      'connect',
      code,
      detail,
      { ...options, retryable: false },
      `${where(options)} could not connect: a TLS/certificate problem (${code}: ${detail}). ` +
        `Check that the URL names the right host and that its certificate is valid and trusted here ` +
        `(for a private authority, NODE_EXTRA_CA_CERTS). Retrying will not help.`,
    );
  }
}

/** Which limit passed: connecting, waiting for response headers, or between body bytes. */
export type HttpTimeoutPhase = 'connect' | 'headers' | 'body';

/** A request time limit passed (`connectTimeoutMs`, `headersTimeoutMs`, `bodyTimeoutMs`). */
export class HttpTimeoutError extends TimeoutError {
  readonly method: string;
  readonly path: string;
  readonly phase: HttpTimeoutPhase;
  constructor(phase: HttpTimeoutPhase, timeoutMs: number, options: HttpErrorOptions) {
    const what = phase === 'connect' ? 'connecting' : phase === 'headers' ? 'waiting for the response headers' : 'waiting for more of the response body';
    super(`${where(options)} timed out after ${timeoutMs} ms ${what}. Raise ${phase}TimeoutMs if the service is slow.`, timeoutMs, {
      ...options,
      retryable: true,
    });
    this.method = options.method;
    this.path = options.path;
    this.phase = phase;
  }
}

export interface TaskErrorOptions extends RtTranslateErrorOptions {
  taskId: string;
}

/** The final statuses of a task that did not succeed and are not about credits. */
export type TaskFailureStatus = 'ERROR' | 'TIMEOUT';

/**
 * A task ended without a result: status ERROR (`taskMessage` is its `message` or
 * `exception_reason`; submitting again may succeed) or TIMEOUT (`TaskTimeoutError`: the work
 * exceeded the service's time limit; split it). Not to be confused with `TaskWaitTimeoutError`:
 * the client stopped waiting for a task that may still finish.
 */
export class TaskFailedError extends RtTranslateError {
  readonly taskId: string;
  readonly taskMessage: string | undefined;
  /** The status the task ended with. */
  readonly taskStatus: TaskFailureStatus;
  constructor(taskMessage: string | undefined, options: TaskErrorOptions, taskStatus: TaskFailureStatus = 'ERROR') {
    if (taskStatus === 'TIMEOUT') {
      super('RTT_TASK_TIMEOUT', `Task ${options.taskId} exceeded the service's processing time limit (TIMEOUT). Split the work into smaller requests.`, {
        ...options,
        serverMessage: taskMessage,
        retryable: false,
      });
    } else {
      const said = taskMessage ? `: ${taskMessage}` : ' (no message given)';
      // The interface's guidance for ERROR: read the message, retry.
      const advice = taskMessage
        ? 'Read the message: if it names a problem with the input, fix that; otherwise submit the task again, which may succeed.'
        : 'Submitting the task again may succeed.';
      super('RTT_TASK_FAILED', `Task ${options.taskId} failed${said}. ${advice}`, {
        ...options,
        serverMessage: taskMessage,
        retryable: true,
      });
    }
    this.taskId = options.taskId;
    this.taskMessage = taskMessage;
    this.taskStatus = taskStatus;
  }
}

/** A task ended with status TIMEOUT: a `TaskFailedError` whose `taskStatus` is `TIMEOUT`. */
export class TaskTimeoutError extends TaskFailedError {
  constructor(options: TaskErrorOptions) {
    super(undefined, options, 'TIMEOUT');
  }
}

/** Where the service said that credits ran out: an HTTP 402 answer, or a task's final status. */
export type PaymentRequiredOptions = (HttpErrorOptions & { taskId?: undefined }) | TaskErrorOptions;

/**
 * Out of credits at the HTTP interface (a `BillingError`, like a realtime billing stop): a 402
 * answer (`method`, `path` and `status` say which request) or a task that ended
 * PAYMENT_REQUIRED (`taskId` says which). Not retryable: add credits first.
 */
export class PaymentRequiredError extends BillingError {
  /** The task that ended PAYMENT_REQUIRED; undefined for a 402 answer. */
  readonly taskId: string | undefined;
  /** The refused request, for a 402 answer. */
  readonly method: string | undefined;
  readonly path: string | undefined;
  constructor(options: PaymentRequiredOptions) {
    if (options.taskId !== undefined) {
      super(`Task ${options.taskId} was not run: the account has insufficient credits (PAYMENT_REQUIRED). Add credits and submit again.`, {
        ...options,
        retryable: false,
      });
      this.method = undefined;
      this.path = undefined;
    } else {
      const http = options as HttpErrorOptions;
      super(`${where(http)} was refused with 402: the account has insufficient credits. Add credits and try again.${serviceSaid(http)}`, {
        ...http,
        status: 402,
      });
      this.method = http.method;
      this.path = http.path;
    }
    this.taskId = options.taskId;
  }
}

/** @deprecated The same class as `PaymentRequiredError`, which a 402 answer now throws under its one name. */
export const HttpPaymentRequiredError = PaymentRequiredError;
/** @deprecated The same class as `PaymentRequiredError`. */
export type HttpPaymentRequiredError = PaymentRequiredError;

/** What a wait that ran out of time did: how long it lasted, its status reads, the last failure. */
export interface TaskWaitTimeoutOptions extends RtTranslateErrorOptions {
  /** How long the wait lasted, ms. Default `timeoutMs`. */
  waitedMs?: number;
  /** Status reads made (failed ones included). */
  reads?: number;
  /** Status reads that failed (the wait went on after each), and one abandoned at the deadline after them. */
  failedReads?: number;
  /** The error of the last failed read. */
  lastFailure?: unknown;
}

function secondsText(ms: number): string {
  return ms < 10_000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * The client stopped waiting for a task (`maxWaitMs` passed). The task may still finish (and the
 * service bills it): poll it later with `taskId`. The message says how long the wait lasted,
 * how many status reads failed and the last failure, also in `waitedMs`, `reads`,
 * `failedReads` and `lastFailure` (the `cause` as well).
 */
export class TaskWaitTimeoutError extends TimeoutError {
  readonly taskId: string;
  /** The status the task last answered (a new task is PENDING). */
  readonly lastStatus: string;
  readonly waitedMs: number;
  readonly reads: number;
  readonly failedReads: number;
  readonly lastFailure: unknown;
  constructor(taskId: string, lastStatus: string, timeoutMs: number, options: TaskWaitTimeoutOptions = {}) {
    const { waitedMs = timeoutMs, reads = 0, failedReads = 0, lastFailure, ...rest } = options;
    const last = lastFailure instanceof Error ? lastFailure.message.replace(/\.+$/, '') : lastFailure === undefined ? undefined : String(lastFailure);
    const waited = `${secondsText(waitedMs)} (maxWaitMs ${timeoutMs})`;
    const lead =
      reads > 0 && failedReads === reads
        ? `Task ${taskId}: none of its ${reads} status reads succeeded in ${waited}; the last failed with: ${last}.`
        : `Task ${taskId} was still ${lastStatus} after waiting ${waited}` +
          (failedReads > 0 ? `; ${failedReads} of ${reads} status reads failed, the last with: ${last}.` : '.');
    super(`${lead} It may still finish: poll it again later with its task id, or raise maxWaitMs.`, timeoutMs, {
      cause: lastFailure,
      ...rest,
      retryable: true,
    });
    this.taskId = taskId;
    this.lastStatus = lastStatus;
    this.waitedMs = waitedMs;
    this.reads = reads;
    this.failedReads = failedReads;
    this.lastFailure = lastFailure;
  }
}
