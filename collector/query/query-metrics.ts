// The live query's self-metrics on the collector's registry.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type QueryOutcome =
  | 'ok'
  | 'policy_denied'
  | 'internal'
  | 'resource_exhausted'
  | 'rbac_denied'
  | 'not_found'
  | 'timeout'
  | 'too_large'
  | 'expired';

export interface QueryObservation {
  readonly verb: 'list' | 'get';
  /** "v/r" or "g/v/r"; "other" for denials and failed wildcard-authorized queries. */
  readonly resource: string;
  readonly view: 'table' | 'full';
  readonly outcome: QueryOutcome;
  readonly seconds: number;
  /** Payload bytes sent back; 0 for a refusal. */
  readonly bytes: number;
}

export interface QueryMetrics {
  observe(observation: QueryObservation): void;
  started(): void;
  finished(): void;
}

export function registerQueryMetrics(registry: Registry): QueryMetrics {
  const registers = [registry];
  const total = new Counter({
    name: 'kubexa_collector_query_total',
    help: 'Live queries answered, by verb, resource, view and outcome.',
    labelNames: ['verb', 'resource', 'view', 'outcome'],
    registers,
  });
  const duration = new Histogram({
    name: 'kubexa_collector_query_duration_seconds',
    help: 'Time from a live query received to its answer, gate wait included.',
    labelNames: ['verb', 'resource'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const bytes = new Histogram({
    name: 'kubexa_collector_query_response_bytes',
    help: 'Payload bytes of answered live queries.',
    labelNames: ['verb', 'resource'],
    // 1 KiB x 4^n, as the Go agent: 1 KiB .. 16 MiB.
    buckets: Array.from({ length: 8 }, (_, n) => 1024 * 4 ** n),
    registers,
  });
  const inflight = new Gauge({
    name: 'kubexa_collector_query_inflight',
    help: 'Live queries running or waiting for a slot.',
    registers,
  });
  return {
    observe(o) {
      total.inc({ verb: o.verb, resource: o.resource, view: o.view, outcome: o.outcome });
      duration.observe({ verb: o.verb, resource: o.resource }, o.seconds);
      if (o.outcome === 'ok') bytes.observe({ verb: o.verb, resource: o.resource }, o.bytes);
    },
    started() {
      inflight.inc();
    },
    finished() {
      inflight.dec();
    },
  };
}
