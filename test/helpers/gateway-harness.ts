// A collector gateway stream wired to a real demo gateway on loopback, with a real durable
// buffer in a temp directory and a fake clock. Lives in test/helpers because it needs both
// the collector and the demo gateway, which never import each other.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import type { BufferItem } from '../../collector/buffer/types.js';
import {
  GatewayStream,
  type GatewayStreamOptions,
} from '../../collector/gateway/gateway-stream.js';
import type { GatewayStreamDeps } from '../../collector/gateway/types.js';
import { DemoGateway, type DemoGatewayOptions } from '../../demo-gateway/demo-gateway.js';
import { AgentMessage, StateEvent } from '../../proto/index.js';
import { FakeClock } from './fake-clock.js';

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

export interface CapturedLogs {
  readonly logger: Logger;
  readonly lines: LogLine[];
  /** Every line as written, for "the secret never appears" assertions. */
  readonly raw: string[];
}

export function captureLogs(level: 'debug' | 'trace' = 'debug'): CapturedLogs {
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const logger = pino(
    { level },
    {
      write: (line: string) => {
        raw.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  );
  return { logger, lines, raw };
}

export const TEST_TOKEN = 'tenant-secret-0123456789';
export const TEST_CLUSTER = '6f1c2a4e-0000-4000-8000-000000000001';
export const TEST_AGENT = 'agent-under-test';

/** The test CA and a server certificate for 127.0.0.1 (test/fixtures/tls). */
export const TLS_FIXTURES = {
  caPath: fileURLToPath(new URL('../fixtures/tls/ca.pem', import.meta.url)),
  cert: readFileSync(new URL('../fixtures/tls/server.pem', import.meta.url)),
  key: readFileSync(new URL('../fixtures/tls/server-key.pem', import.meta.url)),
};

export interface HarnessOptions {
  readonly gateway?: DemoGatewayOptions;
  /** Serve TLS with the fixture certificate. */
  readonly tls?: boolean;
  readonly stream?: Partial<GatewayStreamOptions>;
  readonly deps?: Partial<GatewayStreamDeps>;
  /** Do not start the stream (the test starts it). */
  readonly deferStart?: boolean;
  /** The buffer's spill file (default: buffer.db in a fresh temp directory, removed after). */
  readonly bufferPath?: string;
  /** The buffer's memory tier (default 1 MiB). */
  readonly bufferMemoryBytes?: number;
}

export interface Harness extends AsyncDisposable {
  readonly gateway: DemoGateway;
  readonly stream: GatewayStream;
  readonly buffer: DurableBuffer;
  readonly clock: FakeClock;
  readonly logs: CapturedLogs;
  readonly port: number;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const logs = captureLogs();
  const clock = new FakeClock();
  const gateway = new DemoGateway(options.gateway ?? {}, { logger: logs.logger });
  const port = await gateway.listen(
    '127.0.0.1',
    0,
    options.tls === true ? { cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key } : undefined,
  );
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-gateway-'));
  const buffer = new DurableBuffer(
    {
      path: options.bufferPath ?? join(dir, 'buffer.db'),
      maxMemoryBytes: options.bufferMemoryBytes ?? 1024 * 1024,
      maxDiskBytes: 8 * 1024 * 1024,
    },
    { logger: logs.logger },
  );
  const stream = new GatewayStream(
    {
      address: `127.0.0.1:${port}`,
      tls: false,
      dialTimeoutMs: 5000,
      handshakeTimeoutMs: 10_000,
      reconnectInitialDelayMs: 100,
      reconnectMaxDelayMs: 1000,
      identity: {
        tenantToken: TEST_TOKEN,
        agentVersion: '0.1.0-test',
        clusterId: TEST_CLUSTER,
        agentId: TEST_AGENT,
        capabilities: { logs: true, state: true, metrics: false },
      },
      ...options.stream,
    },
    { logger: logs.logger, buffer, clock, random: () => 0.5, ...options.deps },
  );
  const controller = new AbortController();
  if (options.deferStart !== true) await stream.start(controller.signal);
  return {
    gateway,
    stream,
    buffer,
    clock,
    logs,
    port,
    [Symbol.asyncDispose]: async () => {
      controller.abort();
      await stream.close();
      await buffer.close();
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Buffer item `n`: a StateEvent whose message_id is the item id. */
export function stateItem(n: number): BufferItem {
  const id = `item-${String(n).padStart(5, '0')}`;
  const message: AgentMessage = {
    messageId: id,
    payload: {
      $case: 'state',
      value: StateEvent.fromPartial({ name: `pod-${n}`, namespace: 'default', resource: 'pods' }),
    },
  };
  return { id, kind: 'state', payload: AgentMessage.encode(message).finish() };
}

/** Kept here for the many gateway tests that import it with the harness. */
export { until } from './wait.js';
