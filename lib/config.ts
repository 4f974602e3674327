/**
 * Options and environment: where the service is, which key to use, and whether an address is
 * safe to talk to. Nothing here touches the network.
 */
import { isIP } from 'node:net';
import { ENV_API_KEY, ENV_REALTIME_URL } from './env-names.js';
import { ConfigError } from './errors.js';

export { ENV_API_KEY, ENV_BASE_URL, ENV_REALTIME_URL } from './env-names.js';

/** The path of the realtime endpoint, appended to the configured realtime host. */
export const REALTIME_PATH = '/v1/realtime';

/**
 * True for `localhost`, any 127.0.0.0/8 address and `::1`. Names under `.localhost` are not
 * trusted: many resolvers send them to DNS, so plain text to them could leave the machine.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 4) return host.startsWith('127.');
  if (family === 6) {
    // IPv4-mapped 127.0.0.0/8, both as written (::ffff:127.0.0.1) and as the URL parser
    // normalises it (::ffff:7f00:1).
    return host === '::1' || host === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(host) || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(host);
  }
  return false;
}

/**
 * The API key from the option or, when the option is absent, `RT_TRANSLATE_API_KEY`. An option
 * that is empty or blank is a `ConfigError` (never silently replaced by the environment); a
 * blank variable counts as absent. Returns `undefined` when neither gives a key: the caller
 * decides whether that is an error. The key itself never appears in an error message; `field`
 * is how messages name the option.
 */
export function resolveApiKey(option: string | undefined, env: NodeJS.ProcessEnv = process.env, field = 'apiKey'): string | undefined {
  if (option !== undefined) {
    if (typeof option !== 'string' || option.trim() === '') {
      throw new ConfigError(field, `Invalid ${field}: expected a non-empty string.`);
    }
    return option;
  }
  const fromEnv = env[ENV_API_KEY];
  return fromEnv && fromEnv.trim() !== '' ? fromEnv : undefined;
}

export interface UrlSafetyOptions {
  /** Allow plain-text `ws://` or `http://` to a host that is not loopback. Off by default. */
  allowInsecure?: boolean;
  /**
   * How messages tell the user to do things, for a caller with its own words (a command line's
   * flags): allowing plain text (default `set allowInsecure: true`) and giving the key (default
   * `pass apiKey`).
   */
  hints?: { allowInsecure?: string; apiKey?: string };
}

/**
 * Parses a URL given for `field` and refuses plain text (`ws:`/`http:`) to a non-loopback host
 * unless `allowInsecure` is set. Never echoes credentials embedded in the URL.
 */
export function parseServiceUrl(raw: string, field: string, secureProtocol: 'wss:' | 'https:', options: UrlSafetyOptions = {}): URL {
  const plainProtocol = secureProtocol === 'wss:' ? 'ws:' : 'http:';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(field, `Invalid ${field}: expected an absolute ${secureProtocol}// URL.`);
  }
  if (url.protocol !== secureProtocol && url.protocol !== plainProtocol) {
    throw new ConfigError(field, `Invalid ${field}: expected a ${secureProtocol}// or ${plainProtocol}// URL (got ${url.protocol}//).`);
  }
  if (url.username || url.password) {
    throw new ConfigError(field, `Invalid ${field}: credentials in the URL are not accepted; ${options.hints?.apiKey ?? 'pass apiKey'} instead.`);
  }
  if (url.protocol === plainProtocol && !isLoopbackHost(url.hostname) && !options.allowInsecure) {
    throw new ConfigError(
      field,
      `Refusing plain-text ${plainProtocol}// to ${url.hostname}, which is not a loopback host: ` +
        `use ${secureProtocol}//, or ${options.hints?.allowInsecure ?? 'set allowInsecure: true'} if you really mean it.`,
    );
  }
  return url;
}

/**
 * An endpoint on the realtime host: the configured host (option or `RT_TRANSLATE_REALTIME_URL`)
 * with `path` appended unless it is already there (a trailing slash dropped), and `query` set.
 * Undefined when no host is configured. Messages name where the URL came from: `field`
 * (default `realtimeUrl`) for the option, the variable for the environment.
 */
export function resolveRealtimeEndpoint(
  option: string | undefined,
  path: string,
  options: UrlSafetyOptions & { query?: Record<string, string | undefined>; env?: NodeJS.ProcessEnv; field?: string } = {},
): URL | undefined {
  const raw = option ?? (options.env ?? process.env)[ENV_REALTIME_URL];
  if (raw === undefined || raw === '') return undefined;
  const url = parseServiceUrl(raw, option !== undefined ? (options.field ?? 'realtimeUrl') : ENV_REALTIME_URL, 'wss:', options);
  const base = url.pathname.replace(/\/+$/, '');
  url.pathname = base.endsWith(path) ? base : base + path;
  for (const [key, value] of Object.entries(options.query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, value);
  }
  return url;
}

/** The realtime speech-to-speech endpoint: the host with `/v1/realtime` (see `resolveRealtimeEndpoint`). */
export function resolveRealtimeUrl(
  option: string | undefined,
  options: UrlSafetyOptions & { query?: Record<string, string | undefined>; env?: NodeJS.ProcessEnv; field?: string } = {},
): URL | undefined {
  return resolveRealtimeEndpoint(option, REALTIME_PATH, options);
}
