// Level detection: the JSON `level` family of fields, then the common text forms (logfmt,
// bracketed and bare upper-case words, klog's one-letter prefix).
import { LogLevel } from '../../../proto/index.js';

// A Map, not an object literal: a log line saying `level=constructor` must not find
// Object.prototype's members.
const LEVEL_WORDS: ReadonlyMap<string, LogLevel> = new Map(
  Object.entries({
    trace: LogLevel.LOG_LEVEL_DEBUG,
    debug: LogLevel.LOG_LEVEL_DEBUG,
    dbg: LogLevel.LOG_LEVEL_DEBUG,
    info: LogLevel.LOG_LEVEL_INFO,
    information: LogLevel.LOG_LEVEL_INFO,
    notice: LogLevel.LOG_LEVEL_INFO,
    warn: LogLevel.LOG_LEVEL_WARN,
    warning: LogLevel.LOG_LEVEL_WARN,
    error: LogLevel.LOG_LEVEL_ERROR,
    err: LogLevel.LOG_LEVEL_ERROR,
    fatal: LogLevel.LOG_LEVEL_ERROR,
    panic: LogLevel.LOG_LEVEL_ERROR,
    critical: LogLevel.LOG_LEVEL_ERROR,
    crit: LogLevel.LOG_LEVEL_ERROR,
    alert: LogLevel.LOG_LEVEL_ERROR,
    emerg: LogLevel.LOG_LEVEL_ERROR,
  }),
);

/** A level word or a syslog/pino number as found in a JSON field. */
export function levelFromValue(value: unknown): LogLevel {
  if (typeof value === 'string') return LEVEL_WORDS.get(value.toLowerCase()) ?? 0;
  if (typeof value === 'number') {
    // pino/bunyan: 10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal.
    if (value >= 50) return LogLevel.LOG_LEVEL_ERROR;
    if (value >= 40) return LogLevel.LOG_LEVEL_WARN;
    if (value >= 30) return LogLevel.LOG_LEVEL_INFO;
    if (value >= 10) return LogLevel.LOG_LEVEL_DEBUG;
  }
  return LogLevel.LOG_LEVEL_UNSPECIFIED;
}

/** Only the head of a line is searched: a level word deep in a message says nothing. */
const HEAD_CHARS = 80;
const LOGFMT = /\b(?:level|lvl|severity)=["']?([A-Za-z]+)/i;
const WORD =
  /(?:^|[\s[|(<:-])(TRACE|DEBUG|DBG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|PANIC|CRITICAL|CRIT)(?=$|[\s\]|)>:,-])/;
const KLOG = /^([IWEF])\d{4} \d\d:\d\d:\d\d/;
const KLOG_LEVELS: Readonly<Record<string, LogLevel>> = {
  I: LogLevel.LOG_LEVEL_INFO,
  W: LogLevel.LOG_LEVEL_WARN,
  E: LogLevel.LOG_LEVEL_ERROR,
  F: LogLevel.LOG_LEVEL_ERROR,
};

function mayBeKlog(head: string): boolean {
  const first = head.charCodeAt(0);
  const second = head.charCodeAt(1);
  return (
    (first === 73 || first === 87 || first === 69 || first === 70) && second >= 48 && second <= 57
  );
}

/** The level of a plain-text line, UNSPECIFIED when none of the common forms is present. */
export function levelFromText(text: string): LogLevel {
  const head = text.length > HEAD_CHARS ? text.slice(0, HEAD_CHARS) : text;
  // The klog regex only where its first two characters fit (a letter of IWEF, a digit).
  const klog = mayBeKlog(head) ? KLOG.exec(head) : null;
  if (klog) return KLOG_LEVELS[klog[1] ?? ''] ?? 0;
  const logfmt = LOGFMT.exec(head);
  if (logfmt) return levelFromValue(logfmt[1]);
  const word = WORD.exec(head);
  if (word) return levelFromValue(word[1]);
  return LogLevel.LOG_LEVEL_UNSPECIFIED;
}
