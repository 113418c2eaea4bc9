import perfHooks from 'node:perf_hooks';
import { describe, expect, it, vi } from 'vitest';
import { bufferStats as stats } from '../test/helpers/buffer-stats.js';
import { Registry } from 'prom-client';
import {
  createCollectorMetrics,
  registerPodLogMetrics,
  type ConnectionState,
  type PodLogGaugeSource,
} from './metrics.js';

describe('collector metrics', () => {
  it('samples the event loop delay once a second, not on a 10 ms timer (an idle CPU cost)', () => {
    const monitor = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    try {
      createCollectorMetrics(
        {
          bufferStats: () => stats({}),
          connectionState: () => 'connected',
          lastHeartbeatAt: () => undefined,
          now: () => 0,
        },
        { version: '0.1.0', clusterId: 'c-1', agentId: 'a-1' },
      );
      expect(monitor.mock.calls.map(([options]) => options?.resolution)).toEqual([1000]);
    } finally {
      monitor.mockRestore();
    }
  });

  it('reads live values at scrape time and counts drops by reason', async () => {
    let state: ConnectionState = 'connecting';
    let current = stats({});
    const metrics = createCollectorMetrics(
      {
        bufferStats: () => current,
        connectionState: () => state,
        lastHeartbeatAt: () => 10_000,
        now: () => 12_500,
      },
      { version: '0.1.0', clusterId: 'c-1', agentId: 'a-1' },
    );
    current = stats({
      memory: { depth: 3, bytes: 600 },
      disk: { depth: 7, bytes: 1400 },
      inflight: 2,
    });
    state = 'connected';
    metrics.recordDrop('overflow_log', 4);
    metrics.sent.inc(5);
    const text = await metrics.registry.metrics();
    expect(text).toContain('kubexa_collector_buffer_items{tier="memory"} 3');
    expect(text).toContain('kubexa_collector_buffer_items{tier="disk"} 7');
    expect(text).toContain('kubexa_collector_buffer_bytes{tier="disk"} 1400');
    expect(text).toContain('kubexa_collector_inflight_items 2');
    expect(text).toContain('kubexa_collector_buffer_disk_state{condition="available"} 1');
    expect(text).toContain('kubexa_collector_buffer_disk_state{condition="full"} 0');
    expect(text).toContain('kubexa_collector_gateway_connection_state{state="connected"} 1');
    expect(text).toContain('kubexa_collector_gateway_connection_state{state="connecting"} 0');
    expect(text).toContain('kubexa_collector_heartbeat_age_seconds 2.5');
    expect(text).toContain('kubexa_collector_buffer_dropped_items_total{reason="overflow_log"} 4');
    expect(text).toContain('kubexa_collector_gateway_sent_items_total 5');
    expect(text).toContain(
      'kubexa_collector_info{version="0.1.0",cluster_id="c-1",agent_id="a-1"} 1',
    );
    expect(text).toContain('kubexa_collector_process_resident_memory_bytes');
  });
});

describe('pod log metrics', () => {
  it('reads the source at scrape time and reports 0 before it exists', async () => {
    const registry = new Registry();
    const current: { source?: PodLogGaugeSource } = {};
    const counters = registerPodLogMetrics(registry, () => current.source);
    expect(await registry.metrics()).toContain('kubexa_collector_log_active_streams 0');
    current.source = {
      stats: () => ({ activeStreams: 200, queuedContainers: 50, unreleasedBatches: 3 }),
    };
    counters.linesRead(10);
    counters.dropped('rate_limited', 2);
    counters.streamErrors('forbidden');
    const text = await registry.metrics();
    expect(text).toContain('kubexa_collector_log_active_streams 200');
    expect(text).toContain('kubexa_collector_log_queued_containers 50');
    expect(text).toContain('kubexa_collector_log_checkpoint_lag_batches 3');
    expect(text).toContain('kubexa_collector_log_lines_read_total 10');
    expect(text).toContain('kubexa_collector_log_dropped_lines_total{reason="rate_limited"} 2');
    expect(text).toContain('kubexa_collector_log_stream_errors_total{kind="forbidden"} 1');
  });

  it('counts truncated lines, and keeps the cumulative totals the heartbeat reports', async () => {
    const registry = new Registry();
    const counters = registerPodLogMetrics(registry, () => undefined);
    expect(counters.ingestTotals()).toEqual({
      truncatedLines: 0,
      droppedTooOld: 0,
      droppedFuture: 0,
      droppedRateLimited: 0,
    });
    counters.truncated(1);
    counters.truncated(2);
    counters.dropped('rate_limited', 5);
    counters.dropped('too_old', 4);
    counters.dropped('future', 3);
    counters.dropped('rate_limited', 1);
    const text = await registry.metrics();
    expect(text).toContain('kubexa_collector_log_truncated_lines_total 3');
    expect(text).toContain('kubexa_collector_log_dropped_lines_total{reason="rate_limited"} 6');
    expect(counters.ingestTotals()).toEqual({
      truncatedLines: 3,
      droppedTooOld: 4,
      droppedFuture: 3,
      droppedRateLimited: 6,
    });
  });
});
