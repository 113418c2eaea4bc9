// The container runtime's RFC3339Nano timestamp, kept as whole seconds plus nanoseconds so that
// ordering, the checkpoint and the wire value need no bigint and lose no precision.

/** A line's runtime timestamp: seconds since the epoch and nanoseconds within that second. */
export interface LineTime {
  readonly sec: number;
  readonly nanos: number;
}

const PREFIX = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/;

// Lines of one stream share their second: parsing the date once per second is the fast path.
let cachedSecondText = '';
let cachedSecond = 0;

/** Parses an RFC3339 / RFC3339Nano timestamp; undefined if it is not one. */
export function parseLineTime(text: string): LineTime | undefined {
  const match = PREFIX.exec(text);
  if (!match) return undefined;
  const secondText = `${match[1] ?? ''}${match[3] ?? ''}`;
  let sec: number;
  if (secondText === cachedSecondText) {
    sec = cachedSecond;
  } else {
    const ms = Date.parse(secondText);
    if (Number.isNaN(ms)) return undefined;
    sec = ms / 1000;
    cachedSecondText = secondText;
    cachedSecond = sec;
  }
  const fraction = match[2] ?? '';
  const nanos = fraction === '' ? 0 : Number(fraction.padEnd(9, '0'));
  return { sec, nanos };
}

/** Negative, zero or positive, like a sort comparator. */
export function compareLineTime(a: LineTime, b: LineTime): number {
  return a.sec - b.sec || a.nanos - b.nanos;
}

/** Unix nanoseconds as a decimal string (the wire form of LogEntry.timestamp). */
export function lineTimeToNs(time: LineTime): string {
  if (time.sec <= 0) return String(time.sec * 1e9 + time.nanos);
  return `${String(time.sec)}${String(time.nanos).padStart(9, '0')}`;
}

/** Unix milliseconds (for ages and AgentMetadata.timestamp). */
export function lineTimeToMs(time: LineTime): number {
  return time.sec * 1000 + Math.floor(time.nanos / 1e6);
}

export function lineTimeFromMs(ms: number): LineTime {
  const sec = Math.floor(ms / 1000);
  return { sec, nanos: (ms - sec * 1000) * 1e6 };
}

/** RFC3339 with second precision: what the API server passes on as sinceTime. */
export function lineTimeToSinceTime(time: LineTime): Date {
  return new Date(time.sec * 1000);
}
