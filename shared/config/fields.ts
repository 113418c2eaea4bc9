// Field constructors for schema.ts. Each one owns the wording of its refusal, so a message names
// the fix for that kind of field ("write 30s"), and the loader only prefixes the key.
import * as z from 'zod';
import { isDuration, formatDuration, parseDuration } from './duration.js';
import { CANONICAL_DURATION_RULES, durationPattern } from './duration-pattern.js';
import { exactName, nameGlob, namePattern, type NameFormat, type NameRule } from './kube-names.js';
import { markDuration } from './schema-markers.js';
import {
  GATEWAY_ADDRESS_PATTERN,
  gatewayAddressProblem,
  LISTEN_ADDRESS_PATTERN,
} from './address.js';

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

/**
 * A Go duration string in the file; milliseconds in Config. Accepted exactly when it matches the
 * key's canonical pattern (duration-pattern.ts), the same one values.schema.json carries, so the
 * chart and the agent agree; the value checks below only choose the message.
 */
export function durationField(options: DurationOptions = {}) {
  const maxText = options.max ?? MAX_DURATION;
  const maxMs = parseDuration(maxText);
  const positive = options.positive === true;
  const pattern = durationPattern({ positive, max: maxText });
  const accepted = new RegExp(pattern);
  const schema = z
    .string({ error: (issue) => durationTypeMessage(issue.input) })
    .superRefine((text, ctx) => {
      if (accepted.test(text)) return;
      ctx.addIssue({ code: 'custom', message: durationRefusal(text, positive, maxText, maxMs) });
    })
    .transform(parseDuration);
  return markDuration(schema, { pattern, positive, max: maxText });
}

function durationRefusal(text: string, positive: boolean, maxText: string, maxMs: number): string {
  if (!isDuration(text)) {
    return `"${text}" is not a duration: write it like 30s, 1m30s, 500ms or "0" (the unit is required)`;
  }
  const ms = parseDuration(text);
  if (ms < 0) return 'must not be negative';
  if (ms > maxMs) {
    return `must be at most ${maxText}: write a shorter duration such as 30s or ${maxText}`;
  }
  if (positive && ms === 0) return 'must be longer than 0, e.g. 1s';
  return `"${text}" is not written canonically: write ${formatDuration(ms)} (${CANONICAL_DURATION_RULES})`;
}

/** A duration with a default, written as the file would write it. */
export function duration(defaultText: string, options: DurationOptions = {}) {
  return durationField(options).prefault(defaultText);
}

/** A free-form string (YAML numbers at its position are read as their text). */
export function text(defaultValue = '') {
  return z.string().default(defaultValue);
}

/** A list of free-form strings, empty by default. */
export function textList() {
  return z.array(z.string()).default([]);
}

function nameField(format: NameFormat, blankMessage?: string) {
  const refuse = (issue: { input: unknown }) =>
    blankMessage !== undefined && String(issue.input).trim() === ''
      ? blankMessage
      : `"${String(issue.input)}" ${format.message}`;
  const text = z.string();
  const bounded = Number.isFinite(format.maxLength)
    ? text.max(format.maxLength, { error: refuse })
    : text;
  return bounded.regex(new RegExp(format.pattern), { error: refuse });
}

/** One Kubernetes name, or empty (empty means "every"); refused when it can never match. */
export function nameText(rule: NameRule) {
  return nameField(exactName(rule)).default('');
}

/** DNS-1123 labels (namespaces), empty by default; the loader trims them. */
export function nameList(rule: NameRule & { readonly kind: 'label' }) {
  return z.array(nameField(exactName(rule, true))).default([]);
}

/** One name pattern: a name, a prefix ending in "*", "*", or empty (see kube-names.ts). */
export function patternText(rule: NameRule) {
  return nameField(namePattern(rule));
}

/** One name pattern that must be written (`blankMessage` when it is not). */
export function requiredPatternText(rule: NameRule, blankMessage: string) {
  return nameField(namePattern(rule, false), blankMessage).prefault('');
}

/** A list of name patterns, empty by default. */
export function patternList(rule: NameRule) {
  return z.array(patternText(rule)).default([]);
}

/** minimatch globs over names (collect.logs), empty by default. */
export function globList(rule: NameRule) {
  return z.array(nameField(nameGlob(rule))).default([]);
}

/** A whole number with a default and optional bounds (bounds apply whatever the section's state). */
export function integer(defaultValue: number, bounds: { min?: number; max?: number } = {}) {
  let schema = z.int();
  if (bounds.min !== undefined) schema = schema.min(bounds.min);
  if (bounds.max !== undefined) schema = schema.max(bounds.max);
  return schema.default(defaultValue);
}

/** The largest byte size any key accepts: 1 PiB, far above any buffer and below 2^53. */
export const MAX_BYTES = 2 ** 50;

/** A byte count: an integer, never a Kubernetes quantity such as 512Mi. */
export function byteSize(defaultValue: number, min: number) {
  const range = `a whole number of bytes from ${min} to ${MAX_BYTES} (1 PiB), e.g. 536870912 for 512 MiB`;
  return z
    .int({
      error: (issue) => {
        const input = issue.input;
        if (typeof input === 'string') {
          return `write ${range} (quantities such as 512Mi are not read)`;
        }
        if (typeof input === 'number') {
          return Number.isInteger(input)
            ? `${input} is out of range: write ${range}`
            : `${input} is not a whole number: write ${range}`;
        }
        return `expected ${range}, got ${typeName(input)}`;
      },
    })
    .min(min)
    .max(MAX_BYTES)
    .default(defaultValue);
}

/** The pattern values.schema.json carries for gateway.address (empty: gateway.host and port). */
const GATEWAY_ADDRESS_OR_EMPTY = `^(?:${GATEWAY_ADDRESS_PATTERN.slice(1, -1)})?$`;

/** The gateway's host:port; empty only where `optional` (the executor never dials it). */
export function gatewayAddress(optional: boolean, blankMessage: string) {
  return z
    .string()
    .regex(new RegExp(GATEWAY_ADDRESS_OR_EMPTY), {
      error: (issue) => gatewayAddressProblem(String(issue.input)),
    })
    .refine((address) => optional || address !== '', { error: blankMessage })
    .describe(
      'host:port of the Kubexa gateway, e.g. gateway.kubexa.dev:443: no scheme (gateway.tls decides TLS), no path, a port from 1 to 65535',
    )
    .prefault('');
}

/** A listen address (":9090", "127.0.0.1:9090", "[::1]:9090"); empty only where `optional`. */
export function listenAddress(defaultValue: string, optional: boolean) {
  const pattern = optional
    ? `^(?:${LISTEN_ADDRESS_PATTERN.slice(1, -1)})?$`
    : LISTEN_ADDRESS_PATTERN;
  return z
    .string()
    .regex(new RegExp(pattern), {
      error: (issue) =>
        `"${String(issue.input)}" is not a listen address: write :port or host:port with a port from 0 (any free port) to 65535, e.g. ":9090" or "127.0.0.1:9090"${optional ? ' (empty: no listener)' : ''}`,
    })
    .describe(
      `:port or host:port to listen on, with a port from 1 to 65535 (the chart's probes need a fixed port), e.g. ":9090"${optional ? '; empty: no listener' : ''}`,
    )
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
