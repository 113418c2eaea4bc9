// Field constructors for schema.ts. Each one owns the wording of its refusal, so a message names
// the fix for that kind of field ("write 30s"), and the loader only prefixes the key.
import { z } from 'zod';
import { isDuration, parseDuration } from './duration.js';
import { markField } from './schema-markers.js';

/**
 * `*` only as the last character, and none of the glob characters minimatch would read
 * differently, so a pattern means the same to the config check, the chart and the policy code.
 */
export const NAME_PATTERN_RE = /^[^*?[\]{}!]*\*?$/;
export const NAME_PATTERN_MESSAGE =
  'is not a supported pattern: write a name, or a prefix ending in "*" such as "web-*" ("*" alone matches every name; "*" elsewhere and ? [ ] { } ! are not patterns here)';

function typeName(input: unknown): string {
  if (input === undefined) return 'nothing';
  if (Array.isArray(input)) return 'a list';
  if (input === null) return 'null';
  if (typeof input === 'object') return 'a mapping';
  return `a ${typeof input}`;
}

function durationTypeMessage(input: unknown): string {
  if (input === 0) return 'write the duration as the string "0" (quoted), not the number 0';
  if (typeof input === 'number') {
    return `write a duration string such as ${input}s, not the number ${input}`;
  }
  return `expected a duration string such as 30s, 1m30s, 500ms or "0", got ${typeName(input)}`;
}

/**
 * The longest duration any key accepts unless it sets a tighter `max`. Far below the ~24.8 days
 * (2^31-1 ms) above which Node runs a timer after 1 ms, which would turn a long delay into a
 * tight loop.
 */
export const MAX_DURATION = '24h';

export interface DurationOptions {
  /** Refuse "0". */
  readonly positive?: boolean;
  /** The longest accepted duration, as the file writes it; MAX_DURATION when unset. */
  readonly max?: string;
}

/** A Go duration string in the file; milliseconds in Config. `positive` refuses "0". */
export function durationField(options: DurationOptions = {}) {
  const maxText = options.max ?? MAX_DURATION;
  const maxMs = parseDuration(maxText);
  const schema = z
    .string({ error: (issue) => durationTypeMessage(issue.input) })
    .refine(isDuration, {
      error: (issue) =>
        `"${String(issue.input)}" is not a duration: write it like 30s, 1m30s, 500ms or "0" (the unit is required)`,
    })
    .transform(parseDuration)
    .refine((ms) => ms >= 0, { error: 'must not be negative' })
    .refine((ms) => options.positive !== true || ms !== 0, {
      error: 'must be longer than 0, e.g. 1s',
    })
    .refine((ms) => ms <= maxMs, {
      error: `must be at most ${maxText}: write a shorter duration such as 30s or ${maxText}`,
    });
  return markField(schema, 'duration');
}

/** A duration with a default, written as the file would write it. */
export function duration(defaultText: string, options: DurationOptions = {}) {
  return durationField(options).prefault(defaultText);
}

/**
 * A string that must not be blank. The default goes through the check (prefault), so leaving the
 * key out is reported like writing it empty.
 */
export function requiredText(message: string) {
  return z
    .string()
    .refine((value) => value.trim() !== '', { error: message })
    .prefault('');
}

/** A free-form string (YAML numbers at its position are read as their text). */
export function text(defaultValue = '') {
  return z.string().default(defaultValue);
}

/** A list of free-form strings, empty by default. */
export function textList() {
  return z.array(z.string()).default([]);
}

/** One name pattern (see NAME_PATTERN_RE); the refusal quotes it, since names are not secret. */
export function patternText() {
  return z.string().regex(NAME_PATTERN_RE, {
    error: (issue) => `"${String(issue.input)}" ${NAME_PATTERN_MESSAGE}`,
  });
}

/** A list of name patterns, empty by default. */
export function patternList() {
  return z.array(patternText()).default([]);
}

/** A whole number with a default and optional bounds (bounds apply whatever the section's state). */
export function integer(defaultValue: number, bounds: { min?: number; max?: number } = {}) {
  let schema = z.int();
  if (bounds.min !== undefined) schema = schema.min(bounds.min);
  if (bounds.max !== undefined) schema = schema.max(bounds.max);
  return schema.default(defaultValue);
}

/** A byte count: an integer, never a Kubernetes quantity such as 512Mi. */
export function byteSize(defaultValue: number, min: number) {
  return z
    .int({
      error: (issue) =>
        typeof issue.input === 'string'
          ? 'write a byte count as a whole number, e.g. 536870912 for 512 MiB (quantities such as 512Mi are not read)'
          : `expected a whole number of bytes, got ${typeName(issue.input)}`,
    })
    .min(min)
    .default(defaultValue);
}

/** `true` or `false`, with a default. */
export function flag(defaultValue: boolean) {
  return z.boolean().default(defaultValue);
}

/** Label key/value pairs (values are strings; a blank value is the empty string). */
export function labelMap() {
  return z.record(z.string(), z.string()).default({});
}

/** The phrase used for a value's type in messages; never the value itself. */
export { typeName as describeType };
