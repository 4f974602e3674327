/**
 * One checker for numeric options, so every stream names the option, states what it accepts and
 * what it got in the same words, and never echoes a long string it was given (a key pasted into
 * the wrong option stays out of the message).
 */
import { ValidationError } from './errors.js';

/** Strings longer than this are described by their length, never quoted. */
const MAX_ECHOED_STRING = 24;

/** A received value as it may appear in an error message. */
export function describeReceived(value: unknown): string {
  if (typeof value === 'string') {
    return value.length <= MAX_ECHOED_STRING ? JSON.stringify(value) : `a string of ${value.length} characters`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value !== 'object') return typeof value;
  // A class instance is named by its class (`an object (Map)`); a plain object is just that.
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? `an object (${name})` : 'an object';
}

/** `phrase` after "a" or "an", chosen by its first letter (`an audio-separation run`, `a translation run`). */
export function withArticle(phrase: string): string {
  return `${/^[aeiou]/i.test(phrase) ? 'an' : 'a'} ${phrase}`;
}

export interface NumberBounds {
  /** Smallest accepted value. */
  min?: number;
  /** Accepted values are greater than this (`above: 0`: positive). */
  above?: number;
  max?: number;
  /** The value when the option is absent; without one, the option is required. */
  fallback?: number;
  /** `Infinity` is accepted ("no limit"); numbers are otherwise finite. */
  infinity?: boolean;
  /** What is accepted, in the option's own words (`a positive number of milliseconds`); by default said from the bounds. */
  accepted?: string;
}

function accepted(kind: string, { min, above, max }: NumberBounds): string {
  const low = min !== undefined ? `>= ${min}` : above !== undefined ? `> ${above}` : undefined;
  if (min !== undefined && max !== undefined) return `${kind} from ${min} to ${max}`;
  if (low !== undefined && max !== undefined) return `${kind} ${low} and <= ${max}`;
  if (low !== undefined) return `${kind} ${low}`;
  if (max !== undefined) return `${kind} <= ${max}`;
  return kind;
}

function numeric(value: unknown, field: string, bounds: NumberBounds, integer: boolean): number {
  if (value === undefined && bounds.fallback !== undefined) return bounds.fallback;
  const ok =
    typeof value === 'number' &&
    (integer ? Number.isSafeInteger(value) : Number.isFinite(value) || (bounds.infinity === true && value === Infinity)) &&
    (bounds.min === undefined || value >= bounds.min) &&
    (bounds.above === undefined || value > bounds.above) &&
    (bounds.max === undefined || value <= bounds.max);
  if (!ok) throw new ValidationError(field, bounds.accepted ?? accepted(integer ? 'an integer' : 'a number', bounds), describeReceived(value));
  return value;
}

/** An integer option within bounds, or the fallback when absent; `ValidationError` naming `field` otherwise. */
export function intOption(value: unknown, field: string, bounds: NumberBounds): number {
  return numeric(value, field, bounds, true);
}

/** A finite number option within bounds (fractions allowed), or the fallback when absent. */
export function numberOption(value: unknown, field: string, bounds: NumberBounds): number {
  return numeric(value, field, bounds, false);
}
