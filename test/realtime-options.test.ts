/**
 * RealtimeTranslateStream's options, resolved before any connection: the names in the errors,
 * the defaults, and the key kept out of every message.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, ValidationError } from '../lib/errors.js';
import { resolveRealtimeOptions, type RealtimeTranslateOptions } from '../lib/realtime/realtime-options.js';

const KEY = 'sk-live-0123456789abcdef0123';
const BASE: RealtimeTranslateOptions = { from: 'en-us', to: 'es-es', apiKey: KEY, realtimeUrl: 'ws://127.0.0.1:9' };

function failure(options: Partial<RealtimeTranslateOptions>): ValidationError | ConfigError {
  try {
    resolveRealtimeOptions({ ...BASE, ...options } as RealtimeTranslateOptions);
  } catch (error) {
    return error as ValidationError;
  }
  throw new Error('expected a failure');
}

describe('resolveRealtimeOptions', () => {
  it('resolves the defaults: reconnect on, liveness within about 20 s, 64 KiB appends', () => {
    const o = resolveRealtimeOptions(BASE);
    expect(o.reconnect).toEqual({
      maxAttempts: 8,
      initialDelayMs: 500,
      maxDelayMs: 10_000,
      giveUpAfterMs: 60_000,
      attemptTimeoutMs: 10_000,
      maxReplayMs: 30_000,
    });
    expect(o.pingIntervalMs + o.livenessTimeoutMs).toBe(20_000);
    expect(o.maxAppendBytes).toBe(64 * 1024);
    expect(o.headers['x-api-key']).toBe(KEY);
    expect(o.url.href).toBe('ws://127.0.0.1:9/v1/realtime');
    expect(JSON.parse(o.sessionUpdate)).toEqual({ type: 'session.update', session: { source_language: 'en-us', target_language: 'es-es' } });
  });

  it('reconnect: false turns it off; an object sets its bounds', () => {
    expect(resolveRealtimeOptions({ ...BASE, reconnect: false }).reconnect).toBeUndefined();
    expect(resolveRealtimeOptions({ ...BASE, reconnect: { maxAttempts: 2, maxReplayMs: 5_000 } }).reconnect).toMatchObject({
      maxAttempts: 2,
      maxReplayMs: 5_000,
    });
  });

  it.each([
    ['from', { from: 'xx-yy' }],
    ['to', { to: 'en' }],
    ['voiceId', { voiceId: 0 }],
    ['outputModalities', { outputModalities: ['video'] as never }],
    ['maxAppendBytes', { maxAppendBytes: 3 }],
    ['reconnect', { reconnect: 'yes' as never }],
    ['reconnect.maxAttempts', { reconnect: { maxAttempts: 0 } }],
    ['reconnect.maxReplayMs', { reconnect: { maxReplayMs: -1 } }],
    ['livenessTimeoutMs', { pingIntervalMs: 10_000, livenessTimeoutMs: 5_000 }],
    ['speechThresholdDbfs', { speechThresholdDbfs: 3 }],
    ['signal', { signal: {} as never }],
  ])('a bad %s is a ValidationError naming it', (field, options) => {
    const error = failure(options);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(new RegExp(`^Invalid ${field.replace('.', '\\.')}: expected `));
  });

  it.each([
    ['from', { from: KEY }],
    ['readyTimeoutMs', { readyTimeoutMs: KEY as never }],
    ['voiceId', { voiceId: KEY as never }],
    ['a short key in to', { apiKey: 'k-1234', to: 'k-1234' }],
  ])('a key passed in the wrong option (%s) is not echoed in the error', (_name, options) => {
    const error = failure(options);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).not.toContain(KEY);
    expect(error.message).not.toContain('k-1234');
  });

  it('describes a long string it refuses by its length', () => {
    expect(failure({ readyTimeoutMs: 'x'.repeat(40) as never }).message).toContain('(got a string of 40 characters)');
  });

  it('refuses plain ws:// to a host that is not loopback, naming the option', () => {
    const error = failure({ realtimeUrl: 'ws://example.com' });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toBe('realtimeUrl');
  });
});
