import { pino, type DestinationStream, type Logger } from 'pino';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';

export interface LoggerOptions {
  readonly level: LogLevel;
  /** Base bindings on every line, such as `{ process: 'collector' }`. */
  readonly base: Readonly<Record<string, string>>;
}

/**
 * Paths whose values never reach a log line, whatever component logs them: tokens, the
 * authorization metadata and kubeconfig material.
 */
export const REDACTED_PATHS = [
  'token',
  '*.token',
  '*.tenant_token',
  '*.tenantToken',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.bearerToken',
  '*.kubeconfig',
] as const;

/** The root logger of one process: JSON lines on stdout (or the given stream for tests). */
export function createLogger(options: LoggerOptions, destination?: DestinationStream): Logger {
  return pino(
    {
      level: options.level,
      base: { ...options.base },
      redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
