/**
 * Request validation for the HTTP interface: the limits of `service-interface.md` (Limits,
 * Endpoints) and `facts.md` (`/tts-stream`), as small schemas over the wire (snake_case) form.
 *
 * One source of truth for both sides: the client runs a schema before sending and throws a
 * `ValidationError` naming the first field at fault and what it accepts; the emulator runs the
 * same schema on what it receives and answers 422 with every issue as `detail[]`
 * (`{loc, msg, type}`, the service's shape).
 *
 * Language fields take a locale tag (`en-us`; any case, sent lowercase). Numeric language ids
 * are still accepted by the service but deprecated: the client passes them on and emits one
 * `DeprecationWarning` (code `RTT_DEP_NUMERIC_LANGUAGE`) per process.
 */
import { ValidationError } from '../errors.js';

export type Loc = (string | number)[];

/** One problem found in a request. `msg` and `type` follow the service's 422 entries. */
export interface FieldIssue {
  loc: Loc;
  msg: string;
  type: string;
  /** What the field accepts, in words (for the client-side `ValidationError`). */
  accepted: string;
  /** A short description of the value received. */
  received?: string;
}

export interface ValidationContext {
  issues: FieldIssue[];
  /** Called for each numeric language id met. */
  onNumericLanguage?: (loc: Loc, id: number) => void;
}

/** Checks `value` at `loc`, records issues, returns the normalized value. */
export type Check = (value: unknown, loc: Loc, ctx: ValidationContext) => unknown;

export interface FieldSpec {
  check: Check;
  /** Missing (undefined) is an issue. */
  required?: boolean;
  /** `null` is accepted as is. */
  nullable?: boolean;
}

/* ----------------------------------------------------------------------------------------- */
/* Limits                                                                                    */

export const PROJECT_NAME_LENGTH = { min: 3, max: 255 } as const;
export const PROJECT_DESCRIPTION_LENGTH = { min: 3, max: 5000 } as const;
export const TTS_STREAM_TEXT_LENGTH = { min: 3, max: 3000 } as const;
export const FORMALITY_VALUES = [1, 2] as const;
export const GENDER_VALUES = [0, 1, 2, 9] as const;
export const SELECTED_AUDIO_TRACKS_COUNT = { min: 1, max: 2 } as const;
export const RUN_IDS_COUNT = { min: 2, max: 5 } as const;
export const DEFAULT_VOICE_ID = 147_320;
export const OUTPUT_FORMATS = [
  'wav',
  'flac',
  'adts',
  'mp3',
  'pcm_s16le',
  'pcm_s16be',
  'pcm_s32le',
  'pcm_s32be',
  'pcm_f32le',
  'pcm_f32be',
] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];
export const OUTPUT_TYPES = ['raw_bytes', 'file_url'] as const;
export type OutputType = (typeof OUTPUT_TYPES)[number];

/* ----------------------------------------------------------------------------------------- */
/* Primitive checks                                                                          */

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}

function issue(ctx: ValidationContext, loc: Loc, type: string, msg: string, accepted: string, value: unknown): undefined {
  ctx.issues.push({ loc, type, msg, accepted, received: describe(value) });
  return undefined;
}

/** A string of `min` to `max` characters. */
export function str(min = 1, max = Number.POSITIVE_INFINITY): Check {
  const accepted =
    max === Number.POSITIVE_INFINITY ? `a string of at least ${min} character${min === 1 ? '' : 's'}` : `a string of ${min} to ${max} characters`;
  return (value, loc, ctx) => {
    if (typeof value !== 'string') return issue(ctx, loc, 'string_type', 'Input should be a valid string', accepted, value);
    if (value.length < min) {
      return issue(ctx, loc, 'string_too_short', `String should have at least ${min} character${min === 1 ? '' : 's'}`, accepted, value);
    }
    if (value.length > max) return issue(ctx, loc, 'string_too_long', `String should have at most ${max} characters`, accepted, value);
    return value;
  };
}

function isInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

/** An integer of at least `min`. */
export function int(min = Number.MIN_SAFE_INTEGER): Check {
  const accepted = min === 1 ? 'a positive integer' : min === 0 ? 'a non-negative integer' : `an integer >= ${min}`;
  return (value, loc, ctx) => {
    if (!isInt(value)) return issue(ctx, loc, 'int_type', 'Input should be a valid integer', accepted, value);
    if (value < min) return issue(ctx, loc, 'greater_than_equal', `Input should be greater than or equal to ${min}`, accepted, value);
    return value;
  };
}

/** A number (integer or not) above 0. */
export function positiveNumber(): Check {
  return (value, loc, ctx) => {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      return issue(ctx, loc, 'float_type', 'Input should be a valid number', 'a positive number', value);
    }
    if (value <= 0) return issue(ctx, loc, 'greater_than', 'Input should be greater than 0', 'a positive number', value);
    return value;
  };
}

/** One of the listed values (numbers or strings). */
export function literal<T extends string | number>(values: readonly T[]): Check {
  const list = values.map((v) => (typeof v === 'string' ? `'${v}'` : String(v)));
  const words = list.length > 1 ? `${list.slice(0, -1).join(', ')} or ${list[list.length - 1]}` : list[0]!;
  return (value, loc, ctx) => {
    if (!values.includes(value as T)) {
      return issue(ctx, loc, typeof values[0] === 'number' ? 'literal_error' : 'enum', `Input should be ${words}`, `one of ${words}`, value);
    }
    return value;
  };
}

export function bool(): Check {
  return (value, loc, ctx) =>
    typeof value === 'boolean' ? value : issue(ctx, loc, 'bool_type', 'Input should be a valid boolean', 'true or false', value);
}

/** Anything; passed through unchanged. */
export function any(): Check {
  return (value) => value;
}

/** A JSON object (not an array); passed through unchanged. */
export function plainObject(): Check {
  return (value, loc, ctx) =>
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? value
      : issue(ctx, loc, 'dict_type', 'Input should be a valid dictionary', 'an object', value);
}

export interface ArrayRules {
  min?: number;
  max?: number;
  unique?: boolean;
}

/** An array of `min` to `max` items, each checked by `item`. */
export function array(item: Check, rules: ArrayRules = {}): Check {
  const min = rules.min ?? 0;
  const max = rules.max ?? Number.POSITIVE_INFINITY;
  const count = max === Number.POSITIVE_INFINITY ? `at least ${min}` : min === max ? `exactly ${min}` : `${min} to ${max}`;
  const accepted = `an array of ${count} item${max === 1 ? '' : 's'}${rules.unique ? ', without duplicates' : ''}`;
  return (value, loc, ctx) => {
    if (!Array.isArray(value)) return issue(ctx, loc, 'list_type', 'Input should be a valid list', accepted, value);
    if (value.length < min) {
      return issue(ctx, loc, 'too_short', `List should have at least ${min} item${min === 1 ? '' : 's'} after validation, not ${value.length}`, accepted, value);
    }
    if (value.length > max) {
      return issue(ctx, loc, 'too_long', `List should have at most ${max} item${max === 1 ? '' : 's'} after validation, not ${value.length}`, accepted, value);
    }
    const out: unknown[] = [];
    const before = ctx.issues.length;
    value.forEach((element, index) => out.push(item(element, [...loc, index], ctx)));
    if (ctx.issues.length > before) return undefined;
    if (rules.unique) {
      const seen = new Set<unknown>();
      for (let i = 0; i < out.length; i++) {
        if (seen.has(out[i])) return issue(ctx, [...loc, i], 'value_error', `Value error, duplicate item ${describe(out[i])}`, accepted, value);
        seen.add(out[i]);
      }
    }
    return out;
  };
}

const LOCALE_TAG = /^[a-z]{2,3}(-[a-z0-9]{2,8})*$/i;

/**
 * A locale tag such as `en-us` (returned lowercase), or a deprecated numeric language id (a
 * positive integer, reported through `ctx.onNumericLanguage`).
 */
export function language(): Check {
  const accepted = 'a locale tag such as "en-us" (numeric language ids are deprecated but accepted)';
  return (value, loc, ctx) => {
    if (isInt(value) && value >= 1) {
      ctx.onNumericLanguage?.(loc, value);
      return value;
    }
    if (typeof value === 'string' && LOCALE_TAG.test(value)) return value.toLowerCase();
    return issue(ctx, loc, 'value_error', 'Value error, expected a locale tag such as en-us or a positive language id', accepted, value);
  };
}

/** An absolute `http:` or `https:` URL. */
export function httpUrl(): Check {
  const accepted = 'an absolute http:// or https:// URL';
  return (value, loc, ctx) => {
    if (typeof value !== 'string') return issue(ctx, loc, 'url_type', 'URL input should be a string or URL', accepted, value);
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return issue(ctx, loc, 'url_parsing', 'Input should be a valid URL, relative URL without a base', accepted, value);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return issue(ctx, loc, 'url_scheme', "URL scheme should be 'http' or 'https'", accepted, value);
    }
    if (!url.hostname) return issue(ctx, loc, 'url_parsing', 'Input should be a valid URL, empty host', accepted, value);
    return value;
  };
}

/**
 * An object with the given fields. Unknown fields are passed through unchecked (the service
 * may accept fields this library does not know yet); `undefined` fields are dropped.
 */
export function object(shape: Record<string, FieldSpec>): Check {
  return (value, loc, ctx) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return issue(ctx, loc, 'model_attributes_type', 'Input should be a valid dictionary or object to extract fields from', 'an object', value);
    }
    const input = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(input)) {
      if (!(key in shape) && field !== undefined) out[key] = field;
    }
    for (const [key, spec] of Object.entries(shape)) {
      const field = input[key];
      if (field === undefined) {
        if (spec.required) issue(ctx, [...loc, key], 'missing', 'Field required', 'a value (required)', field);
        continue;
      }
      if (field === null && spec.nullable) {
        out[key] = null;
        continue;
      }
      const normalized = spec.check(field, [...loc, key], ctx);
      if (normalized !== undefined) out[key] = normalized;
    }
    return out;
  };
}

const req = (check: Check): FieldSpec => ({ check, required: true });
const opt = (check: Check): FieldSpec => ({ check, nullable: true });

/* ----------------------------------------------------------------------------------------- */
/* Request schemas (wire form)                                                               */

const projectName = opt(str(PROJECT_NAME_LENGTH.min, PROJECT_NAME_LENGTH.max));
const projectDescription = opt(str(PROJECT_DESCRIPTION_LENGTH.min, PROJECT_DESCRIPTION_LENGTH.max));
const chosenDictionaries = opt(array(int(1), { min: 1 }));

export const translatedTtsSchema = object({
  text: req(str(1)),
  voice_id: { check: int(1) },
  source_language: req(language()),
  target_language: req(language()),
  project_name: projectName,
  project_description: projectDescription,
  age: opt(int(0)),
  formality: opt(literal(FORMALITY_VALUES)),
  gender: opt(literal(GENDER_VALUES)),
  chosen_dictionaries: chosenDictionaries,
});

export const projectSetupSchema = object({
  media_url: req(httpUrl()),
  source_language: req(language()),
  target_languages: req(array(language(), { min: 1 })),
  project_name: projectName,
  project_description: projectDescription,
  selected_audio_tracks: opt(array(int(0), { min: SELECTED_AUDIO_TRACKS_COUNT.min, max: SELECTED_AUDIO_TRACKS_COUNT.max })),
  add_output_as_an_audio_track: opt(bool()),
  chosen_dictionaries: chosenDictionaries,
  folder_id: opt(int(1)),
});

export const legacyTtsSchema = object({
  text: req(str(1)),
  voice_id: { check: int(1) },
  language: req(language()),
  project_name: projectName,
  project_description: projectDescription,
  gender: { check: literal(GENDER_VALUES) },
  age: { check: any(), nullable: true },
});

export const ttsStreamSchema = object({
  text: req(str(TTS_STREAM_TEXT_LENGTH.min, TTS_STREAM_TEXT_LENGTH.max)),
  language: req(language()),
  voice_id: req(int(1)),
  speech_model: { check: str(1) },
  output_configuration: {
    check: object({
      format: { check: literal(OUTPUT_FORMATS) },
      sample_rate: { check: int(1) },
      duration: { check: positiveNumber() },
      apply_enhancement: { check: bool() },
    }),
  },
  voice_settings: opt(plainObject()),
  inference_options: opt(plainObject()),
  user_instructions: opt(str(1)),
});

export const audioSeparationResultsSchema = object({
  run_ids: req(array(int(1), { min: RUN_IDS_COUNT.min, max: RUN_IDS_COUNT.max, unique: true })),
});

/** Path and query parameters, checked with the same machinery. */
export const runIdParam = int(1);
export const voiceIdParam = int(1);
export const taskIdParam = str(1, 512);
export const outputTypeParam = literal(OUTPUT_TYPES);

/* ----------------------------------------------------------------------------------------- */
/* Running a schema                                                                          */

/** Runs `check` and returns the normalized value and every issue (the emulator's form). */
export function collectIssues(check: Check, value: unknown, loc: Loc = [], onNumericLanguage?: ValidationContext['onNumericLanguage']): {
  value: unknown;
  issues: FieldIssue[];
} {
  const ctx: ValidationContext = { issues: [], onNumericLanguage };
  const normalized = check(value, loc, ctx);
  return { value: normalized, issues: ctx.issues };
}

/** The client-side error for the first issue, naming the field as a dotted path. */
export function toValidationError(first: FieldIssue): ValidationError {
  const field = first.loc.length > 0 ? first.loc.join('.') : 'request';
  return new ValidationError(field, first.accepted, first.received);
}

const warned = new Set<string>();

/**
 * Emits a `DeprecationWarning` with `code` once per process. Returns whether it was emitted
 * now (false when it had been already).
 */
export function warnOnce(code: string, message: string): boolean {
  if (warned.has(code)) return false;
  warned.add(code);
  process.emitWarning(message, { type: 'DeprecationWarning', code });
  return true;
}

export const NUMERIC_LANGUAGE_WARNING = 'RTT_DEP_NUMERIC_LANGUAGE';

function warnNumericLanguage(loc: Loc, id: number): void {
  warnOnce(
    NUMERIC_LANGUAGE_WARNING,
    `Numeric language ids are deprecated by the service (${loc.join('.')} = ${id}); pass a locale tag such as "en-us".`,
  );
}

/**
 * Client-side validation: returns the normalized wire body or throws a `ValidationError` for
 * the first issue. `prefix` names where the value sits (e.g. `['run_id']` for a path param).
 */
export function validate<T>(check: Check, value: unknown, prefix: Loc = []): T {
  const { value: normalized, issues } = collectIssues(check, value, prefix, warnNumericLanguage);
  if (issues.length > 0) throw toValidationError(issues[0]!);
  return normalized as T;
}
