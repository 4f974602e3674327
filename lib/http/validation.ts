/**
 * Request validation for the HTTP interface: small composable checks over the wire form
 * (snake_case field names), run by both sides. The request schemas themselves are in
 * `schemas.ts`.
 *
 * - The client runs a schema on the caller's camelCase object (`validate`): each wire field is
 *   read under its camelCase name (`wire.ts`), the result is the wire body, and the first issue
 *   becomes a `ValidationError` naming the field as the caller wrote it and what it accepts.
 * - The emulator runs the same schema on what it received (`collectIssues`) and answers 422 with
 *   every issue as `detail[]` (`{loc, msg, type}`, the service's shape). Multipart form fields
 *   arrive as text: `form: true` reads numbers, booleans and repeated fields from it.
 *
 * Language fields take a locale tag (`en-us`; any case, sent lowercase) or a numeric language id.
 * Where the interface deprecates ids, the client reports the deprecation (code
 * `RTT_DEP_NUMERIC_LANGUAGE`; `../deprecations.ts`).
 */
import { ValidationError } from '../errors.js';
import { reportDeprecation } from '../deprecations.js';
import { fromWireName, isPlainObject, toWireName } from './wire.js';

/** Where a value sits in a request: field names and array indexes from the top, e.g. `['texts', 2]`. */
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

/** What a running check writes to and reads: the issues found so far and how the input is written. */
export interface ValidationContext {
  issues: FieldIssue[];
  /** Called for each deprecated numeric language id met. */
  onNumericLanguage?: (loc: Loc, id: number) => void;
  /** The input's field names: the caller's camelCase (client) or the wire's snake_case. Default wire. */
  names?: 'camel' | 'wire';
  /** The input is multipart form text: numbers, booleans and single array items come as strings. */
  form?: boolean;
}

/** Checks `value` at `loc`, records issues, returns the normalized value. */
export type Check = (value: unknown, loc: Loc, ctx: ValidationContext) => unknown;

export interface FieldSpec {
  check: Check;
  /** Missing (undefined) is an issue. */
  required?: boolean;
  /** `null` is accepted as is. */
  nullable?: boolean;
  /** Used when the field is missing (the service's schema default). */
  default?: unknown;
}

/* ----------------------------------------------------------------------------------------- */
/* Primitive checks                                                                          */

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return value.length > 40 ? `a string of ${characterCount(value)} characters` : JSON.stringify(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}

function issue(ctx: ValidationContext, loc: Loc, type: string, msg: string, accepted: string, value: unknown): undefined {
  ctx.issues.push({ loc, type, msg, accepted, received: describe(value) });
  return undefined;
}

/** In form mode, a number written as text is a number. */
function formNumber(value: unknown, ctx: ValidationContext): unknown {
  return ctx.form && typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value.trim()) ? Number(value) : value;
}

/**
 * Characters of `text` as the service counts them: Unicode code points, so an emoji or a CJK
 * extension character outside the Basic Multilingual Plane is one, not the two UTF-16 units of
 * `text.length`.
 */
export function characterCount(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** A string of `min` to `max` characters (code points, see `characterCount`). */
export function str(min = 1, max = Number.POSITIVE_INFINITY): Check {
  const accepted =
    max === Number.POSITIVE_INFINITY ? `a string of at least ${min} character${min === 1 ? '' : 's'}` : `a string of ${min} to ${max} characters`;
  return (value, loc, ctx) => {
    if (typeof value !== 'string') return issue(ctx, loc, 'string_type', 'Input should be a valid string', accepted, value);
    // UTF-16 units are never fewer than code points: count only where the length could matter.
    const length = value.length > max || value.length < 2 * min ? characterCount(value) : value.length;
    if (length < min) {
      return issue(ctx, loc, 'string_too_short', `String should have at least ${min} character${min === 1 ? '' : 's'}`, accepted, value);
    }
    if (length > max) return issue(ctx, loc, 'string_too_long', `String should have at most ${max} characters`, accepted, value);
    return value;
  };
}

function isInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

/** An integer from `min` to `max`. */
export function int(min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): Check {
  const accepted =
    max !== Number.MAX_SAFE_INTEGER
      ? `an integer from ${min} to ${max}`
      : min === 1
        ? 'a positive integer'
        : min === 0
          ? 'a non-negative integer'
          : `an integer >= ${min}`;
  return (raw, loc, ctx) => {
    const value = formNumber(raw, ctx);
    if (!isInt(value)) return issue(ctx, loc, 'int_type', 'Input should be a valid integer', accepted, raw);
    if (value < min) return issue(ctx, loc, 'greater_than_equal', `Input should be greater than or equal to ${min}`, accepted, value);
    if (value > max) return issue(ctx, loc, 'less_than_equal', `Input should be less than or equal to ${max}`, accepted, value);
    return value;
  };
}

/** A finite number above `min` (exclusive, default 0) and at most `max`. */
export function positiveNumber(max = Number.POSITIVE_INFINITY, min = 0): Check {
  const accepted = max === Number.POSITIVE_INFINITY ? (min === 0 ? 'a positive number' : `a number above ${min}`) : `a number above ${min} and at most ${max}`;
  return (raw, loc, ctx) => {
    const value = formNumber(raw, ctx);
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      return issue(ctx, loc, 'float_type', 'Input should be a valid number', accepted, raw);
    }
    if (value <= min) return issue(ctx, loc, 'greater_than', `Input should be greater than ${min}`, accepted, value);
    if (value > max) return issue(ctx, loc, 'less_than_equal', `Input should be less than or equal to ${max}`, accepted, value);
    return value;
  };
}

/** A finite number from `min` to `max`, both included. */
export function numberIn(min: number, max: number): Check {
  const accepted = `a number from ${min} to ${max}`;
  return (raw, loc, ctx) => {
    const value = formNumber(raw, ctx);
    if (typeof value !== 'number' || !Number.isFinite(value)) return issue(ctx, loc, 'float_type', 'Input should be a valid number', accepted, raw);
    if (value < min) return issue(ctx, loc, 'greater_than_equal', `Input should be greater than or equal to ${min}`, accepted, value);
    if (value > max) return issue(ctx, loc, 'less_than_equal', `Input should be less than or equal to ${max}`, accepted, value);
    return value;
  };
}

/** One of the listed values (numbers or strings). */
export function literal<T extends string | number>(values: readonly T[]): Check {
  const list = values.map((v) => (typeof v === 'string' ? `'${v}'` : String(v)));
  const words = list.length > 1 ? `${list.slice(0, -1).join(', ')} or ${list[list.length - 1]}` : list[0]!;
  const numeric = typeof values[0] === 'number';
  return (raw, loc, ctx) => {
    const value = numeric ? formNumber(raw, ctx) : raw;
    if (!values.includes(value as T)) {
      return issue(ctx, loc, numeric ? 'literal_error' : 'enum', `Input should be ${words}`, `one of ${words}`, raw);
    }
    return value;
  };
}

export function bool(): Check {
  return (raw, loc, ctx) => {
    const value = ctx.form && (raw === 'true' || raw === 'false') ? raw === 'true' : raw;
    return typeof value === 'boolean' ? value : issue(ctx, loc, 'bool_type', 'Input should be a valid boolean', 'true or false', raw);
  };
}

/** Anything; passed through unchanged. */
export function any(): Check {
  return (value) => value;
}

/** A JSON object (not an array); passed through unchanged, keys included. */
export function plainObject(): Check {
  return (value, loc, ctx) => (isPlainObject(value) ? value : issue(ctx, loc, 'dict_type', 'Input should be a valid dictionary', 'an object', value));
}

export interface ArrayRules {
  min?: number;
  max?: number;
  unique?: boolean;
}

/** An array of `min` to `max` items, each checked by `item`. In form mode one value is an array of one. */
export function array(item: Check, rules: ArrayRules = {}): Check {
  const min = rules.min ?? 0;
  const max = rules.max ?? Number.POSITIVE_INFINITY;
  const count = max === Number.POSITIVE_INFINITY ? `at least ${min}` : min === max ? `exactly ${min}` : `${min} to ${max}`;
  const accepted = `an array of ${count} item${max === 1 ? '' : 's'}${rules.unique ? ', without duplicates' : ''}`;
  return (raw, loc, ctx) => {
    const value = ctx.form && !Array.isArray(raw) ? [raw] : raw;
    if (!Array.isArray(value)) return issue(ctx, loc, 'list_type', 'Input should be a valid list', accepted, value);
    if (value.length < min) {
      return issue(
        ctx,
        loc,
        'too_short',
        `List should have at least ${min} item${min === 1 ? '' : 's'} after validation, not ${value.length}`,
        accepted,
        value,
      );
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

export interface LanguageRules {
  /**
   * The interface deprecates numeric ids here: `ctx.onNumericLanguage` is told of each (the
   * client warns once). Default true. False for the endpoints whose published description
   * takes ids.
   */
  deprecatedIds?: boolean;
}

/**
 * A locale tag such as `en-us` (returned lowercase), or a numeric language id (a positive
 * integer). See `LanguageRules` for which of the two is deprecated where.
 */
export function language(rules: LanguageRules = {}): Check {
  const deprecated = rules.deprecatedIds ?? true;
  const accepted = deprecated
    ? 'a locale tag such as "en-us" (numeric language ids are deprecated but accepted)'
    : 'a locale tag such as "en-us" or a numeric language id';
  return (raw, loc, ctx) => {
    const value = formNumber(raw, ctx);
    if (isInt(value) && value >= 1) {
      if (deprecated) ctx.onNumericLanguage?.(loc, value);
      return value;
    }
    if (typeof value === 'string' && LOCALE_TAG.test(value)) return value.toLowerCase();
    return issue(ctx, loc, 'value_error', 'Value error, expected a locale tag such as en-us or a positive language id', accepted, raw);
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

/** A rule over a whole object, run once its fields passed: returns an issue's parts or undefined. */
export type ObjectRule = (value: Record<string, unknown>) => { field: string; msg: string; accepted: string } | undefined;

/**
 * An object with the given fields, keyed by wire name; the result always has wire names. With
 * `ctx.names === 'camel'` each field is read under its camelCase name, a wire name given where
 * the camelCase one is expected is an issue (so it cannot slip past the checks), and unknown
 * fields (the service may accept fields this library does not know yet) go out under their
 * wire names. `undefined` fields are dropped; `rules` run when every field passed.
 */
export function object(shape: Record<string, FieldSpec>, rules: ObjectRule[] = []): Check {
  return (value, loc, ctx) => {
    if (!isPlainObject(value)) {
      return issue(ctx, loc, 'model_attributes_type', 'Input should be a valid dictionary or object to extract fields from', 'an object', value);
    }
    const camel = ctx.names === 'camel';
    const nameOf = (wire: string): string => (camel ? fromWireName(wire) : wire);
    const out: Record<string, unknown> = {};
    const before = ctx.issues.length;
    for (const [wire, spec] of Object.entries(shape)) {
      const name = nameOf(wire);
      let field = value[name];
      if (field === undefined) field = spec.default;
      if (field === undefined) {
        if (spec.required) issue(ctx, [...loc, name], 'missing', 'Field required', 'a value (required)', field);
        continue;
      }
      if (field === null && spec.nullable) {
        out[wire] = null;
        continue;
      }
      const normalized = spec.check(field, [...loc, name], ctx);
      if (normalized !== undefined) out[wire] = normalized;
    }
    for (const [key, field] of Object.entries(value)) {
      if (field === undefined) continue;
      if (camel && key in shape && nameOf(key) !== key) {
        const name = nameOf(key);
        issue(ctx, [...loc, key], 'extra_forbidden', `Extra inputs are not permitted (this field is named ${name})`, `the camelCase name ${name}`, field);
        continue;
      }
      const wire = camel ? toWireName(key) : key;
      if (!(wire in shape)) out[wire] = field;
    }
    if (ctx.issues.length === before) {
      for (const rule of rules) {
        const broken = rule(out);
        if (broken) issue(ctx, [...loc, nameOf(broken.field)], 'value_error', `Value error, ${broken.msg}`, broken.accepted, out[broken.field]);
      }
    }
    return out;
  };
}

export const req = (check: Check): FieldSpec => ({ check, required: true });
export const opt = (check: Check): FieldSpec => ({ check, nullable: true });

/* ----------------------------------------------------------------------------------------- */
/* Running a schema                                                                          */

export interface CollectOptions extends Pick<ValidationContext, 'names' | 'form' | 'onNumericLanguage'> {
  /** Where the value sits (e.g. `['run_id']` for a path parameter). */
  loc?: Loc;
}

/** Runs `check` and returns the normalized value and every issue (the emulator's form by default). */
export function collectIssues(check: Check, value: unknown, options: CollectOptions = {}): { value: unknown; issues: FieldIssue[] } {
  const ctx: ValidationContext = { issues: [], names: options.names ?? 'wire', form: options.form, onNumericLanguage: options.onNumericLanguage };
  const normalized = check(value, options.loc ?? [], ctx);
  return { value: normalized, issues: ctx.issues };
}

/** The client-side error for the first issue, naming the field as a dotted path. */
export function toValidationError(first: FieldIssue): ValidationError {
  const field = first.loc.length > 0 ? first.loc.join('.') : 'request';
  return new ValidationError(field, first.accepted, first.received);
}

/** The code of the deprecation reported for a numeric language id (`../deprecations.ts`). */
export const NUMERIC_LANGUAGE_WARNING = 'RTT_DEP_NUMERIC_LANGUAGE';

function warnNumericLanguage(loc: Loc, id: number): void {
  reportDeprecation(NUMERIC_LANGUAGE_WARNING, { field: loc.join('.'), value: id });
}

/**
 * Client-side validation of a caller's camelCase value: returns the normalized wire body or
 * throws a `ValidationError` for the first issue. `prefix` names where the value sits (e.g.
 * `['runId']` for a path parameter).
 */
export function validate<T>(check: Check, value: unknown, prefix: Loc = []): T {
  const { value: normalized, issues } = collectIssues(check, value, { loc: prefix, names: 'camel', onNumericLanguage: warnNumericLanguage });
  if (issues.length > 0) throw toValidationError(issues[0]!);
  return normalized as T;
}
