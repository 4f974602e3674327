/**
 * The emulator's language lists (`GET /source-languages`, `GET /target-languages`): numeric ids,
 * names and short tags, covering every locale tag the official SDK lists for `/tts-stream` (the
 * realtime side's 14 included). The service's documentation gives a few ids (English 1, Arabic 4,
 * German 31, Spanish 54, French 76, Japanese 88, Mandarin Chinese 139); those are kept, the rest
 * are the emulator's own, so clients must look ids up rather than hard-code them. Two tags are
 * targets only, so a client that confuses the lists is caught.
 */

/** One language record as the service sends it. */
export interface LanguageRecord {
  id: number;
  language: string;
  short_name: string;
}

const NAMES: ReadonlyArray<readonly [string, string]> = [
  ['en-us', 'English (United States)'],
  ['en-uk', 'English (United Kingdom)'],
  ['en-gb', 'English (Great Britain)'],
  ['en-au', 'English (Australia)'],
  ['en-in', 'English (India)'],
  ['es-es', 'Spanish (Spain)'],
  ['es-mx', 'Spanish (Mexico)'],
  ['es-us', 'Spanish (United States)'],
  ['fr-fr', 'French (France)'],
  ['fr-ca', 'French (Canada)'],
  ['fr-be', 'French (Belgium)'],
  ['fr-ch', 'French (Switzerland)'],
  ['de-de', 'German (Germany)'],
  ['de-at', 'German (Austria)'],
  ['de-ch', 'German (Switzerland)'],
  ['it-it', 'Italian (Italy)'],
  ['pt-br', 'Portuguese (Brazil)'],
  ['pt-pt', 'Portuguese (Portugal)'],
  ['nl-nl', 'Dutch (Netherlands)'],
  ['nl-be', 'Dutch (Belgium)'],
  ['pl-pl', 'Polish (Poland)'],
  ['ro-ro', 'Romanian (Romania)'],
  ['cs-cz', 'Czech (Czechia)'],
  ['el-gr', 'Greek (Greece)'],
  ['fi-fi', 'Finnish (Finland)'],
  ['ru-ru', 'Russian (Russia)'],
  ['uk-ua', 'Ukrainian (Ukraine)'],
  ['tr-tr', 'Turkish (Turkey)'],
  ['ar-ae', 'Arabic (United Arab Emirates)'],
  ['ar-eg', 'Arabic (Egypt)'],
  ['ar-sa', 'Arabic (Saudi Arabia)'],
  ['ar-ma', 'Arabic (Morocco)'],
  ['ar-dz', 'Arabic (Algeria)'],
  ['ar-tn', 'Arabic (Tunisia)'],
  ['ar-ly', 'Arabic (Libya)'],
  ['ar-jo', 'Arabic (Jordan)'],
  ['ar-lb', 'Arabic (Lebanon)'],
  ['ar-sy', 'Arabic (Syria)'],
  ['ar-iq', 'Arabic (Iraq)'],
  ['ar-kw', 'Arabic (Kuwait)'],
  ['ar-bh', 'Arabic (Bahrain)'],
  ['ar-qa', 'Arabic (Qatar)'],
  ['ar-om', 'Arabic (Oman)'],
  ['ar-ye', 'Arabic (Yemen)'],
  ['hi-in', 'Hindi (India)'],
  ['bn-in', 'Bengali (India)'],
  ['bn-bd', 'Bengali (Bangladesh)'],
  ['ta-in', 'Tamil (India)'],
  ['te-in', 'Telugu (India)'],
  ['mr-in', 'Marathi (India)'],
  ['kn-in', 'Kannada (India)'],
  ['ml-in', 'Malayalam (India)'],
  ['pa-in', 'Punjabi (India)'],
  ['zh-cn', 'Chinese (Mainland China)'],
  ['zh-tw', 'Chinese (Taiwan)'],
  ['zh-hk', 'Chinese (Hong Kong)'],
  ['ja-jp', 'Japanese (Japan)'],
  ['ko-kr', 'Korean (Korea)'],
  ['th-th', 'Thai (Thailand)'],
  ['vi-vn', 'Vietnamese (Vietnam)'],
  ['id-id', 'Indonesian (Indonesia)'],
  ['as-in', 'Assamese (India)'],
  ['ar-xa', 'Arabic (Modern Standard)'],
];

/** Tags the emulator offers as targets but not as sources. */
const TARGET_ONLY: ReadonlySet<string> = new Set(['as-in', 'ar-xa']);

/** The ids the service's documentation gives; the others count up from 200 in the order above. */
const DOCUMENTED_IDS: Readonly<Record<string, number>> = { 'en-us': 1, 'ar-sa': 4, 'de-de': 31, 'es-es': 54, 'fr-fr': 76, 'ja-jp': 88, 'zh-cn': 139 };

/** Every language. */
export const LANGUAGES: readonly LanguageRecord[] = Object.freeze(
  NAMES.map(([tag, name], i) => ({ id: DOCUMENTED_IDS[tag] ?? 200 + i, language: name, short_name: tag })),
);

export const SOURCE_LANGUAGES: readonly LanguageRecord[] = LANGUAGES.filter((l) => !TARGET_ONLY.has(l.short_name));
export const TARGET_LANGUAGES: readonly LanguageRecord[] = LANGUAGES;

const BY_ID = new Map(LANGUAGES.map((l) => [l.id, l]));
const BY_TAG = new Map(LANGUAGES.map((l) => [l.short_name, l]));

/** The tag of a language id or tag the emulator knows, or undefined. */
export function languageTag(value: unknown): string | undefined {
  if (typeof value === 'number') return BY_ID.get(value)?.short_name;
  if (typeof value === 'string') return BY_TAG.get(value.toLowerCase())?.short_name;
  return undefined;
}

/** The id of a language id or tag the emulator knows, or undefined. */
export function languageId(value: unknown): number | undefined {
  const tag = languageTag(value);
  return tag === undefined ? undefined : BY_TAG.get(tag)!.id;
}
