import { describe, expect, it } from 'vitest';
import { type AgentMessage, QueryErrorCode, QueryVerb, QueryView } from '../../proto/index.js';
import {
  stateItem,
  startHarness,
  TEST_AGENT,
  TEST_CLUSTER,
  TEST_TOKEN,
  TLS_FIXTURES,
  until,
} from '../../test/helpers/gateway-harness.js';
import { systemClock } from '../../shared/clock.js';
import { itemBytes } from '../buffer/types.js';
import { GatewayFatalError } from './errors.js';
import type { Harness } from '../../test/helpers/gateway-harness.js';

describe('gateway stream handshake', () => {
  it('connects, handshakes with identity and versions, and reports ready', async () => {
    await using h = await startHarness();
    const session = await h.gateway.waitForSession();
    expect(session).toMatchObject({
      clusterId: TEST_CLUSTER,
      agentId: TEST_AGENT,
      agentVersion: '0.1.0-test',
      protoVersion: 'v1',
      deliveryAcks: true,
    });
    await until(() => h.stream.status().state === 'ready', 'ready');
    expect(h.stream.status()).toMatchObject({ sessionId: session.sessionId, deliveryAcks: true });
    expect(h.logs.raw.join('\n')).not.toContain(TEST_TOKEN);
  });

  it('retries a rejected token with backoff instead of giving up', async () => {
    await using h = await startHarness({ gateway: { acceptToken: 'another-token' } });
    await h.clock.waitForSleep((ms) => ms === 100);
    expect(h.stream.status()).toMatchObject({ state: 'backoff', consecutiveFailures: 1 });
    const warning = h.logs.lines.find((l) => l.msg === 'gateway rejected the handshake; retrying');
    expect(warning).toMatchObject({ reason: 'invalid tenant token', delayMs: 100 });
    h.clock.advance(100);
    await h.clock.waitForSleep((ms) => ms === 200);
    expect(h.stream.status().consecutiveFailures).toBe(2);
    expect(h.gateway.store.count()).toBe(0);
    expect(h.logs.raw.join('\n')).not.toContain(TEST_TOKEN);
  });

  it('retries an unknown cluster with backoff', async () => {
    await using h = await startHarness({ gateway: { knownClusters: ['some-other-cluster'] } });
    await h.clock.waitForSleep((ms) => ms === 100);
    const warning = h.logs.lines.find((l) => l.msg === 'gateway rejected the handshake; retrying');
    expect(warning?.['reason']).toBe(`unknown cluster ${TEST_CLUSTER}`);
  });

  it('stops for good on UNAUTHENTICATED, saying what to fix', async () => {
    await using h = await startHarness({
      gateway: { acceptToken: 'another-token', tokenFailure: 'unauthenticated' },
    });
    const error: unknown = await h.stream.done.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(GatewayFatalError);
    expect(error).toMatchObject({ code: 'ERR_GATEWAY_UNAUTHENTICATED' });
    expect((error as Error).message).toContain('KUBEXA_TENANT_TOKEN');
    expect(h.clock.sleeps.filter((ms) => ms === 100)).toEqual([]);
    expect(h.stream.status().state).toBe('stopped');
  });
});

describe('gateway stream protocol negotiation', () => {
  it('stops for good when the gateway speaks no version we speak', async () => {
    await using h = await startHarness({ gateway: { supportedProtoVersions: ['v2'] } });
    const error: unknown = await h.stream.done.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toMatchObject({ code: 'ERR_GATEWAY_PROTO_VERSION' });
    expect((error as Error).message).toContain('upgrade the agent');
  });
});

describe('gateway stream reconnect backoff', () => {
  it('grows exponentially to the cap and never sleeps less than the initial delay', async () => {
    await using h = await startHarness({ gateway: { acceptToken: 'another-token' } });
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      const expected = Math.min(1000, 100 * 2 ** i);
      delays.push(await h.clock.waitForSleep((ms) => ms === expected));
      h.clock.advance(expected);
    }
    expect(delays).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('resets the backoff after a healthy session', async () => {
    await using h = await startHarness({ stream: { healthySessionMs: 5000 } });
    const kickCurrent = async (): Promise<void> => {
      await until(() => h.stream.status().state === 'ready', 'ready');
      h.gateway.kick(h.stream.status().sessionId!);
      await until(() => h.stream.status().state === 'backoff', 'backoff');
    };
    // Two sessions kicked before they could become healthy: the delay grows.
    await kickCurrent();
    h.clock.advance(100);
    await kickCurrent();
    h.clock.advance(200);
    // A session that lasts healthySessionMs resets it.
    await until(() => h.stream.status().state === 'ready', 'ready');
    h.clock.advance(5000);
    await kickCurrent();
    expect(h.clock.sleeps.filter((ms) => ms === 100 || ms === 200 || ms === 400)).toEqual([
      100, 200, 100,
    ]);
  });
});

describe('gateway stream delivery', () => {
  it('with delivery_acks keeps items in flight until the Ack, then settles them', async () => {
    await using h = await startHarness({ gateway: { holdAcks: true } });
    for (let n = 1; n <= 5; n++) h.buffer.enqueue(stateItem(n));
    await h.gateway.waitForStored('state', 5);
    expect(h.buffer.stats()).toMatchObject({ pending: 0, inflight: 5 });
    const session = await h.gateway.waitForSession();
    expect(h.gateway.releaseAcks(session.sessionId)).toBe(5);
    await until(() => h.buffer.stats().inflight === 0, 'settled');
    expect(h.stream.status().counters).toMatchObject({ sent: 5, settled: 5 });
    expect(h.gateway.store.messageIds('state')).toEqual(
      [1, 2, 3, 4, 5].map((n) => stateItem(n).id),
    );
  });

  it('without delivery_acks settles items on send', async () => {
    await using h = await startHarness({ gateway: { deliveryAcks: false } });
    for (let n = 1; n <= 5; n++) h.buffer.enqueue(stateItem(n));
    await h.gateway.waitForStored('state', 5);
    await until(() => h.buffer.stats().inflight === 0, 'settled on send');
    const session = await h.gateway.waitForSession();
    expect(session.acked).toBe(0);
    expect(h.stream.status()).toMatchObject({ deliveryAcks: false });
    expect(h.stream.status().counters.settled).toBe(5);
  });

  it('returns unacked items to the buffer on session loss and redelivers them', async () => {
    await using h = await startHarness({ gateway: { holdAcks: true } });
    for (let n = 1; n <= 3; n++) h.buffer.enqueue(stateItem(n));
    await h.gateway.waitForStored('state', 3);
    const first = await h.gateway.waitForSession();
    h.gateway.forgetAcks(first.sessionId);
    h.gateway.kick(first.sessionId);
    await h.clock.waitForSleep((ms) => ms === 100);
    expect(h.buffer.stats()).toMatchObject({ pending: 3, inflight: 0 });
    h.clock.advance(100);
    const second = await h.gateway.waitForSession(
      (s) => s.state === 'connected' && s.sessionId !== first.sessionId,
    );
    // The session ended on item 1: it goes alone first, and the rest after its Ack.
    await until(() => h.gateway.store.duplicates >= 1, 'redelivery of the suspect');
    expect(h.buffer.stats()).toMatchObject({ inflight: 3 });
    h.gateway.releaseAcks(second.sessionId);
    await until(() => h.gateway.store.duplicates >= 3, 'redelivery');
    expect(h.gateway.store.count('state')).toBe(3);
    h.gateway.releaseAcks(second.sessionId);
    await until(() => h.buffer.stats().inflight === 0, 'settled');
  });

  it('redelivers an item whose Ack does not come in time, and drops it after maxAttempts', async () => {
    await using h = await startHarness({
      gateway: { holdAcks: true },
      stream: { redeliveryTimeoutMs: 5000, flushIntervalMs: 1000, maxAttempts: 2 },
    });
    h.buffer.enqueue(stateItem(1));
    await h.gateway.waitForStored('state', 1);
    const session = await h.gateway.waitForSession();
    h.gateway.forgetAcks(session.sessionId);
    h.clock.advance(5000);
    await until(() => h.stream.status().counters.redelivered === 1, 'first redelivery');
    await until(() => h.gateway.store.duplicates === 1, 'resent');
    h.gateway.forgetAcks(session.sessionId);
    h.clock.advance(5000);
    await until(() => h.stream.status().counters.droppedAttempts === 1, 'dropped');
    expect(h.buffer.stats()).toMatchObject({ pending: 0, inflight: 0 });
    expect(h.buffer.stats().dropped.discarded).toBe(1);
  });
});

describe('gateway messages', () => {
  it('slows the drain while the gateway applies backpressure', async () => {
    await using h = await startHarness();
    const session = await h.gateway.waitForSession();
    await until(() => h.stream.status().state === 'ready', 'ready');
    h.gateway.sendBackpressure(session.sessionId, { throttle: true, delayMs: 7000 });
    await until(() => h.logs.lines.some((l) => l.msg === 'gateway backpressure'), 'throttle');
    h.buffer.enqueue(stateItem(1));
    await h.clock.waitForSleep((ms) => ms === 7000);
    // The drain is parked on the fake clock: nothing can be sent until time moves.
    expect(h.gateway.store.count('state')).toBe(0);
    h.clock.advance(7000);
    await h.gateway.waitForStored('state', 1);
    h.gateway.sendBackpressure(session.sessionId, { throttle: false, delayMs: 0 });
    await until(() => h.logs.lines.filter((l) => l.msg === 'gateway backpressure').length === 2);
    h.buffer.enqueue(stateItem(2));
    await h.gateway.waitForStored('state', 2);
  });

  it('applies a ConfigUpdate live as a patch and hands the rest to its owner', async () => {
    const updates: unknown[] = [];
    await using h = await startHarness({
      deps: { onConfigUpdate: (update) => updates.push(update.configVersion) },
    });
    const session = await h.gateway.waitForSession();
    h.gateway.sendConfigUpdate(session.sessionId, {
      configVersion: 'v7',
      config: {
        logCollectors: [],
        watchers: [],
        metricScrapers: [],
        heartbeatIntervalSec: 5,
        batchSize: 7,
        flushIntervalMs: 0,
      },
    });
    await until(() => h.stream.settings.heartbeatIntervalMs === 5000, 'patched');
    // 0 means "unchanged" under PATCH semantics.
    expect(h.stream.settings).toEqual({
      heartbeatIntervalMs: 5000,
      batchSize: 7,
      flushIntervalMs: 1000,
    });
    expect(updates).toEqual(['v7']);
    await h.clock.waitForSleep((ms) => ms === 5000);
    h.clock.advance(5000);
    await h.gateway.waitForStored('heartbeat', 1);
    const beat = h.gateway.sessions()[0]?.lastHeartbeat;
    expect(beat).toMatchObject({ status: 'healthy', queueDepth: 0, droppedMessages: 0 });
  });

  it('clamps an out-of-range ConfigUpdate and logs it, so a huge heartbeat never spins', async () => {
    await using h = await startHarness();
    const session = await h.gateway.waitForSession();
    h.gateway.sendConfigUpdate(session.sessionId, {
      configVersion: 'v8',
      config: {
        logCollectors: [],
        watchers: [],
        metricScrapers: [],
        heartbeatIntervalSec: 2 ** 31 - 1,
        batchSize: 1_000_000,
        flushIntervalMs: 1,
      },
    });
    await until(() => h.stream.settings.batchSize === 10_000, 'patched');
    expect(h.stream.settings).toEqual({
      heartbeatIntervalMs: 3_600_000,
      batchSize: 10_000,
      flushIntervalMs: 100,
    });
    const clamped = h.logs.lines.filter(
      (l) => l.msg === 'gateway config update out of range: clamped',
    );
    expect(clamped.map((l) => [l['setting'], l['applied']])).toEqual([
      ['heartbeatIntervalMs', 3_600_000],
      ['batchSize', 10_000],
      ['flushIntervalMs', 100],
    ]);
    await h.clock.waitForSleep((ms) => ms === 3_600_000);
  });

  it('stops the stream on Shutdown, logs the reason, and reconnects by the backoff policy', async () => {
    await using h = await startHarness();
    const first = await h.gateway.waitForSession();
    await until(() => h.stream.status().state === 'ready', 'ready');
    h.gateway.sendShutdown(first.sessionId, 'gateway maintenance');
    const closed = await h.gateway.waitForSession(
      (s) => s.sessionId === first.sessionId && s.state === 'closed',
    );
    expect(closed.closeReason).toBe('agent closed the stream');
    expect(h.logs.lines.find((l) => l.msg === 'gateway requested shutdown')?.['reason']).toBe(
      'gateway maintenance',
    );
    await h.clock.waitForSleep((ms) => ms === 100);
    expect(h.stream.status().state).toBe('backoff');
    const ended = h.logs.lines.find((l) => l.msg.startsWith('gateway stream shut down'));
    expect(ended).toMatchObject({ kind: 'shutdown', reason: 'gateway maintenance' });
    h.clock.advance(100);
    await h.gateway.waitForSession(
      (s) => s.state === 'connected' && s.sessionId !== first.sessionId,
    );
  });

  it('on Shutdown stops sending and waits for outstanding acks before half-closing', async () => {
    await using h = await startHarness({ gateway: { holdAcks: true } });
    for (let n = 1; n <= 3; n++) h.buffer.enqueue(stateItem(n));
    await h.gateway.waitForStored('state', 3);
    const session = await h.gateway.waitForSession();
    h.gateway.sendShutdown(session.sessionId, 'rolling update');
    await until(() => h.logs.lines.some((l) => l.msg === 'gateway requested shutdown'));
    h.buffer.enqueue(stateItem(4));
    // The grace period runs on the fake clock, so only the acks can end the wait.
    await h.clock.waitForSleep((ms) => ms === 5000);
    expect(h.gateway.sessions()[0]?.state).toBe('connected');
    h.gateway.releaseAcks(session.sessionId);
    await h.gateway.waitForSession((s) => s.state === 'closed');
    expect(h.gateway.store.count('state')).toBe(3);
    expect(h.buffer.stats()).toMatchObject({ pending: 1, inflight: 0 });
    expect(h.stream.status().counters.settled).toBe(3);
  });

  it('sends heartbeats with queue depth, status, cumulative counters and the Metrics API state', async () => {
    await using h = await startHarness({
      deps: {
        sourceCounters: () => ({
          truncatedLines: 7,
          droppedTooOld: 1,
          droppedFuture: 2,
          droppedRateLimited: 3,
        }),
        quarantinedItems: () => 4,
        metricsApi: () => 'unavailable',
      },
    });
    const beats: AgentMessage[] = [];
    h.gateway.events.on('message', (m) => {
      if (m.payload?.$case === 'heartbeat') beats.push(m);
    });
    const session = await h.gateway.waitForSession();
    await until(() => h.stream.status().state === 'ready', 'ready');
    h.gateway.sendBackpressure(session.sessionId, { throttle: true, delayMs: 60_000 });
    await until(() => h.logs.lines.some((l) => l.msg === 'gateway backpressure'), 'throttle');
    h.buffer.enqueue(stateItem(1));
    h.buffer.enqueue(stateItem(2));
    await h.clock.waitForSleep((ms) => ms === 60_000);
    h.clock.advance(30_000);
    await until(() => beats.length === 1, 'heartbeat');
    const beat = beats[0]?.payload;
    expect(beat?.$case === 'heartbeat' && beat.value.health).toEqual({
      queueDepth: '2',
      droppedMessages: '0',
      status: 'degraded',
      truncatedLines: '7',
      droppedTooOld: '1',
      droppedFuture: '2',
      droppedRateLimited: '3',
      quarantinedMessages: '4',
      metricsApi: 'unavailable',
    });
    expect(beats[0]?.meta).toMatchObject({ clusterId: TEST_CLUSTER, agentId: TEST_AGENT });
  });

  it('answers a live query with a clear not-supported error', async () => {
    await using h = await startHarness();
    const session = await h.gateway.waitForSession();
    const result = await h.gateway.query(session.sessionId, {
      queryId: 'q-1',
      verb: QueryVerb.QUERY_VERB_LIST,
      view: QueryView.QUERY_VIEW_TABLE,
      namespace: '',
      name: '',
      labelSelector: '',
      fieldSelector: '',
      limit: 0,
      continueToken: '',
      timeoutMs: 0,
    });
    expect(result.queryId).toBe('q-1');
    expect(result.error).toMatchObject({ code: QueryErrorCode.QUERY_ERROR_POLICY_DENIED });
    expect(result.error?.message).toContain('not supported');
  });
});

describe('gateway stream TLS', () => {
  it('connects over TLS with the CA file', async () => {
    await using h = await startHarness({
      tls: true,
      stream: { tls: true, caCertPath: TLS_FIXTURES.caPath },
    });
    await until(() => h.stream.status().state === 'ready', 'ready');
    expect(h.logs.lines.some((l) => l.level >= 50)).toBe(false);
  });

  it('refuses a certificate it cannot verify, says to set the CA, and keeps retrying', async () => {
    await using h = await startHarness({ tls: true, stream: { tls: true } });
    await h.clock.waitForSleep((ms) => ms === 100);
    expect(h.gateway.sessions()).toEqual([]);
    expect(h.stream.status()).toMatchObject({ state: 'backoff', consecutiveFailures: 1 });
    expect(lostReason(h)).toMatch(
      /^could not connect to .*: the TLS handshake with 127\.0\.0\.1:\d+ failed: the gateway's certificate is not trusted \(\w+\)\. Set gateway\.ca_cert_path to the CA bundle that signed it \(the system roots are in use\)$/,
    );
  });

  it('says the TLS handshake failed against a plaintext gateway, and what to check', async () => {
    await using h = await startHarness({ stream: { tls: true } });
    await h.clock.waitForSleep((ms) => ms === 100);
    const reason = lostReason(h);
    expect(reason).toContain('the TLS handshake with 127.0.0.1:');
    expect(reason).toContain('the server there does not speak TLS');
    expect(reason).toContain('gateway.tls');
    expect(reason).toContain('the port in gateway.address');
  });

  it('says to turn TLS on when a plaintext agent meets a TLS gateway', async () => {
    await using h = await startHarness({ tls: true });
    await h.clock.waitForSleep((ms) => ms === 100);
    expect(lostReason(h)).toContain('speaks TLS but gateway.tls is false: set gateway.tls: true');
  });

  it('skips verification only when told to, and says so loudly', async () => {
    await using h = await startHarness({
      tls: true,
      stream: { tls: true, insecureSkipVerify: true },
    });
    await until(() => h.stream.status().state === 'ready', 'ready');
    const warning = h.logs.lines.find((l) => l.msg.includes('insecure_skip_verify'));
    expect(warning?.level).toBe(50);
  });
});

describe('gateway stream on the system clock', () => {
  it('heartbeats, reconnects and delivers with real timers', async () => {
    await using h = await startHarness({
      deps: { clock: systemClock },
      stream: { heartbeatIntervalMs: 20, reconnectInitialDelayMs: 10, reconnectMaxDelayMs: 20 },
    });
    const first = await h.gateway.waitForSession();
    await h.gateway.waitForStored('heartbeat', 2);
    h.gateway.kick(first.sessionId);
    await h.gateway.waitForSession(
      (s) => s.state === 'connected' && s.sessionId !== first.sessionId,
    );
    h.buffer.enqueue(stateItem(1));
    await h.gateway.waitForStored('state', 1);
    await until(() => h.buffer.stats().inflight === 0, 'settled');
    await h.stream.close();
    expect(h.stream.status().state).toBe('stopped');
  });
});

/** Why the first lost session was lost, as logged. */
function lostReason(h: Harness): string {
  const lost = h.logs.lines.find((l) => l.msg === 'gateway stream lost; reconnecting');
  return String(lost?.['reason']);
}

/** The health of every heartbeat the gateway receives, in order. */
function heartbeatsOf(h: Harness): { status: string; quarantinedMessages: string }[] {
  const beats: { status: string; quarantinedMessages: string }[] = [];
  h.gateway.events.on('message', (m) => {
    if (m.payload?.$case === 'heartbeat' && m.payload.value.health) {
      beats.push(m.payload.value.health);
    }
  });
  return beats;
}

describe('gateway stream heartbeat status', () => {
  // Four items held in flight (no acks) stay in the buffer's memory tier: their accounting
  // bytes are what the buffer holds. Four equal items make a multiple of 4, so a capacity of
  // exactly 5/4 of it puts the buffer at exactly 80 %.
  const held = [1, 2, 3, 4].map((n) => stateItem(n));
  const heldBytes = held.reduce((sum, item) => sum + itemBytes(item), 0);
  const exactly80 = (heldBytes / 4) * 5;

  async function statusWithCapacity(capacityBytes: number): Promise<string> {
    await using h = await startHarness({
      gateway: { holdAcks: true },
      stream: { bufferCapacityBytes: capacityBytes, heartbeatIntervalMs: 5000 },
    });
    const beats = heartbeatsOf(h);
    for (const item of held) h.buffer.enqueue(item);
    await h.gateway.waitForStored('state', held.length);
    const { memory, disk } = h.buffer.stats();
    expect(memory.bytes + disk.bytes).toBe(heldBytes);
    await h.clock.waitForSleep((ms) => ms === 5000);
    h.clock.advance(5000);
    await until(() => beats.length === 1, 'heartbeat');
    return beats[0]?.status ?? '';
  }

  it('says overloaded once the buffer holds 80 % of its byte capacity', async () => {
    expect(heldBytes % 4).toBe(0);
    expect(0.8 * exactly80).toBe(heldBytes);
    expect(await statusWithCapacity(exactly80)).toBe('overloaded');
  });

  it('says healthy just below 80 %', async () => {
    // 80 % of this capacity is 1.6 bytes more than the buffer holds.
    expect(await statusWithCapacity(exactly80 + 2)).toBe('healthy');
  });
});

describe('gateway stream heartbeat interval', () => {
  it('honours a 1 s heartbeat interval from the gateway, unclamped', async () => {
    await using h = await startHarness();
    const beats = heartbeatsOf(h);
    const session = await h.gateway.waitForSession();
    await until(() => h.stream.status().state === 'ready', 'ready');
    h.gateway.sendConfigUpdate(session.sessionId, {
      configVersion: 'hb-1',
      config: {
        logCollectors: [],
        watchers: [],
        metricScrapers: [],
        heartbeatIntervalSec: 1,
        batchSize: 0,
        flushIntervalMs: 0,
      },
    });
    await until(() => h.stream.settings.heartbeatIntervalMs === 1000, 'patched');
    for (let n = 1; n <= 3; n++) {
      await h.clock.waitForSleep((ms) => ms === 1000);
      h.clock.advance(1000);
      await until(() => beats.length === n, `heartbeat ${String(n)}`);
    }
    expect(h.logs.lines.some((l) => l.msg === 'gateway config update out of range: clamped')).toBe(
      false,
    );
  });
});

describe('gateway stream liveness', () => {
  it('ends a session whose gateway stops acking, requeues uncharged, and backs off as a failure', async () => {
    await using h = await startHarness({
      gateway: { holdAcks: true },
      stream: { stallTimeoutMs: 20_000, healthySessionMs: 5000, redeliveryTimeoutMs: 60_000 },
    });
    for (let n = 1; n <= 3; n++) h.buffer.enqueue(stateItem(n));
    await h.gateway.waitForStored('state', 3);
    const first = await h.gateway.waitForSession();
    h.gateway.forgetAcks(first.sessionId);
    h.clock.advance(10_000);
    await until(() => h.stream.status().stalledForMs === 10_000, 'stall visible in status');
    expect(h.stream.status().state).toBe('ready');
    h.clock.advance(10_000);
    await h.clock.waitForSleep((ms) => ms === 100);
    expect(h.stream.status()).toMatchObject({ state: 'backoff', consecutiveFailures: 1 });
    const stalled = h.logs.lines.find((l) => l.msg === 'gateway stream stalled; reconnecting');
    expect(stalled?.['reason']).toContain('3 items awaiting an ack');
    expect(h.buffer.stats()).toMatchObject({ pending: 3, inflight: 0 });

    // The second session stalls too: it lasted longer than healthySessionMs, yet the backoff
    // grows, because a stalled session is a failure.
    h.clock.advance(100);
    const second = await h.gateway.waitForSession(
      (s) => s.state === 'connected' && s.sessionId !== first.sessionId,
    );
    await until(() => h.gateway.store.duplicates === 3, 'resent');
    h.gateway.forgetAcks(second.sessionId);
    h.clock.advance(20_000);
    await h.clock.waitForSleep((ms) => ms === 200);
    expect(h.stream.status().consecutiveFailures).toBe(2);

    // A gateway that acks again gets everything, once, and nothing was charged an attempt.
    h.clock.advance(200);
    const third = await h.gateway.waitForSession(
      (s) => s.state === 'connected' && ![first.sessionId, second.sessionId].includes(s.sessionId),
    );
    await until(() => h.gateway.store.duplicates === 6, 'resent again');
    h.gateway.releaseAcks(third.sessionId);
    await until(() => h.buffer.stats().inflight === 0, 'settled');
    expect(h.gateway.store.messageIds('state')).toEqual([1, 2, 3].map((n) => stateItem(n).id));
    expect(h.stream.status().counters).toMatchObject({
      redelivered: 0,
      droppedAttempts: 0,
      stalls: 2,
    });
  });
});
