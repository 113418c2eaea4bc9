// The metrics source: metrics.k8s.io scrapes, custom Prometheus endpoints (configured and
// discovered by pod annotations) and pprof profiles, all writing into the buffer through the
// Sink contract. Nothing here fails readiness: a cluster without metrics-server is a cluster
// without pod metrics, not a broken agent; availability is reported on its own.
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import type { Sink, Source } from '../source.js';
import type { MessageIdentity } from './encode.js';
import { KubeMetricsScraper, type Availability, type KubeMetricsOptions } from './kube-metrics.js';
import type { MetricsApi } from './metrics-api.js';
import type { ScrapeRecorder } from './self-metrics.js';

/** A part of the source with its own loops (custom endpoints, discovery, profiles). */
export interface MetricsPart {
  start(signal: AbortSignal): void;
  stopped(): Promise<void>;
}

export interface MetricsSourceOptions {
  readonly kube: Omit<KubeMetricsOptions, 'identity'> | undefined;
  readonly identity: MessageIdentity;
}

export interface MetricsSourceDeps {
  readonly api: MetricsApi;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly recorder: ScrapeRecorder;
  /** Custom endpoints, annotation discovery, profiles: built by the wiring when configured. */
  readonly parts?: readonly MetricsPart[];
}

export interface MetricsSource extends Source {
  /** 'unknown' until the first metrics.k8s.io scrape; undefined with no kube rule. */
  kubeMetricsAvailability(): Availability | undefined;
}

export function createMetricsSource(
  options: MetricsSourceOptions,
  deps: MetricsSourceDeps,
): MetricsSource {
  const logger = deps.logger.child({ source: 'metrics' });
  const kube =
    options.kube !== undefined && options.kube.rules.length > 0
      ? new KubeMetricsScraper(
          { ...options.kube, identity: options.identity },
          { api: deps.api, sink: deps.sink, logger, clock: deps.clock, recorder: deps.recorder },
        )
      : undefined;
  const parts = deps.parts ?? [];
  const abort = new AbortController();
  // Every target's loop listens on this signal: hundreds of targets are not a listener leak.
  setMaxListeners(0, abort.signal);
  let started = false;
  return {
    name: 'metrics',
    start(signal) {
      if (started) return Promise.resolve();
      started = true;
      if (signal.aborted) abort.abort();
      else {
        signal.addEventListener(
          'abort',
          () => {
            abort.abort();
          },
          { once: true },
        );
      }
      kube?.start(abort.signal);
      for (const part of parts) part.start(abort.signal);
      return Promise.resolve();
    },
    async close() {
      abort.abort();
      await kube?.stopped();
      await Promise.all(parts.map((part) => part.stopped()));
    },
    up: () => true,
    kubeMetricsAvailability: () => kube?.availability(),
  };
}
