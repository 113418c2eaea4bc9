// A gateway that stops reading without closing (issue 9, item 6): the wired collector
// (createCollector, real buffer file, real health server) talks to the demo gateway through a
// TCP proxy, and the proxy freezes its connection: nothing is forwarded either way, nothing is
// closed. The collector must notice (by keepalive pings, or by the session's stall deadline when
// something still answers pings), say so on /readyz, reconnect, and deliver every item once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { createCollector, type CollectorDeps } from '../../collector/collector.js';
import { GatewayStream } from '../../collector/gateway/gateway-stream.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { AgentServiceService, type AgentMessage, type GatewayMessage } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { loadConfig } from '../../shared/config/load-config.js';
import { startServices } from '../../shared/lifecycle/service.js';
import { captureLogs, stateItem, type CapturedLogs } from '../helpers/gateway-harness.js';
import { startTcpForwarder, type TcpForwarder } from '../helpers/tcp-proxy.js';

const ITEMS_BEFORE = 50;
const ITEMS_DURING = 50;

interface GatewayComponent {
  readonly status: string;
  readonly reason: string | null;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Polls until `read` returns a value; bounded by the test's timeout, asserts nothing on time. */
async function poll<T>(what: string, read: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 2000; i++) {
    const value = await read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** A client configuration nothing calls: every source is off in these tests. */
function unusedKube(): KubeConfig {
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'unused' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kube;
}

interface Rig {
  readonly gateway: DemoGateway;
  readonly proxy: TcpForwarder;
  readonly collector: ReturnType<typeof createCollector>;
  readonly logs: CapturedLogs;
  readonly healthPort: number;
}

async function startRig(tuning: CollectorDeps['streamTuning']): Promise<Rig> {
  const gateway = new DemoGateway({}, { logger: pino({ level: 'silent' }) });
  const gatewayPort = await gateway.listen('127.0.0.1', 0);
  cleanups.push(() => gateway.close());
  const proxy = await startTcpForwarder('127.0.0.1', gatewayPort);
  cleanups.push(() => proxy.close());
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-liveness-'));
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const fileText = [
    'gateway:',
    `  address: 127.0.0.1:${String(proxy.port)}`,
    '  tls: false',
    // Long enough that /readyz is seen reporting the reconnect.
    '  reconnect_initial_delay: 1500ms',
    '  reconnect_max_delay: 3s',
    'buffer:',
    `  spill_dir: ${JSON.stringify(dir)}`,
    'collect:',
    '  logs: { enabled: false }',
    '  state: { enabled: false }',
    '  metrics: { enabled: false }',
    // Enabled (one collector is required) but with nothing to watch: no source runs.
    '  events: { pod_lifecycle: false, kubernetes_events: false }',
    'observability:',
    '  health_addr: "127.0.0.1:0"',
    '  metrics_addr: "127.0.0.1:0"',
    '',
  ].join('\n');
  const { config } = loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: 'liveness-token' } });
  const logs = captureLogs();
  const collector = createCollector(
    config,
    { clusterId: 'cluster-uid', agentId: 'agent-liveness' },
    {
      logger: logs.logger,
      kube: unusedKube(),
      // The API server is not what this test is about; /readyz's kubernetes check passes.
      cluster: { listOneNamespace: () => Promise.resolve() },
      ...(tuning ? { streamTuning: tuning } : {}),
    },
  );
  const stop = await startServices(collector.services, new AbortController().signal);
  cleanups.push(stop);
  return { gateway, proxy, collector, logs, healthPort: collector.health.ports().health };
}

async function gatewayReadiness(rig: Rig): Promise<GatewayComponent & { http: number }> {
  const response = await fetch(`http://127.0.0.1:${String(rig.healthPort)}/readyz?verbose`);
  const body = (await response.json()) as { components: { gateway: GatewayComponent } };
  return { ...body.components.gateway, http: response.status };
}

/** Runs the scenario; returns every /readyz gateway reason seen while the path was frozen. */
async function freezeAndRecover(rig: Rig, reasonToSee: RegExp): Promise<string[]> {
  const { gateway, proxy, collector } = rig;
  await poll('readiness', async () => {
    const ready = await gatewayReadiness(rig);
    return ready.http === 200 && ready.reason === null ? ready : undefined;
  });
  for (let n = 0; n < ITEMS_BEFORE; n++) collector.buffer.enqueue(stateItem(n));
  await gateway.waitForStored('state', ITEMS_BEFORE);
  await poll('settled', () =>
    Promise.resolve(collector.buffer.stats().inflight === 0 ? true : undefined),
  );
  const firstSession = collector.stream.status().sessionId;

  proxy.freeze();
  for (let n = ITEMS_BEFORE; n < ITEMS_BEFORE + ITEMS_DURING; n++) {
    collector.buffer.enqueue(stateItem(n));
  }
  const reasons: string[] = [];
  await poll(`/readyz saying ${String(reasonToSee)}`, async () => {
    const ready = await gatewayReadiness(rig);
    if (ready.reason !== null) reasons.push(ready.reason);
    expect(ready.http).toBe(200); // within the grace: a reconnect, not an outage
    return ready.reason !== null && reasonToSee.test(ready.reason) ? true : undefined;
  });
  await poll('a new session', () => {
    const { state, sessionId } = collector.stream.status();
    return Promise.resolve(state === 'ready' && sessionId !== firstSession ? true : undefined);
  });
  await gateway.waitForStored('state', ITEMS_BEFORE + ITEMS_DURING);
  await poll('everything settled', () => {
    const { pending, inflight } = collector.buffer.stats();
    return Promise.resolve(pending === 0 && inflight === 0 ? true : undefined);
  });
  const expected = Array.from({ length: ITEMS_BEFORE + ITEMS_DURING }, (_, n) => stateItem(n).id);
  expect(gateway.store.messageIds('state')).toEqual(expected);
  expect(await gatewayReadiness(rig)).toMatchObject({ http: 200, reason: null });
  return reasons;
}

describe('a gateway path that freezes without closing', () => {
  it('is found dead by keepalive pings; the collector reconnects and loses nothing', async () => {
    const rig = await startRig({
      keepaliveTimeMs: 300,
      keepaliveTimeoutMs: 700,
      // A tenfold margin behind the pings: if they did not work, the deadline would end the
      // session instead, and the log would say "stalled".
      stallTimeoutMs: 10_000,
    });
    const reasons = await freezeAndRecover(rig, /^not connected for \d+ s/);
    expect(reasons.some((r) => r.includes('within the 30 s grace'))).toBe(true);
    const lost = rig.logs.lines.find((l) => l.msg === 'gateway stream lost; reconnecting');
    expect(lost?.['reason']).toMatch(/^UNAVAILABLE/);
    expect(rig.logs.lines.some((l) => l.msg === 'gateway stream stalled; reconnecting')).toBe(
      false,
    );
  }, 60_000);

  it('is found dead by the stall deadline before keepalive would; /readyz says so first', async () => {
    // Keepalive at its 30 s default never fires within this test: only the deadline can.
    const rig = await startRig({ stallTimeoutMs: 6000 });
    const reasons = await freezeAndRecover(rig, /^not connected for \d+ s/);
    expect(reasons[0]).toMatch(
      /^connected, but no progress from the gateway for [56] s; the session ends at 6 s$/,
    );
    const stalled = rig.logs.lines.find((l) => l.msg === 'gateway stream stalled; reconnecting');
    expect(stalled?.['reason']).toMatch(/items awaiting an ack/);
    const metrics = await (
      await fetch(`http://127.0.0.1:${String(rig.collector.health.ports().metrics)}/metrics`)
    ).text();
    expect(metrics).toContain('kubexa_collector_gateway_stalled_sessions_total 1');
    expect(rig.logs.lines.some((l) => l.msg === 'gateway stream lost; reconnecting')).toBe(false);
  }, 60_000);
});

/**
 * A gateway whose first session accepts the handshake and then stops calling read: its HTTP/2
 * layer still answers pings, so keepalive sees a healthy connection. Later sessions ack
 * everything and record what they received.
 */
async function gatewayThatStopsReading(): Promise<{
  port: number;
  received: string[];
  sessions: () => number;
  close: () => void;
}> {
  const received: string[] = [];
  let sessions = 0;
  const server = new Server();
  server.addService(AgentServiceService, {
    connect: (call: ServerDuplexStream<AgentMessage, GatewayMessage>) => {
      const session = ++sessions;
      call.on('error', () => undefined);
      call.on('data', (message: AgentMessage) => {
        if (message.payload?.$case === 'handshake') {
          call.write({
            messageId: `hs-${String(session)}`,
            payload: {
              $case: 'handshake',
              value: {
                accepted: true,
                sessionId: `session-${String(session)}`,
                serverVersion: 'test',
                rejectionReason: '',
                config: undefined,
                protoVersion: 'v1',
                supportedProtoVersions: ['v1'],
                deliveryAcks: true,
                acceptedPayloads: [],
              },
            },
          });
          if (session === 1) call.pause(); // reads nothing more, closes nothing
          return;
        }
        if (message.payload?.$case !== 'state') return;
        if (!received.includes(message.messageId)) received.push(message.messageId);
        call.write({
          messageId: `ack-${message.messageId}`,
          payload: { $case: 'ack', value: { messageIds: [message.messageId] } },
        });
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => {
      if (err) reject(err);
      else resolve(p);
    });
  });
  return {
    port,
    received,
    sessions: () => sessions,
    close: () => {
      server.forceShutdown();
    },
  };
}

describe('a gateway that stops reading while its HTTP/2 layer answers pings', () => {
  it('is found dead by the stall deadline, not by keepalive; nothing is lost', async () => {
    const gateway = await gatewayThatStopsReading();
    cleanups.push(gateway.close);
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-liveness-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const logs = captureLogs();
    const buffer = new DurableBuffer(
      { path: join(dir, 'buffer.db'), maxMemoryBytes: 1024 * 1024, maxDiskBytes: 8 * 1024 * 1024 },
      { logger: logs.logger },
    );
    cleanups.push(() => buffer.close());
    const stream = new GatewayStream(
      {
        address: `127.0.0.1:${String(gateway.port)}`,
        tls: false,
        dialTimeoutMs: 5000,
        handshakeTimeoutMs: 5000,
        reconnectInitialDelayMs: 100,
        reconnectMaxDelayMs: 200,
        // Pings every 200 ms, answered within 1 s: they keep passing while nothing is read.
        keepaliveTimeMs: 200,
        keepaliveTimeoutMs: 1000,
        stallTimeoutMs: 2000,
        flushIntervalMs: 100,
        identity: {
          tenantToken: 't',
          agentVersion: 'test',
          clusterId: 'c',
          agentId: 'a',
          capabilities: { logs: false, state: false, metrics: false },
        },
      },
      { logger: logs.logger, buffer, clock: systemClock },
    );
    cleanups.push(() => stream.close());
    const items = Array.from({ length: 100 }, (_, n) => stateItem(n));
    for (const item of items) buffer.enqueue(item);
    await stream.start(new AbortController().signal);
    await poll('all items at the second session', () =>
      Promise.resolve(gateway.received.length === items.length ? true : undefined),
    );
    await poll('settled', () =>
      Promise.resolve(buffer.stats().inflight + buffer.stats().pending === 0 ? true : undefined),
    );
    expect(gateway.received).toEqual(items.map((item) => item.id));
    expect(gateway.sessions()).toBe(2);
    const ends = logs.lines.filter((l) => l.msg.startsWith('gateway stream '));
    expect(ends.map((l) => l.msg)).toEqual([
      'gateway stream connected',
      'gateway stream stalled; reconnecting',
      'gateway stream connected',
    ]);
  }, 60_000);
});
