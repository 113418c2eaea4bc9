// How times and durations read on the page: 24-hour clock with milliseconds, local time.
const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** 14:03:27.019 */
export function clockMs(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** 14:03:27 */
export function clock(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** 2026-12-01 14:03:27.019 */
export function dateTimeMs(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clockMs(ms)}`;
}

/** 4 s, 3 min, 2 h */
export function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

export const LEVELS = ['unknown', 'debug', 'info', 'warn', 'error'] as const;
