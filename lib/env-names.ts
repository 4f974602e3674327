/**
 * The environment variables the library and the command line read, on their own so that code
 * which only names them (the command line's messages) loads nothing else.
 */
export const ENV_API_KEY = 'RT_TRANSLATE_API_KEY';
export const ENV_BASE_URL = 'RT_TRANSLATE_BASE_URL';
export const ENV_REALTIME_URL = 'RT_TRANSLATE_REALTIME_URL';
