// The console relay thread (started by console-relay-thread.ts): the relay of console-relay.ts
// on an event loop and a V8 heap of its own. The collector's main thread runs the log pipeline,
// whose garbage collection pauses (10-45 ms each under 60,000 lines/s, docs/consoles.md) stop
// everything on its loop; a keystroke crosses the relay twice (stdin in, echo out), so here it
// waits only for this thread. The gateway's Console calls are dialled from here on a channel of
// this thread's own (open while a console is relayed, closed when the last one ends), and the
// executor's socket is this thread's too. Audit records and log lines go to the main thread.
import { parentPort, workerData } from 'node:worker_threads';
import { Metadata, type ChannelCredentials } from '@grpc/grpc-js';
import { createLogger } from '../../shared/logging/create-logger.js';
import { createAgentClient, createCredentials, type AgentClient } from '../gateway/dial.js';
import { createConsoleRelay } from './console-relay.js';
import type {
  RelayThreadData,
  RelayThreadEvent,
  RelayThreadRequest,
} from './relay-thread-protocol.js';

const port = parentPort;
if (port === null) throw new Error('console-relay-worker.ts runs in a worker thread');
const data = workerData as RelayThreadData;
const post = (event: RelayThreadEvent): void => {
  port.postMessage(event);
};
const logger = createLogger(
  { level: data.logLevel, base: {} },
  {
    write(line: string) {
      post({ type: 'log', line });
    },
  },
);

/** The gateway channel for console calls: dialled for the first console, closed when idle. */
let client: Promise<{ client: AgentClient }> | undefined;
/** Requests between their arrival and their call: the channel is not closed under them. */
let pending = 0;

const relay = createConsoleRelay({
  socketPath: data.socketPath,
  logger,
  enqueue: (item) => {
    post({ type: 'audit', item });
  },
  onIdle: () => {
    closeWhenIdle();
  },
});

function closeWhenIdle(): void {
  if (pending > 0 || !relay.idle() || client === undefined) return;
  const closing = client;
  client = undefined;
  closing
    .then(({ client: c }) => {
      c.close();
    })
    .catch(() => undefined);
}

async function channel(): Promise<AgentClient> {
  client ??= createCredentials(data.dial, logger).then((creds: ChannelCredentials) => ({
    client: createAgentClient(data.dial, creds, 'consoles'),
  }));
  try {
    return (await client).client;
  } catch (err: unknown) {
    client = undefined;
    throw err;
  }
}

port.on('message', (message: RelayThreadRequest) => {
  const { request, headers } = message;
  const requestId = request.value.requestId;
  pending += 1;
  channel()
    .then((gateway) => {
      relay.handle(
        request,
        () => {
          const metadata = new Metadata();
          for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
          return gateway.console(metadata);
        },
        headers,
      );
      post({ type: 'taken', requestId });
    })
    .catch((err: unknown) => {
      const reason = err instanceof Error ? err.message : String(err);
      logger.error({ requestId, err: reason }, 'console relay thread could not dial the gateway');
      post({ type: 'failed', requestId, reason });
    })
    .finally(() => {
      pending -= 1;
      closeWhenIdle();
    });
});
