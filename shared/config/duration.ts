// Durations in the config file are strings in Go's time.ParseDuration syntax ("10s", "1m30s",
// "500ms", "0"), the syntax the Go agent's configs already use. Inside the agent they are
// milliseconds.

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3, // U+00B5 micro sign
  μs: 1e-3, // U+03BC Greek mu: Go accepts both spellings
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * The full Go syntax, sign included; `parseDuration` accepts exactly this. The micro signs are
 * escapes (U+00B5 micro sign, U+03BC Greek mu): a bundle with one non-ASCII character in a regular
 * expression is held by V8 as a two-byte string, twice its size (scripts/bundle.ts).
 */
const DURATION_RE = /^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$/;
const COMPONENT_RE = /([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/g;

/** Whether `text` is a duration in Go's syntax (possibly negative). */
export function isDuration(text: string): boolean {
  return DURATION_RE.test(text);
}

/**
 * Milliseconds in a Go duration string such as `1m30s` (90000), `500ms` (500) or `0` (0).
 * Sub-millisecond units give fractional milliseconds. Throws a RangeError for anything else,
 * including a bare number such as `30`: the unit is not optional.
 */
export function parseDuration(text: string): number {
  if (!DURATION_RE.test(text)) {
    throw new RangeError(`not a duration: "${text}" (write it like 30s, 1m30s, 500ms or 0)`);
  }
  const sign = text.startsWith('-') ? -1 : 1;
  let totalMs = 0;
  for (const match of text.matchAll(COMPONENT_RE)) {
    const [, amount = '0', unit = 'ms'] = match;
    totalMs += Number(amount) * (UNIT_MS[unit] ?? 0);
  }
  // Rounds away float noise such as 0.1 + 0.2 while keeping microsecond precision.
  return (sign * Math.round(totalMs * 1e6)) / 1e6;
}

/** The shortest Go duration string for a non-negative number of milliseconds: 90000 -> `1m30s`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0';
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const restMs = Math.round((ms % 60_000) * 1e6) / 1e6;
  let text = '';
  if (hours > 0) text += `${hours}h`;
  if (minutes > 0) text += `${minutes}m`;
  if (restMs > 0) {
    text += text === '' && restMs < 1000 ? `${restMs}ms` : `${restMs / 1000}s`;
  }
  return text;
}
