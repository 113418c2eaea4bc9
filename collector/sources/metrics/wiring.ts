// Builds the metrics source from collect.metrics: the one place that maps its config keys onto
// the parts, so collector.ts wires it with one call.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../../../shared/clock.js';
import type { Config } from '../../../shared/config/schema.js';
import type { Sink } from '../source.js';
import type { MessageIdentity } from './encode.js';
import { compileFilter } from './family-json.js';
import { kubeMetricsApi } from './metrics-api.js';
import {
  kubePodWatch,
  PodDiscovery,
  pprofUrl,
  prometheusUrl,
  workloadOf,
} from './pod-discovery.js';
import { ProfileTargets } from './profiles.js';
import { PrometheusTargets, type PromTarget } from './prometheus-targets.js';
import { createMetricsSource, type MetricsPart, type MetricsSource } from './metrics-source.js';
import { registerScrapeMetrics } from './self-metrics.js';

const DEFAULT_CUSTOM_INTERVAL_MS = 30_000;
const DEFAULT_CUSTOM_TIMEOUT_MS = 10_000;

type CustomEndpoint = Config['collect']['metrics']['custom_endpoints'][number];

function customTarget(endpoint: CustomEndpoint, index: number): PromTarget {
  const interval = endpoint.interval ?? 0;
  return {
    name: endpoint.name.trim() !== '' ? endpoint.name : `endpoint-${String(index)}`,
    url: endpoint.url,
    intervalMs: interval > 0 ? interval : DEFAULT_CUSTOM_INTERVAL_MS,
    timeoutMs: endpoint.timeout ?? DEFAULT_CUSTOM_TIMEOUT_MS,
    maxBodyBytes: endpoint.max_body_bytes,
    caFile: endpoint.ca_file,
    bearerTokenFile: endpoint.bearer_token_file,
    extraLabels: endpoint.extra_labels,
    filter: compileFilter(endpoint.allow_metrics, endpoint.deny_metrics),
  };
}

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
  const common = { sink: deps.sink, logger: deps.logger, clock: deps.clock, recorder, identity };
  if (metrics.custom_endpoints.length > 0) {
    parts.push(new PrometheusTargets(metrics.custom_endpoints.map(customTarget), common));
  }
  const discovery = metrics.annotation_discovery;
  if (discovery.enabled) {
    const discovered = new PrometheusTargets([], common);
    const filter = compileFilter(discovery.allow_metrics, discovery.deny_metrics);
    parts.push(
      discovered,
      new PodDiscovery(
        {
          what: 'prometheus',
          podNames: discovery.pod_names,
          refreshMs: discovery.refresh,
          targetsOf: (pod) => {
            const url = prometheusUrl(pod);
            if (url === undefined) return [];
            return [
              {
                name: `pod/${pod.namespace}/${pod.name}`,
                url,
                intervalMs: discovery.interval,
                timeoutMs: discovery.timeout,
                maxBodyBytes: discovery.max_body_bytes,
                caFile: '',
                bearerTokenFile: '',
                extraLabels: { namespace: pod.namespace, pod: pod.name },
                filter,
              },
            ];
          },
          apply: (targets) => {
            discovered.setTargets(targets);
          },
        },
        {
          pods: kubePodWatch(deps.kube, discovery.namespace, discovery.label_selector),
          clock: deps.clock,
          logger: deps.logger,
        },
      ),
    );
  }
  const profiles = metrics.profiles;
  if (profiles.enabled) {
    const profileTargets = new ProfileTargets(
      profiles.targets.map((target, index) => ({
        name: target.name.trim() !== '' ? target.name : `profile-${String(index)}`,
        baseUrl: target.url,
        namespace: target.namespace,
        pod: target.pod,
        container: target.container,
        workload: target.workload,
      })),
      {
        intervalMs: profiles.interval,
        cpuDurationMs: profiles.cpu_duration,
        timeoutMs: profiles.timeout,
        types: profiles.types,
        maxConcurrent: profiles.max_concurrent,
        maxProfileBytes: profiles.max_profile_bytes,
      },
      common,
    );
    parts.push(profileTargets);
    if (profiles.annotation_discovery) {
      const configured = profileTargets.configured;
      parts.push(
        new PodDiscovery(
          {
            what: 'profiles',
            podNames: [],
            refreshMs: metrics.annotation_discovery.refresh,
            targetsOf: (pod) => {
              const baseUrl = pprofUrl(pod);
              if (baseUrl === undefined) return [];
              return [
                {
                  name: `pod/${pod.namespace}/${pod.name}`,
                  baseUrl,
                  namespace: pod.namespace,
                  pod: pod.name,
                  container: pod.annotations['kubexa.io/pprof-container'] ?? '',
                  workload: workloadOf(pod),
                },
              ];
            },
            apply: (targets) => {
              profileTargets.setTargets([...configured, ...targets]);
            },
          },
          {
            pods: kubePodWatch(deps.kube, profiles.namespace, profiles.label_selector),
            clock: deps.clock,
            logger: deps.logger,
          },
        ),
      );
    }
  }
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
