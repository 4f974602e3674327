/**
 * Options and environment: where the service is, which key to use, and whether an address is
 * safe to talk to. Nothing here touches the network.
 */
import { isIP } from 'node:net';
import { ConfigError } from './errors.js';

export const ENV_API_KEY = 'RT_TRANSLATE_API_KEY';
export const ENV_BASE_URL = 'RT_TRANSLATE_BASE_URL';
export const ENV_REALTIME_URL = 'RT_TRANSLATE_REALTIME_URL';

/** The path of the realtime endpoint, appended to the configured realtime host. */
export const REALTIME_PATH = '/v1/realtime';

/** True for `localhost`, any 127.0.0.0/8 address and `::1`. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const family = isIP(host);
  if (family === 4) return host.startsWith('127.');
  if (family === 6) return host === '::1' || host === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(host);
  return false;
}

/**
 * The API key from the option or `RT_TRANSLATE_API_KEY`. `required` makes a missing key a
 * `ConfigError` naming both places it can come from.
 */
export function resolveApiKey(option: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (option !== undefined) {
    if (typeof option !== 'string' || option.trim() === '') {
      throw new ConfigError('apiKey', 'Invalid apiKey: expected a non-empty string.');
    }
    return option;
  }
  const fromEnv = env[ENV_API_KEY];
  return fromEnv && fromEnv.trim() !== '' ? fromEnv : undefined;
}

export interface UrlSafetyOptions {
  /** Allow plain-text `ws://` or `http://` to a host that is not loopback. Off by default. */
  allowInsecure?: boolean;
}

/**
 * Parses a URL given for `field` and refuses plain text (`ws:`/`http:`) to a non-loopback host
 * unless `allowInsecure` is set. Never echoes credentials embedded in the URL.
 */
export function parseServiceUrl(
  raw: string,
  field: string,
  secureProtocol: 'wss:' | 'https:',
  options: UrlSafetyOptions = {},
): URL {
  const plainProtocol = secureProtocol === 'wss:' ? 'ws:' : 'http:';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(field, `Invalid ${field}: expected an absolute ${secureProtocol}// URL.`);
  }
  if (url.protocol !== secureProtocol && url.protocol !== plainProtocol) {
    throw new ConfigError(
      field,
      `Invalid ${field}: expected a ${secureProtocol}// or ${plainProtocol}// URL (got ${url.protocol}//).`,
    );
  }
  if (url.username || url.password) {
    throw new ConfigError(field, `Invalid ${field}: credentials in the URL are not accepted; pass apiKey instead.`);
  }
  if (url.protocol === plainProtocol && !isLoopbackHost(url.hostname) && !options.allowInsecure) {
    throw new ConfigError(
      field,
      `Refusing plain-text ${plainProtocol}// to ${url.hostname}, which is not a loopback host: ` +
        `use ${secureProtocol}//, or set allowInsecure: true if you really mean it.`,
    );
  }
  return url;
}

/**
 * The full realtime endpoint: the configured host (option or `RT_TRANSLATE_REALTIME_URL`) with
 * `/v1/realtime` appended unless it is already there. Query parameters (the beta `model` or
 * `mode` selectors) are kept.
 */
export function resolveRealtimeUrl(
  option: string | undefined,
  options: UrlSafetyOptions & { query?: Record<string, string | undefined>; env?: NodeJS.ProcessEnv } = {},
): URL | undefined {
  const raw = option ?? (options.env ?? process.env)[ENV_REALTIME_URL];
  if (raw === undefined || raw === '') return undefined;
  const url = parseServiceUrl(raw, 'realtimeUrl', 'wss:', options);
  const path = url.pathname.replace(/\/+$/, '');
  if (!path.endsWith(REALTIME_PATH)) url.pathname = path + REALTIME_PATH;
  for (const [key, value] of Object.entries(options.query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, value);
  }
  return url;
}
