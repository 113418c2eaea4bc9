// The container runtime's RFC3339Nano timestamp, kept as whole seconds plus nanoseconds so that
// ordering, the checkpoint and the wire value need no bigint and lose no precision.

/** A line's runtime timestamp: seconds since the epoch and nanoseconds within that second. */
export interface LineTime {
  readonly sec: number;
  readonly nanos: number;
}

// Fixed layout `YYYY-MM-DDTHH:MM:SS` (19 characters), then an optional `.` with 1-9 digits, then
// `Z` or `±HH:MM`. Checked character by character rather than with a regex: this runs once per
// line, and a regex match allocates its captures and the strings built from them.
const DATE_TIME_LENGTH = 19;
/** `-1` stands for an ASCII digit; any other value is the exact character code expected. */
const LAYOUT = [-1, -1, -1, -1, 45, -1, -1, 45, -1, -1, 84, -1, -1, 58, -1, -1, 58, -1, -1];
const FRACTION_SCALE = [0, 1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 1e2, 10, 1];

// Lines of one stream share their second: parsing the date once per second is the fast path.
// The key is kept in its two parts so that a hit is a comparison in place, with no substring.
let cachedDateTime = '';
let cachedZone = '';
let cachedSecond = 0;

const isDigit = (c: number): boolean => c >= 48 && c <= 57;

/** Parses an RFC3339 / RFC3339Nano timestamp; undefined if it is not one. */
export function parseLineTime(text: string): LineTime | undefined {
  return parseLineTimeAt(text, text.length);
}

/**
 * Parses `text.slice(0, end)` as parseLineTime does, without making that slice: a line's
 * prefix is read where it lies in the line.
 */
export function parseLineTimeAt(text: string, end: number): LineTime | undefined {
  if (end < DATE_TIME_LENGTH + 1 || end > text.length) return undefined;
  // The cached date-time passed the layout check when it was cached: equal text needs no other.
  const sameSecond = cachedDateTime !== '' && text.startsWith(cachedDateTime);
  if (!sameSecond && !hasDateTimeLayout(text)) return undefined;
  const zoneStart = fractionEnd(text, end);
  if (zoneStart === -1 || !isZone(text, zoneStart, end)) return undefined;
  const sec = sameSecond ? cachedSecondFor(text, zoneStart, end) : undefined;
  const parsed = sec ?? parseSecond(text, zoneStart, end);
  if (parsed === undefined) return undefined;
  return { sec: parsed, nanos: fractionNanos(text, zoneStart) };
}

function hasDateTimeLayout(text: string): boolean {
  for (let i = 0; i < DATE_TIME_LENGTH; i++) {
    const c = text.charCodeAt(i);
    const want = LAYOUT[i] ?? -1;
    if (want === -1 ? !isDigit(c) : c !== want) return false;
  }
  return true;
}

/** Where the zone starts: after the `.` and its 1-9 digits, if any; -1 if the fraction is bad. */
function fractionEnd(text: string, end: number): number {
  if (text.charCodeAt(DATE_TIME_LENGTH) !== 46 /* . */) return DATE_TIME_LENGTH;
  let i = DATE_TIME_LENGTH + 1;
  while (i < end && isDigit(text.charCodeAt(i))) i++;
  const digits = i - DATE_TIME_LENGTH - 1;
  return digits === 0 || digits > 9 ? -1 : i;
}

/** The fraction (already checked by fractionEnd) in nanoseconds. */
function fractionNanos(text: string, zoneStart: number): number {
  if (zoneStart === DATE_TIME_LENGTH) return 0;
  let fraction = 0;
  for (let i = DATE_TIME_LENGTH + 1; i < zoneStart; i++) {
    fraction = fraction * 10 + (text.charCodeAt(i) - 48);
  }
  return fraction * (FRACTION_SCALE[zoneStart - DATE_TIME_LENGTH - 1] ?? 0);
}

/** `Z` or `±HH:MM`, ending exactly at `end`. */
function isZone(text: string, i: number, end: number): boolean {
  const z = text.charCodeAt(i);
  if (end - i === 1) return z === 90; /* Z */
  return (
    end - i === 6 &&
    (z === 43 /* + */ || z === 45) /* - */ &&
    isDigit(text.charCodeAt(i + 1)) &&
    isDigit(text.charCodeAt(i + 2)) &&
    text.charCodeAt(i + 3) === 58 /* : */ &&
    isDigit(text.charCodeAt(i + 4)) &&
    isDigit(text.charCodeAt(i + 5))
  );
}

/** The cached second if the zone matches too (the date-time already did). */
function cachedSecondFor(text: string, zoneStart: number, end: number): number | undefined {
  return end - zoneStart === cachedZone.length && text.startsWith(cachedZone, zoneStart)
    ? cachedSecond
    : undefined;
}

function parseSecond(text: string, zoneStart: number, end: number): number | undefined {
  const dateTime = text.slice(0, DATE_TIME_LENGTH);
  const zone = text.slice(zoneStart, end);
  // Date.parse still decides what a valid date is (month 13, hour 25...), as it always did.
  const ms = Date.parse(`${dateTime}${zone}`);
  if (Number.isNaN(ms)) return undefined;
  cachedDateTime = dateTime;
  cachedZone = zone;
  cachedSecond = ms / 1000;
  return cachedSecond;
}

/** Negative, zero or positive, like a sort comparator. */
export function compareLineTime(a: LineTime, b: LineTime): number {
  return a.sec - b.sec || a.nanos - b.nanos;
}

/** Unix nanoseconds as a decimal string (the wire form of LogEntry.timestamp). */
export function lineTimeToNs(time: LineTime): string {
  if (time.sec <= 0) return String(time.sec * 1e9 + time.nanos);
  // Per line: the seconds' text is reused while the second lasts, and the nanoseconds are
  // padded from a table instead of padStart.
  if (time.sec !== nsCachedSecond) {
    nsCachedSecond = time.sec;
    nsCachedSecondText = String(time.sec);
  }
  const nanosText = String(time.nanos);
  return nsCachedSecondText + (NANOS_PADDING[9 - nanosText.length] ?? '') + nanosText;
}

const NANOS_PADDING = ['', '0', '00', '000', '0000', '00000', '000000', '0000000', '00000000'];
let nsCachedSecond = 0;
let nsCachedSecondText = '0';

/** Unix milliseconds (for ages and AgentMetadata.timestamp). */
export function lineTimeToMs(time: LineTime): number {
  return time.sec * 1000 + Math.floor(time.nanos / 1e6);
}

/** RFC3339 with second precision: what the API server passes on as sinceTime. */
export function lineTimeToSinceTime(time: LineTime): Date {
  return new Date(time.sec * 1000);
}
