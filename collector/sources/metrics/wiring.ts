// Builds the metrics source from collect.metrics: the one place that maps its config keys onto
// the parts, so collector.ts wires it with one call.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../../../shared/clock.js';
import type { Config } from '../../../shared/config/schema.js';
import type { Sink } from '../source.js';
import type { MessageIdentity } from './encode.js';
import { kubeMetricsApi } from './metrics-api.js';
import { createMetricsSource, type MetricsPart, type MetricsSource } from './metrics-source.js';
import { registerScrapeMetrics } from './self-metrics.js';

export interface MetricsWiringDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly kube: KubeConfig;
  readonly sink: Sink;
  readonly registry: Registry;
}

export function wireMetricsSource(
  metrics: Config['collect']['metrics'],
  identity: MessageIdentity,
  deps: MetricsWiringDeps,
): MetricsSource {
  const recorder = registerScrapeMetrics(deps.registry);
  const parts: MetricsPart[] = [];
  const source = createMetricsSource(
    {
      identity,
      kube: {
        rules: metrics.rules,
        podIntervalMs: metrics.pod_interval,
        nodeIntervalMs: metrics.node_interval,
      },
    },
    {
      api: kubeMetricsApi(deps.kube),
      sink: deps.sink,
      logger: deps.logger,
      clock: deps.clock,
      recorder,
      parts,
    },
  );
  new Gauge({
    name: 'kubexa_collector_metrics_api_available',
    help: 'Whether metrics.k8s.io answered the last scrape: 1 yes, 0 no (absent or down), -1 not scraped yet or no rule.',
    registers: [deps.registry],
    collect() {
      const state = source.kubeMetricsAvailability();
      this.set(state === 'available' ? 1 : state === 'unavailable' ? 0 : -1);
    },
  });
  return source;
}
