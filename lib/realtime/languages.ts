import { ValidationError } from '../errors.js';
import { describeReceived } from '../options.js';

/** The 14 language tags the realtime service accepts, as source or target. */
export const REALTIME_LANGUAGES = [
  'ar-ae',
  'ar-eg',
  'ar-sa',
  'de-de',
  'en-gb',
  'en-us',
  'es-es',
  'fr-ca',
  'fr-fr',
  'hi-in',
  'ja-jp',
  'ko-kr',
  'pt-br',
  'zh-cn',
] as const;

export type RealtimeLanguage = (typeof REALTIME_LANGUAGES)[number];

const known = new Set<string>(REALTIME_LANGUAGES);

/** True when `tag` names a supported language, in any letter case. */
export function isRealtimeLanguage(tag: unknown): boolean {
  return typeof tag === 'string' && known.has(tag.toLowerCase());
}

/**
 * Returns the tag in the service's lowercase form, or throws a `ValidationError` naming
 * `field` and the 14 accepted tags. Matching is case-insensitive (`EN-US` is `en-us`).
 */
export function normalizeRealtimeLanguage(tag: unknown, field: string): RealtimeLanguage {
  if (typeof tag === 'string' && known.has(tag.toLowerCase())) return tag.toLowerCase() as RealtimeLanguage;
  throw new ValidationError(field, `one of the realtime language tags ${REALTIME_LANGUAGES.join(', ')} (case-insensitive)`, describeReceived(tag));
}
