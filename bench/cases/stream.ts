// Items/s from a DurableBuffer through GatewayStream to the demo gateway over loopback, with
// delivery_acks on (an item counts once the gateway's Ack has settled it in the buffer), beside
// a bare grpc-js bidi stream carrying the same payloads on loopback in the same run. Both ends
// of each stream share this process's one thread, so the demo gateway's own work (decode, one
// SQLite insert per message, acks) is part of the figure.
import { once } from 'node:events';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  Client,
  Server,
  ServerCredentials,
  credentials,
  type ServerDuplexStream,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import { pino } from 'pino';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import type { BufferItem } from '../../collector/buffer/types.js';
import { GatewayStream } from '../../collector/gateway/gateway-stream.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { AgentMessage, LogBatch, LogEntry } from '../../proto/index.js';
import { median, rate, type BenchCase, type BenchContext, type BenchResult } from '../types.js';
import { until } from '../../test/helpers/wait.js';

const ITEMS = 40_000;
const ROUNDS = 3;
/** Untimed items first, so both sides run JIT-compiled code on a warm connection. */
const WARMUP = 4_000;
const PAYLOAD_BYTES = 200;
const HOST = '127.0.0.1';

/** Encoded AgentMessages of PAYLOAD_BYTES (one log line each), message_id = item id. */
function items(from: number, count: number): BufferItem[] {
  const encode = (id: string, text: string): Uint8Array =>
    AgentMessage.encode({
      messageId: id,
      payload: {
        $case: 'logs',
        value: LogBatch.fromPartial({
          entries: [
            LogEntry.fromPartial({
              podName: 'web-7d9f-abcde',
              namespace: 'shop',
              container: 'nginx',
              timestamp: '1700000000000000000',
              message: text,
            }),
          ],
        }),
      },
    }).finish();
  const sample = encode(itemId(0), '');
  const text = 'x'.repeat(Math.max(0, PAYLOAD_BYTES - sample.length - 1));
  return Array.from({ length: count }, (_, i) => {
    const id = itemId(from + i);
    return { id, kind: 'log' as const, payload: encode(id, text) };
  });
}

const itemId = (n: number): string => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

/** The run's watchdog bounds a stuck bench; this only names what it waited for. */
const BENCH_WAIT = { timeoutMs: 600_000 };

async function measureGatewayStream(bufferPath: string): Promise<number> {
  const logger = pino({ level: 'silent' });
  const gateway = new DemoGateway({ deliveryAcks: true }, { logger });
  const port = await gateway.listen(HOST, 0);
  // Memory large enough for the whole run: spilling is the buffer bench's subject.
  const buffer = new DurableBuffer(
    {
      path: bufferPath,
      maxMemoryBytes: 64 * 1024 * 1024,
      maxDiskBytes: 256 * 1024 * 1024,
    },
    { logger },
  );
  const stream = new GatewayStream(
    {
      address: `${HOST}:${port}`,
      tls: false,
      dialTimeoutMs: 5000,
      handshakeTimeoutMs: 5000,
      reconnectInitialDelayMs: 100,
      reconnectMaxDelayMs: 1000,
      identity: {
        tenantToken: 'bench-token',
        agentVersion: '0.0.0-bench',
        clusterId: '00000000-0000-4000-8000-00000000beef',
        agentId: 'bench',
        capabilities: { logs: true, state: false, metrics: false },
      },
    },
    { logger, buffer },
  );
  const controller = new AbortController();
  try {
    await stream.start(controller.signal);
    await until(() => stream.status().state === 'ready', 'the stream ready', BENCH_WAIT);
    if (!stream.status().deliveryAcks) throw new Error('the demo gateway did not turn acks on');
    const settled = (): number => stream.status().counters.settled;

    for (const item of items(0, WARMUP)) buffer.enqueue(item);
    await until(() => settled() >= WARMUP, 'the warm-up settled', BENCH_WAIT);

    // Enqueued synchronously, so the drain starts only after the clock does.
    for (const item of items(WARMUP, ITEMS)) buffer.enqueue(item);
    const start = performance.now();
    await until(() => settled() >= WARMUP + ITEMS, 'every item settled', BENCH_WAIT);
    const ms = performance.now() - start;
    if (gateway.store.count('logs') !== WARMUP + ITEMS)
      throw new Error('items missing at the gateway');
    return rate(ITEMS, ms);
  } finally {
    controller.abort();
    await stream.close();
    await buffer.close();
    await gateway.close();
  }
}

const RAW_PATH = '/kubexa.bench.Raw/Stream';
const passthrough = (bytes: Buffer): Buffer => bytes;
const RAW_SERVICE: ServiceDefinition = {
  stream: {
    path: RAW_PATH,
    requestStream: true,
    responseStream: true,
    requestSerialize: passthrough,
    requestDeserialize: passthrough,
    responseSerialize: passthrough,
    responseDeserialize: passthrough,
  },
};

/** Writes every payload (respecting write backpressure), half-closes, and waits for the count. */
async function rawCall(client: Client, payloads: readonly Buffer[]): Promise<void> {
  const call = client.makeBidiStreamRequest(RAW_PATH, passthrough, passthrough);
  const reply = once(call, 'data');
  for (const payload of payloads) {
    if (!call.write(payload)) await once(call, 'drain');
  }
  call.end();
  const [count] = (await reply) as [Buffer];
  if (count.readUInt32BE(0) !== payloads.length) throw new Error('raw stream lost payloads');
  await once(call, 'status');
}

async function measureRawStream(): Promise<number> {
  const server = new Server();
  server.addService(RAW_SERVICE, {
    stream: (call: ServerDuplexStream<Buffer, Buffer>) => {
      let received = 0;
      call.on('data', () => {
        received++;
      });
      call.on('end', () => {
        const count = Buffer.alloc(4);
        count.writeUInt32BE(received);
        call.write(count);
        call.end();
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${HOST}:0`, ServerCredentials.createInsecure(), (err, bound) => {
      if (err) reject(err);
      else resolve(bound);
    });
  });
  const client = new Client(`${HOST}:${port}`, credentials.createInsecure());
  const toBuffer = (item: BufferItem): Buffer =>
    Buffer.from(item.payload.buffer, item.payload.byteOffset, item.payload.byteLength);
  try {
    await rawCall(client, items(0, WARMUP).map(toBuffer));
    const payloads = items(WARMUP, ITEMS).map(toBuffer);
    const start = performance.now();
    await rawCall(client, payloads);
    return rate(ITEMS, performance.now() - start);
  } finally {
    client.close();
    server.forceShutdown();
  }
}

export const streamBench: BenchCase = {
  name: 'stream',
  async run({ dir }: BenchContext): Promise<BenchResult[]> {
    // Interleaved rounds, median of each: a noisy neighbour hits both sides alike.
    const baseline: number[] = [];
    const streamed: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      baseline.push(await measureRawStream());
      streamed.push(await measureGatewayStream(join(dir, `round-${round}.db`)));
    }
    return [
      {
        name: 'stream to demo gateway (acks on)',
        itemsPerSecond: median(streamed),
        baselineName: 'bare grpc-js bidi stream',
        baselineItemsPerSecond: median(baseline),
      },
    ];
  },
};
