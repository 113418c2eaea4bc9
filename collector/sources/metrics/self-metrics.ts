// The metrics source's own series, per source kind and target: scrapes by status, how long they
// took, how many samples they brought and when the last one succeeded.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** kubernetes: metrics.k8s.io; custom: a configured or discovered Prometheus endpoint; profile: pprof. */
export type ScrapeSourceKind = 'kubernetes' | 'custom' | 'profile';

/**
 * Why a scrape ended. `success`, then the failures a user acts on differently: the API or target
 * is absent, it refused us (4xx), it failed (5xx), it took too long, its body was over the cap,
 * it redirected, its body did not parse, or anything else (connection refused, TLS).
 */
export type ScrapeStatus =
  | 'success'
  | 'unavailable'
  | 'client_error'
  | 'server_error'
  | 'timeout'
  | 'too_large'
  | 'redirect'
  | 'parse_error'
  | 'error';

export interface ScrapeRecord {
  readonly source: ScrapeSourceKind;
  /** `pods/<rule>`, `nodes/<rule>`, an endpoint's name (or its URL without credentials). */
  readonly target: string;
  readonly status: ScrapeStatus;
  readonly durationMs: number;
  /** Samples (or events) the scrape produced. */
  readonly samples: number;
  /** Clock time the scrape ended, unix ms. */
  readonly at: number;
}

export interface ScrapeRecorder {
  record(scrape: ScrapeRecord): void;
}

export const noopScrapeRecorder: ScrapeRecorder = { record: () => undefined };

export function registerScrapeMetrics(registry: Registry): ScrapeRecorder {
  const registers = [registry];
  const scrapes = new Counter({
    name: 'kubexa_collector_metrics_scrapes_total',
    help: 'Scrapes of metrics.k8s.io, Prometheus endpoints and pprof endpoints, by outcome.',
    labelNames: ['source', 'target', 'status'],
    registers,
  });
  const duration = new Histogram({
    name: 'kubexa_collector_metrics_scrape_duration_seconds',
    help: 'How long one scrape took, retries included.',
    labelNames: ['source', 'target'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const samples = new Counter({
    name: 'kubexa_collector_metrics_samples_total',
    help: 'Samples (metrics.k8s.io: pod and node events; pprof: profiles) handed to the buffer.',
    labelNames: ['source', 'target'],
    registers,
  });
  const lastSuccess = new Gauge({
    name: 'kubexa_collector_metrics_last_success_timestamp_seconds',
    help: 'Unix time of the last successful scrape of a target.',
    labelNames: ['source', 'target'],
    registers,
  });
  return {
    record({ source, target, status, durationMs, samples: count, at }) {
      scrapes.inc({ source, target, status });
      duration.observe({ source, target }, durationMs / 1000);
      if (count > 0) samples.inc({ source, target }, count);
      if (status === 'success') lastSuccess.set({ source, target }, at / 1000);
    },
  };
}
