// The messages between the collector's main thread and its console relay thread
// (console-relay-thread.ts, console-relay-worker.ts). Plain data: they cross by structured clone.
import type { LogLevel } from '../../shared/logging/create-logger.js';
import type { BufferItem } from '../buffer/types.js';
import type { DialOptions } from '../gateway/dial.js';
import type { ConsoleRequestPayload } from '../gateway/session.js';

/** What the thread starts with (its workerData). */
export interface RelayThreadData {
  /** The executor's Pod-local socket. */
  readonly socketPath: string;
  /** How to reach the gateway: console calls are dialled from the thread, on its own channel. */
  readonly dial: DialOptions;
  readonly logLevel: LogLevel;
}

/** Main thread -> relay thread. */
export interface RelayThreadRequest {
  readonly type: 'console';
  readonly request: ConsoleRequestPayload;
  /** The handshake headers every call to the gateway carries (the tenant token among them). */
  readonly headers: Readonly<Record<string, string>>;
}

/** Relay thread -> main thread. */
export type RelayThreadEvent =
  /** A pino line written in the thread, logged again by the main thread's logger. */
  | { readonly type: 'log'; readonly line: string }
  /** An audit record for the durable buffer. */
  | { readonly type: 'audit'; readonly item: BufferItem }
  /** The thread dialled the gateway's call for this console: it answers it from now on. */
  | { readonly type: 'taken'; readonly requestId: string }
  /** The thread could not take the console: the main thread refuses it on the gateway's call. */
  | { readonly type: 'failed'; readonly requestId: string; readonly reason: string };

/** The request id a console request carries (open and attach alike). */
export function consoleRequestId(request: ConsoleRequestPayload): string {
  return request.value.requestId;
}
