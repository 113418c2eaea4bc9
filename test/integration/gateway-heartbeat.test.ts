// Ingest loss reaches the gateway (issue 9, item 4): the wired collector (createCollector, the
// real pod log source on the test cluster, a real buffer file) ships a container's log to the
// demo gateway on a real socket. The gateway pushes ingest rules and a 1 s heartbeat; lines cut
// to max_line_bytes, too old, from the future and over the rate are then counted in the
// heartbeats the gateway receives, cumulatively, and equal to what /metrics says. And the Metrics
// API's availability (AgentHealth.metrics_api, issue 18) reaches the gateway the same way: the
// metrics.k8s.io APIService deleted mid-run turns it "unavailable", restored "available" again.
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiregistrationV1Api, CoreV1Api, type V1APIService } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createCollector } from '../../collector/collector.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { AgentMessage, ConfigUpdate, type AgentHealth } from '../../proto/index.js';
import { loadConfig } from '../../shared/config/load-config.js';
import { startServices } from '../../shared/lifecycle/service.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveLogsFromFile,
} from '../helpers/kube.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One sample of a Prometheus text exposition, 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/**
 * The wired collector from `fileText` (its token in the environment), started with its every
 * service and stopped after the test, and the heartbeats the demo gateway receives from it.
 */
async function startWiredCollector(
  gateway: DemoGateway,
  kc: ReturnType<typeof loadKubeConfig>,
  fileText: string,
  agentId: string,
) {
  const { config } = loadConfig({ fileText, env: { KUBEXA_TENANT_TOKEN: 'heartbeat-token' } });
  const logs = captureLogs();
  const collector = createCollector(
    config,
    { clusterId: 'cluster-uid', agentId },
    { logger: logs.logger, kube: kc },
  );
  const stop = await startServices(collector.services, new AbortController().signal);
  cleanups.push(stop);
  const beats: AgentHealth[] = [];
  gateway.events.on('message', (message) => {
    if (message.payload?.$case === 'heartbeat' && message.payload.value.health) {
      beats.push(message.payload.value.health);
    }
  });
  return { collector, logs, beats };
}

describe('heartbeats', () => {
  it('carry the log source’s truncated, too-old, future and rate-limited counts, as /metrics does', async () => {
    const kc = loadKubeConfig(inject('kubeconfigPath'));
    const namespace = await createTestNamespace(kc, 'heartbeat');
    cleanups.push(() => namespace.delete());
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-heartbeat-'));
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const logsFile = join(dir, 'app.log');
    writeFileSync(logsFile, '');
    await serveLogsFromFile(kc, { namespace: namespace.name, logsFile });
    await kc.makeApiClient(CoreV1Api).createNamespacedPod({
      namespace: namespace.name,
      body: {
        metadata: { name: 'app' },
        spec: { containers: [{ name: 'main', image: 'registry.invalid/app:1' }] },
      },
    });

    const gateway = new DemoGateway({}, { logger: pino({ level: 'silent' }) });
    const gatewayPort = await gateway.listen('127.0.0.1', 0);
    cleanups.push(() => gateway.close());
    const fileText = [
      'gateway:',
      `  address: 127.0.0.1:${String(gatewayPort)}`,
      '  tls: false',
      'buffer:',
      `  spill_dir: ${JSON.stringify(join(dir, 'spill'))}`,
      'collect:',
      '  logs:',
      `    checkpoint_dir: ${JSON.stringify(join(dir, 'checkpoints'))}`,
      '    rules:',
      `      - namespace: ${namespace.name}`,
      '  state: { enabled: false }',
      '  metrics: { enabled: false }',
      'observability:',
      '  health_addr: "127.0.0.1:0"',
      '  metrics_addr: "127.0.0.1:0"',
      '',
    ].join('\n');
    const { collector, logs, beats } = await startWiredCollector(
      gateway,
      kc,
      fileText,
      'agent-heartbeat',
    );

    // The gateway asks for a 1 s heartbeat and tight ingest rules: 32-byte lines, samples at
    // most a minute old or ahead, 1 byte/s per stream after a 400-byte burst.
    const session = await gateway.waitForSession();
    gateway.sendConfigUpdate(
      session.sessionId,
      ConfigUpdate.fromPartial({
        configVersion: 'heartbeat-1',
        config: {
          heartbeatIntervalSec: 1,
          ingestRules: {
            maxLineBytes: '32',
            maxSampleAgeMs: '60000',
            maxFutureSkewMs: '60000',
            perStreamRateBytes: '1',
            perStreamBurstBytes: '400',
          },
        },
      }),
    );
    await eventually(
      'the update applied',
      () =>
        Promise.resolve(
          logs.lines.some((l) => l.msg === 'ingest limits updated') &&
            collector.stream.settings.heartbeatIntervalMs === 1000
            ? true
            : undefined,
        ),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(logs.lines.some((l) => l.msg === 'gateway config update out of range: clamped')).toBe(
      false,
    );

    const now = Date.now();
    const lines = [
      criLine(new Date(now - 3_600_000), 'an hour old'),
      ...Array.from({ length: 10 }, (_, i) => criLine(new Date(now), `fine ${String(i)}`)),
      criLine(new Date(now), `cut: ${'x'.repeat(100)}`),
      ...Array.from({ length: 60 }, (_, i) =>
        criLine(new Date(now), `over the rate ${String(i).padStart(4, '0')}`),
      ),
      criLine(new Date(now + 3_600_000), 'an hour ahead'),
    ];
    appendFileSync(logsFile, lines.join(''));

    // Heartbeats are cumulative: wait until every kind of loss shows and two in a row agree.
    const settled = await eventually(
      'heartbeats reporting every kind of loss, twice the same',
      () => {
        const [previous, last] = beats.slice(-2);
        const complete =
          last !== undefined &&
          Number(last.truncatedLines) > 0 &&
          Number(last.droppedTooOld) > 0 &&
          Number(last.droppedFuture) > 0 &&
          Number(last.droppedRateLimited) > 0;
        return Promise.resolve(
          complete && JSON.stringify(previous) === JSON.stringify(last) ? last : undefined,
        );
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(settled).toMatchObject({
      truncatedLines: '1',
      droppedTooOld: '1',
      droppedFuture: '1',
      status: 'healthy',
    });
    const rateLimited = Number(settled.droppedRateLimited);
    // 400 bytes of burst, 10 small lines and the cut one take 102: most of the 60 do not fit.
    expect(rateLimited).toBeGreaterThanOrEqual(30);
    expect(rateLimited).toBeLessThan(60);

    const metrics = await (
      await fetch(`http://127.0.0.1:${String(collector.health.ports().metrics)}/metrics`)
    ).text();
    expect(sample(metrics, 'kubexa_collector_log_truncated_lines_total')).toBe(1);
    const dropped = (reason: string): number =>
      sample(metrics, `kubexa_collector_log_dropped_lines_total{reason="${reason}"}`);
    expect([dropped('too_old'), dropped('future'), dropped('rate_limited')]).toEqual([
      1,
      1,
      rateLimited,
    ]);

    // What was forwarded: the cut line, flagged; the fine lines; the rest of the 60.
    const entries = gateway.store
      .payloads('logs')
      .map((bytes) => AgentMessage.decode(bytes))
      .flatMap((message) =>
        message.payload?.$case === 'logs' ? message.payload.value.entries : [],
      );
    expect(entries.find((e) => e.message.startsWith('cut: '))).toMatchObject({ truncated: true });
    const over = entries.filter((e) => e.message.startsWith('over the rate '));
    expect(over).toHaveLength(60 - rateLimited);
  });

  it('carry whether metrics.k8s.io is served: unavailable while its APIService is gone', async () => {
    const kc = loadKubeConfig(inject('kubeconfigPath'));
    const namespace = await createTestNamespace(kc, 'heartbeat-metrics');
    cleanups.push(() => namespace.delete());
    const gateway = new DemoGateway({}, { logger: pino({ level: 'silent' }) });
    const gatewayPort = await gateway.listen('127.0.0.1', 0);
    cleanups.push(() => gateway.close());
    const fileText = [
      'gateway:',
      `  address: 127.0.0.1:${String(gatewayPort)}`,
      '  tls: false',
      'collect:',
      '  logs: { enabled: false }',
      '  state: { enabled: false }',
      '  metrics:',
      '    rules:',
      `      - { id: shop, namespace: ${namespace.name}, resources: [pods], pod_interval: 2s }`,
      'observability:',
      '  health_addr: "127.0.0.1:0"',
      '  metrics_addr: "127.0.0.1:0"',
      '',
    ].join('\n');
    const { logs, beats } = await startWiredCollector(
      gateway,
      kc,
      fileText,
      'agent-heartbeat-metrics',
    );
    const session = await gateway.waitForSession();
    gateway.sendConfigUpdate(
      session.sessionId,
      ConfigUpdate.fromPartial({
        configVersion: 'heartbeat-metrics-1',
        config: { heartbeatIntervalSec: 1 },
      }),
    );
    /** The next heartbeat saying `state`, and the gateway's session view agreeing. */
    const reported = (state: string, timeoutMs: number) => {
      const from = beats.length;
      return eventually(
        `a heartbeat with metrics_api "${state}"`,
        () =>
          Promise.resolve(
            beats.slice(from).some((b) => b.metricsApi === state) &&
              gateway.sessions().find((s) => s.sessionId === session.sessionId)?.lastHeartbeat
                ?.metricsApi === state
              ? true
              : undefined,
          ),
        { timeoutMs, intervalMs: 200 },
      );
    };
    await reported('available', 60_000);

    const registration = kc.makeApiClient(ApiregistrationV1Api);
    const name = 'v1beta1.metrics.k8s.io';
    const saved = await registration.readAPIService({ name });
    let restored = false;
    const restore = async () => {
      if (restored) return;
      restored = true;
      const body: V1APIService = {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: { name, labels: saved.metadata?.labels ?? {} },
        spec: saved.spec!,
      };
      await registration.createAPIService({ body });
    };
    cleanups.push(() => restore().catch(() => undefined));
    await registration.deleteAPIService({ name });
    await reported('unavailable', 30_000);
    await restore();
    // The unavailable API is asked again every 30 s.
    await reported('available', 90_000);
    expect(logs.lines.filter((l) => l.level >= 50)).toEqual([]);
  });
});
