/**
 * The locale tags the service documents, as types: a field typed `OpenUnion<LanguageTag>` offers
 * every documented tag to an editor's completion and still takes any other string, so a tag the
 * service adds later needs no new release. Which tags a request really takes is decided at run
 * time: the realtime streams check theirs against the 14 of `REALTIME_LANGUAGES`, the HTTP
 * requests against the service's own lists (`GET /source-languages`, `/target-languages`).
 */

/**
 * The tags of the HTTP interface's languages: those the service's official SDK lists for speech
 * (`POST /tts-stream`), and `en-gb`, a realtime tag the SDK's list leaves out.
 */
export const LANGUAGE_TAGS = [
  'ar-ae',
  'ar-bh',
  'ar-dz',
  'ar-eg',
  'ar-iq',
  'ar-jo',
  'ar-kw',
  'ar-lb',
  'ar-ly',
  'ar-ma',
  'ar-om',
  'ar-qa',
  'ar-sa',
  'ar-sy',
  'ar-tn',
  'ar-xa',
  'ar-ye',
  'as-in',
  'bn-bd',
  'bn-in',
  'cs-cz',
  'de-at',
  'de-ch',
  'de-de',
  'el-gr',
  'en-au',
  'en-gb',
  'en-in',
  'en-uk',
  'en-us',
  'es-es',
  'es-mx',
  'es-us',
  'fi-fi',
  'fr-be',
  'fr-ca',
  'fr-ch',
  'fr-fr',
  'hi-in',
  'id-id',
  'it-it',
  'ja-jp',
  'kn-in',
  'ko-kr',
  'ml-in',
  'mr-in',
  'nl-be',
  'nl-nl',
  'pa-in',
  'pl-pl',
  'pt-br',
  'pt-pt',
  'ro-ro',
  'ru-ru',
  'ta-in',
  'te-in',
  'th-th',
  'tr-tr',
  'uk-ua',
  'vi-vn',
  'zh-cn',
  'zh-hk',
  'zh-tw',
] as const;

/** A tag of `LANGUAGE_TAGS`. */
export type LanguageTag = (typeof LANGUAGE_TAGS)[number];

/**
 * One of the literals `T`, offered by an editor's completion, or any other string: the literals
 * guide, the run-time checks decide.
 */
export type OpenUnion<T extends string> = T | (string & {});
