// The durations a key accepts, as one regular expression that both the agent (zod) and helm
// (values.schema.json, RE2) apply, so the chart refuses exactly what the agent refuses.
//
// JSON Schema cannot compare durations as numbers, so the bound lives in the pattern. A pattern
// can only bound a sum of components if the written form is canonical, the way Go's
// time.Duration.String() writes it:
//   - units from largest to smallest (h, m, s, ms, us, ns), each at most once;
//   - after the first component, minutes and seconds are below 60 and ms, us, ns below 1000;
//   - a fraction only on the last component, with no digit finer than a nanosecond (at most 9
//     significant digits after the point for h, m, s; 6 for ms; 3 for us; none for ns);
//   - the first component is not zero unless every component is ("0h30m" is written "30m").
// Then the first component decides the comparison: below the bound in its unit, anything may
// follow; equal to it, only zeros may follow. `"0"` is the zero duration, and a leading `+` is
// read as Go reads it.
import { parseDuration } from './duration.js';

interface Unit {
  /** Go's spellings; the first is the one messages use. */
  readonly spellings: readonly string[];
  readonly ns: number;
  /** Significant fraction digits that keep the value a whole number of nanoseconds. */
  readonly fractionDigits: number;
  /** The value a component of this unit stays below when a larger unit precedes it. */
  readonly below: number;
}

const UNITS: readonly Unit[] = [
  { spellings: ['h'], ns: 3_600_000_000_000, fractionDigits: 9, below: Number.POSITIVE_INFINITY },
  { spellings: ['m'], ns: 60_000_000_000, fractionDigits: 9, below: 60 },
  { spellings: ['s'], ns: 1_000_000_000, fractionDigits: 9, below: 60 },
  { spellings: ['ms'], ns: 1_000_000, fractionDigits: 6, below: 1000 },
  { spellings: ['us', 'µs', 'μs'], ns: 1000, fractionDigits: 3, below: 1000 },
  { spellings: ['ns'], ns: 1, fractionDigits: 0, below: 1000 },
];

export interface DurationRange {
  /** Refuse every spelling of zero. */
  readonly positive: boolean;
  /** The longest accepted duration, a whole number of hours such as "24h" or "1h". */
  readonly max: string;
}

/** Decimal integers from 1 to `max` (no leading zeros), as alternatives. */
function oneTo(max: number): string {
  const digits = String(max);
  const alternatives: string[] = [];
  // Every length shorter than max's.
  if (digits.length === 2) alternatives.push('[1-9]');
  if (digits.length > 2) alternatives.push(`[1-9][0-9]{0,${digits.length - 2}}`);
  // max's length: share a prefix with max, then a smaller digit, then anything.
  for (let index = 0; index < digits.length; index += 1) {
    const digit = Number(digits[index]);
    const lowest = index === 0 ? 1 : 0;
    if (digit - 1 < lowest) continue;
    const range = digit - 1 === lowest ? String(lowest) : `[${lowest}-${digit - 1}]`;
    const rest = digits.length - index - 1;
    const tail = rest === 0 ? '' : rest === 1 ? '[0-9]' : `[0-9]{${rest}}`;
    alternatives.push(`${digits.slice(0, index)}${range}${tail}`);
  }
  alternatives.push(digits);
  return `(?:${alternatives.join('|')})`;
}

function unitPattern(unit: Unit): string {
  return unit.spellings.length === 1 ? unit.spellings.join('') : `(?:${unit.spellings.join('|')})`;
}

/** A fraction whose digits past the unit's precision are zeros. */
function fraction(unit: Unit): string {
  return unit.fractionDigits === 0 ? '\\.0*' : `\\.[0-9]{0,${unit.fractionDigits}}0*`;
}

/** A fraction with a significant digit that is not zero. */
function nonZeroFraction(unit: Unit): string {
  return `\\.[0-9]{0,${unit.fractionDigits - 1}}[1-9]0*`;
}

/** A zero-valued component; with a fraction it must be the last one. */
function zeroComponent(unit: Unit): string {
  const u = unitPattern(unit);
  return `(?:0+${u}|(?:0+\\.0*|\\.0+)${u}$)`;
}

/** A component after a larger one: below `unit.below`; with a fraction it must be the last. */
function laterComponent(unit: Unit): string {
  const u = unitPattern(unit);
  const whole = `0*(?:0|${oneTo(unit.below - 1)})`;
  const fractional =
    unit.fractionDigits === 0
      ? `${whole}\\.0*${u}$`
      : `(?:${whole}${fraction(unit)}|\\.[0-9]{1,${unit.fractionDigits}}0*)${u}$`;
  return `(?:${whole}${u}|${fractional})`;
}

/**
 * `(((lead0 later1? | lead1) later2? | lead2) ... )`: a first component of some unit followed by
 * optional components of the smaller units, each written once.
 */
function chain(
  lead: (unit: Unit) => string | undefined,
  later: (unit: Unit) => string,
): string | undefined {
  let pattern: string | undefined;
  for (const unit of UNITS) {
    const first = lead(unit);
    const options = [pattern === undefined ? undefined : `${pattern}${later(unit)}?`, first].filter(
      (option): option is string => option !== undefined,
    );
    if (options.length > 0) pattern = `(?:${options.join('|')})`;
  }
  return pattern;
}

/** Nanoseconds in a whole number of hours such as "24h"; throws for anything else. */
function wholeHours(max: string): number {
  const ms = parseDuration(max);
  if (!/^[0-9]+h$/.test(max) || ms <= 0) {
    throw new Error(`duration bound ${max} must be a whole number of hours, such as 24h`);
  }
  return ms * 1_000_000;
}

const cache = new Map<string, string>();

/**
 * The JSON Schema / RE2 / JavaScript pattern (anchored) for the durations of `range`, in the
 * canonical form described above.
 */
export function durationPattern(range: DurationRange): string {
  const key = `${range.positive}:${range.max}`;
  const cached = cache.get(key);
  if (cached !== undefined) return cached;
  const maxNs = wholeHours(range.max);
  // Leads below the bound, anything after them.
  const below = chain((unit) => {
    const u = unitPattern(unit);
    const bound = maxNs / unit.ns;
    const options: string[] = [];
    if (bound > 1) {
      const whole = `0*${oneTo(bound - 1)}`;
      options.push(`${whole}(?:${u}|${fraction(unit)}${u}$)`);
    }
    if (unit.fractionDigits > 0) {
      const zeroWhole = range.positive
        ? `0*${nonZeroFraction(unit)}`
        : `(?:0+${fraction(unit)}|\\.[0-9]{1,${unit.fractionDigits}}0*)`;
      options.push(`${zeroWhole}${u}$`);
    }
    return options.length === 0 ? undefined : `(?:${options.join('|')})`;
  }, laterComponent);
  // Leads equal to the bound (or zero, where zero is allowed), zeros after them.
  const atBound = chain((unit) => {
    const u = unitPattern(unit);
    const bound = String(maxNs / unit.ns);
    const options = [`0*${bound}(?:${u}|\\.0*${u}$)`];
    if (!range.positive) options.push(zeroComponent(unit));
    return `(?:${options.join('|')})`;
  }, zeroComponent);
  const forms = [range.positive ? undefined : '0', below, atBound].filter(
    (form): form is string => form !== undefined,
  );
  const pattern = `^\\+?(?:${forms.join('|')})$`;
  cache.set(key, pattern);
  return pattern;
}

/** How the canonical form is explained in messages and in the values schema's descriptions. */
export const CANONICAL_DURATION_RULES =
  'units from largest to smallest (h, m, s, ms, us, ns), each once; after the first unit, minutes and seconds below 60 and ms, us, ns below 1000; a fraction only on the last unit, to whole nanoseconds';
