import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bufferStats } from '../test/helpers/buffer-stats.js';
import { AGENT_ID_FILE, resolveAgentId } from './agent-id.js';
import {
  bufferPlacement,
  connectionState,
  GATEWAY_READY_GRACE_MS,
  GATEWAY_STALL_REPORT_MS,
  gatewayHealth,
} from './collector.js';
import { queueHealth } from './health/queue-health.js';
import type { StreamStatus } from './gateway/gateway-stream.js';

function status(partial: Partial<StreamStatus>): StreamStatus {
  return {
    state: 'ready',
    sessionId: undefined,
    deliveryAcks: true,
    readySince: undefined,
    consecutiveFailures: 0,
    counters: {
      sent: 0,
      settled: 0,
      redelivered: 0,
      droppedAttempts: 0,
      reconnects: 0,
      stalls: 0,
      heartbeats: 0,
      received: 0,
    },
    notReadySince: undefined,
    lastHeartbeatAt: undefined,
    stalledForMs: 0,
    stallTimeoutMs: 30_000,
    ...partial,
  };
}

describe('gateway readiness', () => {
  it('is ok while ready and during the grace, unhealthy after it and once stopped', () => {
    expect(gatewayHealth(status({ state: 'ready' }), 1000)).toEqual({ state: 'ok' });
    const down = status({ state: 'backoff', notReadySince: 0, consecutiveFailures: 3 });
    expect(gatewayHealth(down, GATEWAY_READY_GRACE_MS).state).toBe('ok');
    const late = gatewayHealth(down, GATEWAY_READY_GRACE_MS + 1);
    expect(late.state).toBe('unhealthy');
    expect(late.reason).toContain('3 consecutive failures');
    expect(gatewayHealth(status({ state: 'stopped' }), 0).state).toBe('unhealthy');
  });

  it('names a ready session that waits for the gateway without progress', () => {
    expect(gatewayHealth(status({ stalledForMs: GATEWAY_STALL_REPORT_MS - 1 }), 0)).toEqual({
      state: 'ok',
    });
    expect(gatewayHealth(status({ stalledForMs: 12_400 }), 0)).toEqual({
      state: 'ok',
      reason: 'connected, but no progress from the gateway for 12 s; the session ends at 30 s',
    });
  });

  it('maps stream states to the connection-state gauge', () => {
    expect(connectionState(status({ state: 'handshaking' }))).toBe('connecting');
    expect(connectionState(status({ state: 'ready' }))).toBe('connected');
  });
});

describe('queue readiness', () => {
  it('turns unhealthy above 90 % of the byte capacity', () => {
    const at = (bytes: number) => ({
      stats: () => bufferStats({ memory: { depth: 1, bytes }, disk: { depth: 0, bytes: 0 } }),
    });
    expect(queueHealth(at(900), 1000, 0)).toMatchObject({ state: 'ok' });
    expect(queueHealth(at(901), 1000, 0)).toMatchObject({ state: 'unhealthy' });
  });
});

describe('buffer placement', () => {
  it('puts the file in spill_dir, or keeps both tiers within max_memory_bytes', () => {
    const buffer = {
      max_memory_bytes: 1000,
      spill_dir: '/var/lib/kubexa/spill',
      max_disk_bytes: 5000,
      batch_size: 100,
      flush_interval: 1000,
    };
    expect(bufferPlacement(buffer)).toEqual({
      path: '/var/lib/kubexa/spill/buffer.db',
      maxMemoryBytes: 1000,
      maxDiskBytes: 5000,
    });
    expect(bufferPlacement({ ...buffer, spill_dir: '' })).toEqual({
      path: ':memory:',
      maxMemoryBytes: 500,
      maxDiskBytes: 500,
    });
  });
});

describe('agent id', () => {
  it('uses the configured id, else generates one once and reads it back', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-agent-id-'));
    try {
      let n = 0;
      const create = () => `generated-${String(++n)}`;
      expect(resolveAgentId('fixed', dir, create)).toEqual({ agentId: 'fixed', source: 'config' });
      expect(resolveAgentId('', dir, create)).toMatchObject({
        agentId: 'generated-1',
        source: 'generated',
      });
      expect(resolveAgentId('', dir, create)).toMatchObject({
        agentId: 'generated-1',
        source: 'data-dir',
      });
      expect(readFileSync(join(dir, AGENT_ID_FILE), 'utf8').trim()).toBe('generated-1');
      writeFileSync(join(dir, AGENT_ID_FILE), '\n\n');
      expect(resolveAgentId('', dir, create).agentId).toBe('generated-2');
      expect(resolveAgentId('', '', create)).toEqual({
        agentId: 'generated-3',
        source: 'generated-ephemeral',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
