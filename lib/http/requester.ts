/**
 * What the endpoint functions and streams of `lib/http` need from a client (`HttpRequester`),
 * and the options of a request, in a module of their own: every feature module depends on it,
 * and `LocalizationClient` (`client.ts`), which implements it, depends on them.
 */
import type { Readable } from 'node:stream';
import type { FlacDownloadStream, FlacDownloadStreamOptions } from './flac-download-stream.js';
import type { MultipartBody, UploadProgress } from './multipart.js';
import type { HeaderBag, RequestKind, RetrySetting } from './retry.js';
import type { PollingOptions, PollingProfile } from './tasks.js';

/** Options every endpoint call accepts. */
export interface RequestOptions {
  signal?: AbortSignal;
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** This call's retry policy, replacing the client's. */
  retry?: RetrySetting;
  /**
   * Told how much of an upload's body (the multipart calls: transcription, cloning, separation,
   * stories, dictionaries) was handed to the connection, as it goes; a retry starts again at 0.
   */
  onUploadProgress?: (progress: UploadProgress) => void;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One request, as the endpoint functions describe it. */
export interface RequestSpec extends RequestOptions {
  method: HttpMethod;
  /** Interface path such as `/tts-result/12`, appended to the base URL's path. */
  path: string;
  query?: Record<string, string | number | undefined>;
  /** JSON body. */
  json?: unknown;
  /** Multipart body, streamed (see `multipart.ts`); a one-shot body is not retried once read. */
  multipart?: MultipartBody;
  /**
   * `create` requests start paid work and `delete` requests remove something for good: both are
   * retried only where the service did not act (see `retry.ts`).
   */
  kind: RequestKind;
  accept?: string;
  /** Called with the headers of the successful answer (a status read takes the emulator's pace from them). */
  onHeaders?: (headers: HeaderBag) => void;
}

/**
 * What `openFlacDownload` takes: the stream's options without the parts the client supplies
 * (dispatcher, headers, URL safety). Timeouts default to the client's; `maxAttempts` and
 * `retryDelayMs` to its retry setting (or this `retry`).
 */
export interface FlacDownloadRequest extends Omit<FlacDownloadStreamOptions, 'dispatcher' | 'headers' | 'allowInsecure' | 'urlKind' | 'connectTimeoutMs'> {
  /**
   * Send the API key (`x-api-key`). Only to the origin of the client's base URL: any other
   * origin is a `ConfigError`. The URL is then an address of the interface (`urlKind: 'api'`):
   * a 403 from it means the key lacks permission and fails at once, while a 403 from a URL it
   * redirected to (an expired storage URL) starts the download again from it. Presigned URLs
   * need no key; leave this off for them (and pass `refreshUrl`). Default false.
   */
  authenticate?: boolean;
  /** Retry setting the attempt limits derive from, replacing the client's. */
  retry?: RetrySetting;
}

/** Options of a result audio download (`getTtsResultAudio`, `openSeparationTrack`, ...). */
export interface AudioDownloadOptions extends RequestOptions {
  /**
   * Decode the FLAC to PCM16 LE interleaved on the fly, checking the STREAMINFO sample count and
   * MD5 at the end (`IntegrityError` on a mismatch). Default false: the FLAC bytes.
   */
  decode?: boolean;
  /** Attempts in a row without a new byte before giving up. Default: the retry setting's `retries + 1`. */
  maxAttempts?: number;
  /** First back-off between attempts, ms. Default: the retry setting's `minDelayMs`. */
  retryDelayMs?: number;
}

/** `getTtsResultAudio` options. */
export interface TtsResultAudioOptions extends AudioDownloadOptions {
  /**
   * How the audio is fetched. `raw_bytes` (default): `GET /tts-result/{run_id}?output_type=raw_bytes`
   * with the API key. `file_url`: the presigned URL of `output_type=file_url`, downloaded without
   * the key; when it expires (403) mid-download, a fresh one is asked for the same way and the
   * download goes on where it stopped.
   */
  outputType?: 'raw_bytes' | 'file_url';
}

/** The two tracks of an audio separation run. */
export type SeparationTrack = 'foreground' | 'background';

/** `openSeparationTrack` options. */
export interface SeparationTrackOptions extends AudioDownloadOptions {
  /** The presigned URL already known (from a lookup); without it a lookup comes first. */
  url?: string;
}

/** A response whose body the caller consumes (or destroys). */
export interface StreamResponse {
  statusCode: number;
  headers: HeaderBag;
  body: Readable;
}

/** What endpoint functions and streams need from a client. */
export interface HttpRequester {
  /**
   * Sends `spec` and parses its JSON answer. Every string in the answer that came from the
   * service has the API key redacted (see `readServerJson`), so task messages, statuses and
   * per-run errors can go into errors and logs as they are.
   */
  requestJson<T>(spec: RequestSpec): Promise<T>;
  requestStream(spec: RequestSpec): Promise<StreamResponse>;
  /** The polling options of a profile with the client's overrides. */
  pollingFor(profile: PollingProfile): PollingOptions;
  /**
   * The retry setting of requests whose call gives none (the client's `retry` option; undefined:
   * the library's default). Optional: task waits then use the default back-off.
   */
  retrySetting?(): RetrySetting | undefined;
  /**
   * The version of the emulator of this package, once an answer of the base URL announced it
   * (`EMULATOR_HEADER`); undefined for the service. Optional: task waits then keep the schedule.
   */
  readonly emulatorVersion?: string | undefined;
  /** Replaces the key in text that came from elsewhere. */
  redact(text: string): string;
  /** The full URL of an interface path. */
  urlFor(path: string, query?: RequestSpec['query']): URL;
  /** Maps a failure of a body being read (socket reset, timeout) to the library's error. */
  bodyError(error: unknown, spec: RequestSpec): unknown;
  /**
   * A resumable FLAC download over the requester's connections. Optional: without it, result
   * audio is a plain (non-resuming) body stream.
   */
  openFlacDownload?(request: FlacDownloadRequest): FlacDownloadStream;
  /**
   * The service's language lists, cached for the requester's life (the client keeps a
   * `LanguageCatalog`). Optional: without it, each conversion of a locale tag to a language id
   * asks the lists anew.
   */
  readonly languages?: LanguageLookup;
}

/** Locale tags and the service's numeric language ids, both ways, as a requester's cached lists answer them. */
export interface LanguageLookup {
  /** The id of a locale tag (a number passes as it is); `field` names the request field in the error. */
  idOf(tagOrId: string | number, side: 'source' | 'target', field: string, options?: RequestOptions): Promise<number>;
  /** The locale tag of a language id; `field` names the caller's argument in the error. */
  tagOf(id: number, side: 'source' | 'target', field: string, options?: RequestOptions): Promise<string>;
}

/** A requester that can open resumable downloads (the `LocalizationClient` is one). */
export type FlacDownloader = HttpRequester & Required<Pick<HttpRequester, 'openFlacDownload'>>;
