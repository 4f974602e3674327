/**
 * The one place where the library's camelCase names meet the service's snake_case wire names.
 *
 * Requests: the validation schemas (`validation.ts`) are written over wire names and read the
 * caller's object through `fromWireName`, so `voiceId` is checked and sent as `voice_id`; fields
 * the library does not know yet go out through `toWireName`. Responses: `camelizeKeys` turns a
 * JSON answer's keys into camelCase for the typed result, which keeps the wire body in `raw`.
 * Keys that are not snake_case identifiers (run ids, locale tags) are left as they are.
 */

/** `voiceId` -> `voice_id`, `sampleRate` -> `sample_rate`; a snake_case name is returned unchanged. */
export function toWireName(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** `voice_id` -> `voiceId`, `run_ids` -> `runIds`; a name without underscores is returned unchanged. */
export function fromWireName(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

/** True for a JSON object (not an array, not null). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * A copy of a JSON value with every object key in camelCase (`fromWireName`), at any depth.
 * Strings and numbers are untouched.
 */
export function camelizeKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelizeKeys);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) out[fromWireName(key)] = camelizeKeys(field);
  return out;
}
