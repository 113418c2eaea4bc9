// The state source's self-metrics (reference 5 and 12, with the collector's prefix): events by
// resource and type, drops by reason, cache synced and cached objects per watch, watch restarts
// by cause.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { StateCounters, StateSource } from './state-source.js';

export function registerStateMetrics(
  registry: Registry,
  source: () => StateSource | undefined,
): StateCounters {
  const registers = [registry];
  const events = new Counter({
    name: 'kubexa_collector_state_events_total',
    help: 'StateEvents sent to the buffer, by resource and type (RESYNC: a periodic resync).',
    labelNames: ['resource', 'type'] as const,
    registers,
  });
  const dropped = new Counter({
    name: 'kubexa_collector_state_dropped_total',
    help: 'State changes not sent, by resource and reason.',
    labelNames: ['resource', 'reason'] as const,
    registers,
  });
  const restarts = new Counter({
    name: 'kubexa_collector_watch_restarts_total',
    help: 'Watches started again, by resource and cause (expired: 410 Gone; timeout: the server ended it; error; forbidden).',
    labelNames: ['resource', 'cause'] as const,
    registers,
  });
  new Gauge({
    name: 'kubexa_collector_state_cache_synced',
    help: '1 when the watch of this resource (and namespace) has finished its first list.',
    labelNames: ['resource', 'namespace'] as const,
    registers,
    collect() {
      this.reset();
      for (const watch of source()?.watches() ?? []) {
        this.set(
          { resource: watch.resource, namespace: watch.namespace },
          watch.state === 'synced' ? 1 : 0,
        );
      }
    },
  });
  new Gauge({
    name: 'kubexa_collector_state_cached_objects',
    help: 'Objects held in the watch cache, by resource and namespace.',
    labelNames: ['resource', 'namespace'] as const,
    registers,
    collect() {
      this.reset();
      for (const watch of source()?.watches() ?? []) {
        this.set({ resource: watch.resource, namespace: watch.namespace }, watch.objects);
      }
    },
  });
  return {
    event: (resource, type) => {
      events.inc({ resource, type });
    },
    dropped: (resource, reason) => {
      dropped.inc({ resource, reason });
    },
    restarted: (resource, cause) => {
      restarts.inc({ resource, cause });
    },
  };
}
