// The collector's side of its console relay thread (console-relay-worker.ts): created when the
// collector offers consoles (the executor said pod or node consoles are on), never otherwise, and
// started by the first console request, not at the collector's start, so a collector whose
// consoles are offered but unused holds no second V8 heap (+29.5 MiB RSS on Node 24, docs/consoles.md). Once
// started it runs until the collector stops (its gateway channel alone closes when no console is
// open). Console requests arrive on the
// Connect call (this thread) and are handed to the relay thread, which dials the console's own
// call to the gateway and the executor's socket; audit records come back here for the durable
// buffer, and the thread's log lines are logged here. A request the thread cannot take (it
// failed, or could not dial the gateway) is refused on the console's call with
// EXECUTOR_UNAVAILABLE from this thread, so the gateway never waits for an answer that cannot
// come; consoles the thread relayed when it failed lose their calls (the gateway re-attaches,
// the executor keeps the session for its resume window). The next request starts a new thread.
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Service } from '../../shared/lifecycle/service.js';
import { getErrorMessage } from '../../shared/errors.js';
import type { LogLevel } from '../../shared/logging/create-logger.js';
import type { BufferItem } from '../buffer/types.js';
import type { ConsoleCall, DialOptions } from '../gateway/dial.js';
import type { ConsoleHandler, ConsoleRequestPayload } from '../gateway/session.js';
import type {
  RelayThreadData,
  RelayThreadEvent,
  RelayThreadRequest,
} from './relay-thread-protocol.js';

export interface ConsoleRelayThreadDeps {
  readonly socketPath: string;
  readonly dial: DialOptions;
  readonly logLevel: LogLevel;
  readonly logger: Logger;
  /** Where audit records go: the durable buffer. */
  readonly enqueue: (item: BufferItem) => void;
  /** The thread's module; tests start a failing one. Default: console-relay-worker. */
  readonly workerUrl?: URL;
}

export interface ConsoleRelayThread {
  readonly handle: ConsoleHandler;
  /** start() starts nothing (the first console does); close() terminates the thread. */
  readonly service: Service;
  /** Whether the thread is running: from the first console request until it exits or close(). */
  readonly running: boolean;
}

/**
 * Where the thread's module is: beside this one in the compiled output, beside collector.js in
 * the bundle (scripts/bundle.ts builds it as console-relay-worker.js; every module of the bundle
 * has the bundle's URL), or the TypeScript source through its tsx bootstrap.
 */
function defaultWorkerUrl(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts')
    ? new URL('./console-relay-worker-tsx.mjs', here)
    : new URL('./console-relay-worker.js', here);
}

const LEVELS: Readonly<Record<number, 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/**
 * Refuses a console on its own call from this thread: the relay thread cannot answer it. Called
 * from event listeners and at close, possibly after the gateway session the dial belongs to has
 * ended (grpc-js then throws "Channel has been shut down" at once): nothing to refuse on then, the
 * gateway lost that console with its session, so the failure is logged, never thrown.
 */
export function refuse(
  requestId: string,
  dial: () => ConsoleCall,
  reason: string,
  logger: Logger,
): void {
  try {
    const call = dial();
    call.on('error', () => undefined);
    call.write({ requestId, frame: undefined });
    call.write({
      requestId,
      frame: { $case: 'refusal', value: { code: 'EXECUTOR_UNAVAILABLE', reason } },
    });
    call.end();
  } catch (err: unknown) {
    logger.warn(
      { requestId, err: getErrorMessage(err) },
      'could not refuse a console on its call (the gateway session has ended)',
    );
  }
}

export function createConsoleRelayThread(deps: ConsoleRelayThreadDeps): ConsoleRelayThread {
  const logger = deps.logger.child({ component: 'console-relay' });
  const workerUrl = deps.workerUrl ?? defaultWorkerUrl();
  let worker: Worker | undefined;
  let closed = false;
  /** Requests handed to the thread and not yet taken: refused here if the thread fails. */
  const pending = new Map<string, () => ConsoleCall>();

  const relog = (line: string): void => {
    try {
      const { level, msg, ...fields } = JSON.parse(line) as {
        level: number;
        msg?: string;
      } & Record<string, unknown>;
      // The thread's timestamp is dropped: the main thread's logger stamps the line again.
      delete fields['time'];
      // Its component (console-relay) is on the line already.
      deps.logger[LEVELS[level] ?? 'info']({ ...fields, thread: 'console-relay' }, msg ?? '');
    } catch {
      logger.warn({ line }, 'console relay thread wrote a line that is not JSON');
    }
  };

  const failAll = (reason: string): void => {
    for (const [requestId, dial] of pending) refuse(requestId, dial, reason, logger);
    pending.clear();
  };

  const start = (): Worker => {
    const data: RelayThreadData = {
      socketPath: deps.socketPath,
      dial: deps.dial,
      logLevel: deps.logLevel,
    };
    const thread = new Worker(workerUrl, {
      workerData: data,
      // The process's node flags and preloads apply to the thread too (the default execArgv).
      stdout: false,
      stderr: false,
    });
    let failure: string | undefined;
    thread.on('message', (event: RelayThreadEvent) => {
      switch (event.type) {
        case 'log':
          relog(event.line);
          return;
        case 'audit':
          deps.enqueue(event.item);
          return;
        case 'taken':
          pending.delete(event.requestId);
          return;
        case 'failed': {
          const dial = pending.get(event.requestId);
          pending.delete(event.requestId);
          if (dial !== undefined) {
            refuse(
              event.requestId,
              dial,
              `the console relay could not reach the gateway: ${event.reason}`,
              logger,
            );
          }
          return;
        }
      }
    });
    thread.on('error', (err: Error) => {
      failure = err.message;
      logger.error({ err: err.message, stack: err.stack }, 'console relay thread failed');
    });
    thread.on('exit', (code) => {
      if (worker === thread) worker = undefined;
      if (!closed) {
        logger.error({ code }, 'console relay thread exited; the next console starts a new one');
      }
      failAll(`the console relay thread ended (${failure ?? `exit code ${String(code)}`})`);
    });
    return thread;
  };

  const handle: ConsoleHandler = (request: ConsoleRequestPayload, dial, headers) => {
    const requestId = request.value.requestId;
    if (closed) {
      refuse(requestId, dial, 'the collector is stopping', logger);
      return;
    }
    worker ??= start();
    pending.set(requestId, dial);
    const message: RelayThreadRequest = { type: 'console', request, headers: { ...headers } };
    worker.postMessage(message);
  };

  return {
    handle,
    get running() {
      return worker !== undefined;
    },
    service: {
      name: 'console-relay',
      start() {
        // Nothing yet: handle() starts the thread for the first console.
        return Promise.resolve();
      },
      async close() {
        closed = true;
        const thread = worker;
        worker = undefined;
        // Its calls end with it: the gateway sees them cut, the executor keeps each session for
        // its resume window (as when the collector's process ends).
        if (thread !== undefined) await thread.terminate();
        failAll('the collector is stopping');
      },
    },
  };
}
