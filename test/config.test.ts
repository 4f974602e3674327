import { describe, expect, it } from 'vitest';
import {
  ENV_API_KEY,
  ENV_BASE_URL,
  ENV_REALTIME_URL,
  REALTIME_PATH,
  isLoopbackHost,
  parseServiceUrl,
  resolveApiKey,
  resolveRealtimeUrl,
} from '../lib/config.js';
import { ConfigError } from '../lib/errors.js';
import { caught } from './helpers/caught.js';

describe('names', () => {
  it('are the documented environment variables and path', () => {
    expect([ENV_API_KEY, ENV_BASE_URL, ENV_REALTIME_URL, REALTIME_PATH]).toEqual([
      'RT_TRANSLATE_API_KEY',
      'RT_TRANSLATE_BASE_URL',
      'RT_TRANSLATE_REALTIME_URL',
      '/v1/realtime',
    ]);
  });
});

describe('isLoopbackHost', () => {
  it.each([
    ['localhost', true],
    ['LocalHost', true],
    ['127.0.0.1', true],
    ['127.5.6.7', true],
    ['127.255.255.254', true],
    ['::1', true],
    ['[::1]', true],
    ['0:0:0:0:0:0:0:1', true],
    ['::ffff:127.0.0.1', true],
    ['[::ffff:7f00:1]', true],
    ['example.com', false],
    ['10.0.0.1', false],
    ['0.0.0.0', false],
    ['128.0.0.1', false],
    ['::', false],
    ['[::ffff:a00:1]', false],
    ['127.0.0.1.example.com', false],
    ['localhost.example.com', false],
    ['api.localhost', false],
    ['', false],
  ])('%s -> %s', (host, expected) => {
    expect(isLoopbackHost(host)).toBe(expected);
  });
});

describe('parseServiceUrl', () => {
  it('refuses plain ws:// to a non-loopback host, naming the host and the way out', () => {
    const err = caught(() => parseServiceUrl('ws://example.com', 'realtimeUrl', 'wss:'));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).toMatchObject({ code: 'RTT_CONFIG', field: 'realtimeUrl' });
    const message = (err as Error).message;
    expect(message).toContain('example.com');
    expect(message).toContain('wss://');
    expect(message).toContain('allowInsecure');
  });

  it('accepts plain ws:// to a non-loopback host with allowInsecure', () => {
    const url = parseServiceUrl('ws://example.com:8080/x', 'realtimeUrl', 'wss:', { allowInsecure: true });
    expect(url.href).toBe('ws://example.com:8080/x');
  });

  it.each(['ws://localhost:8080', 'ws://127.0.0.1:8080', 'ws://127.5.6.7', 'ws://[::1]:8080', 'ws://[::ffff:127.0.0.1]:8080'])(
    'accepts plain %s without allowInsecure (loopback)',
    (raw) => {
      expect(parseServiceUrl(raw, 'realtimeUrl', 'wss:').protocol).toBe('ws:');
    },
  );

  it('accepts wss://', () => {
    const url = parseServiceUrl('wss://realtime.example.com/v1/realtime?model=iris', 'realtimeUrl', 'wss:');
    expect(url.href).toBe('wss://realtime.example.com/v1/realtime?model=iris');
  });

  it('applies the same rule to http:// for an https: service', () => {
    expect(caught(() => parseServiceUrl('http://api.example.com', 'baseUrl', 'https:'))).toMatchObject({
      code: 'RTT_CONFIG',
      field: 'baseUrl',
    });
    expect(parseServiceUrl('http://127.0.0.1:3000/apis', 'baseUrl', 'https:').href).toBe('http://127.0.0.1:3000/apis');
    expect(parseServiceUrl('https://api.example.com/apis', 'baseUrl', 'https:').href).toBe('https://api.example.com/apis');
  });

  it.each([
    { raw: 'ftp://example.com', got: 'ftp:' },
    { raw: 'https://realtime.example.com', got: 'https:' },
    { raw: 'file:///tmp/socket', got: 'file:' },
  ])('refuses the scheme of $raw', ({ raw, got }) => {
    const err = caught(() => parseServiceUrl(raw, 'realtimeUrl', 'wss:'));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).toMatchObject({ code: 'RTT_CONFIG', field: 'realtimeUrl' });
    const message = (err as Error).message;
    expect(message).toContain(got);
    expect(message).toContain('wss://');
  });

  it.each(['wss://alice:hunter2-pw@realtime.example.com/', 'wss://:hunter2-pw@realtime.example.com/', 'ws://alice:hunter2-pw@127.0.0.1:8080/'])(
    'refuses credentials in %s without echoing the password',
    (raw) => {
      const err = caught(() => parseServiceUrl(raw, 'realtimeUrl', 'wss:'));
      expect(err).toBeInstanceOf(ConfigError);
      expect(err).toMatchObject({ code: 'RTT_CONFIG', field: 'realtimeUrl' });
      const message = (err as Error).message;
      expect(message).toContain('credentials');
      expect(message).not.toContain('hunter2');
    },
  );

  it('refuses text that is not an absolute URL without echoing it', () => {
    const err = caught(() => parseServiceUrl('realtime.example.com/sk-live-abcdef', 'realtimeUrl', 'wss:'));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).toMatchObject({ code: 'RTT_CONFIG', field: 'realtimeUrl' });
    expect((err as Error).message).not.toContain('sk-live-abcdef');
  });
});

describe('resolveRealtimeUrl', () => {
  const noEnv = { env: {} };

  it.each([
    ['wss://rt.example.com', 'wss://rt.example.com/v1/realtime'],
    ['wss://rt.example.com/', 'wss://rt.example.com/v1/realtime'],
    ['wss://rt.example.com//', 'wss://rt.example.com/v1/realtime'],
    ['wss://rt.example.com/v1/realtime', 'wss://rt.example.com/v1/realtime'],
    ['wss://rt.example.com/v1/realtime/', 'wss://rt.example.com/v1/realtime'],
    ['wss://rt.example.com/proxy', 'wss://rt.example.com/proxy/v1/realtime'],
    ['wss://rt.example.com/proxy/v1/realtime', 'wss://rt.example.com/proxy/v1/realtime'],
    ['ws://127.0.0.1:9000', 'ws://127.0.0.1:9000/v1/realtime'],
    ['wss://rt.example.com?model=iris', 'wss://rt.example.com/v1/realtime?model=iris'],
    ['wss://rt.example.com/v1/realtime?model=lilac', 'wss://rt.example.com/v1/realtime?model=lilac'],
  ])('%s -> %s', (raw, expected) => {
    expect(resolveRealtimeUrl(raw, noEnv)?.href).toBe(expected);
  });

  it('adds query options after the ones in the URL and skips undefined values', () => {
    const options = Object.freeze({ env: {}, query: Object.freeze({ mode: 'fast', voice: undefined }) });
    expect(resolveRealtimeUrl('wss://rt.example.com/?model=iris', options)?.href).toBe('wss://rt.example.com/v1/realtime?model=iris&mode=fast');
  });

  it('lets a query option replace the same parameter in the URL', () => {
    expect(resolveRealtimeUrl('wss://rt.example.com?model=iris', { env: {}, query: { model: 'lilac' } })?.href).toBe(
      'wss://rt.example.com/v1/realtime?model=lilac',
    );
  });

  it('reads RT_TRANSLATE_REALTIME_URL from the passed env', () => {
    const env = { RT_TRANSLATE_REALTIME_URL: 'ws://127.0.0.1:9000/' };
    expect(resolveRealtimeUrl(undefined, { env })?.href).toBe('ws://127.0.0.1:9000/v1/realtime');
  });

  it('prefers the option to the env', () => {
    const env = { RT_TRANSLATE_REALTIME_URL: 'wss://from-env.example.com' };
    expect(resolveRealtimeUrl('wss://from-option.example.com', { env })?.href).toBe('wss://from-option.example.com/v1/realtime');
  });

  it.each([
    { label: 'an empty env', env: {} },
    { label: 'an empty variable', env: { RT_TRANSLATE_REALTIME_URL: '' } },
  ])('returns undefined with no option and $label', ({ env }) => {
    expect(resolveRealtimeUrl(undefined, { env })).toBeUndefined();
  });

  it('applies the plain-text rule to the env value, naming the variable', () => {
    const env = { RT_TRANSLATE_REALTIME_URL: 'ws://rt.example.com' };
    expect(caught(() => resolveRealtimeUrl(undefined, { env }))).toMatchObject({ code: 'RTT_CONFIG', field: 'RT_TRANSLATE_REALTIME_URL' });
    expect(resolveRealtimeUrl(undefined, { env, allowInsecure: true })?.href).toBe('ws://rt.example.com/v1/realtime');
    expect(caught(() => resolveRealtimeUrl(undefined, { env: { RT_TRANSLATE_REALTIME_URL: 'nonsense' } }))).toMatchObject({
      message: 'Invalid RT_TRANSLATE_REALTIME_URL: expected an absolute wss:// URL.',
    });
  });

  it("names the option and the remedies in the caller's words (a command line's flags)", () => {
    const words = { env: {}, field: '--realtime-url', hints: { allowInsecure: 'pass --allow-insecure', apiKey: 'pass --api-key-file' } };
    expect(caught(() => resolveRealtimeUrl('ws://rt.example.com', words))).toMatchObject({
      field: '--realtime-url',
      message: 'Refusing plain-text ws:// to rt.example.com, which is not a loopback host: use wss://, or pass --allow-insecure if you really mean it.',
    });
    expect(caught(() => resolveRealtimeUrl('wss://u:p@rt.example.com', words))).toMatchObject({
      message: 'Invalid --realtime-url: credentials in the URL are not accepted; pass --api-key-file instead.',
    });
    expect(caught(() => resolveRealtimeUrl('ws://rt.example.com', { env: {} }))).toMatchObject({
      message: 'Refusing plain-text ws:// to rt.example.com, which is not a loopback host: use wss://, or set allowInsecure: true if you really mean it.',
    });
    expect(caught(() => resolveApiKey(' ', {}, '--api-key'))).toMatchObject({ field: '--api-key', message: 'Invalid --api-key: expected a non-empty string.' });
  });
});

describe('resolveApiKey', () => {
  it('takes the option before the env', () => {
    expect(resolveApiKey('key-from-option', { RT_TRANSLATE_API_KEY: 'key-from-env' })).toBe('key-from-option');
  });

  it('reads RT_TRANSLATE_API_KEY when the option is absent', () => {
    expect(resolveApiKey(undefined, { RT_TRANSLATE_API_KEY: 'key-from-env' })).toBe('key-from-env');
  });

  it.each([
    { label: 'no variable', env: {} },
    { label: 'an empty variable', env: { RT_TRANSLATE_API_KEY: '' } },
    { label: 'a blank variable', env: { RT_TRANSLATE_API_KEY: '   ' } },
  ])('returns undefined with no option and $label', ({ env }) => {
    expect(resolveApiKey(undefined, env)).toBeUndefined();
  });

  it.each([
    { label: 'an empty string', option: '' },
    { label: 'a blank string', option: '  \t' },
  ])('refuses $label as option with ConfigError, even when the env has a key', ({ option }) => {
    const err = caught(() => resolveApiKey(option, { RT_TRANSLATE_API_KEY: 'key-from-env' }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).toMatchObject({ code: 'RTT_CONFIG', field: 'apiKey' });
    expect((err as Error).message).not.toContain('key-from-env');
  });
});
