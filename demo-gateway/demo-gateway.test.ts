import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata, status, type ClientDuplexStream } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AgentCapabilities,
  type AgentMessage,
  AgentServiceClient,
  ConfigSnapshot,
  type GatewayMessage,
  LogBatch,
  LogEntry,
  StateEvent,
} from '../proto/index.js';
import { DemoGateway, type DemoGatewayOptions } from './demo-gateway.js';
import { MessageStore } from './message-store.js';
import { uiSourceHash } from './ui-build.js';
import { createWebUi } from './web-ui.js';
import { until } from '../test/helpers/wait.js';

type Call = ClientDuplexStream<AgentMessage, GatewayMessage>;

const silent = pino({ level: 'silent' });
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function startGateway(options: DemoGatewayOptions = {}): Promise<DemoGateway> {
  const gateway = new DemoGateway(options, { logger: silent });
  const port = await gateway.listen('127.0.0.1', 0);
  const client = new AgentServiceClient(`127.0.0.1:${port}`, credentials.createInsecure());
  clients.set(gateway, client);
  cleanup.push(
    () => gateway.close(),
    () => {
      client.close();
    },
  );
  return gateway;
}
const clients = new WeakMap<DemoGateway, AgentServiceClient>();

/** A raw agent: collects every gateway message and the final status. */
function connect(
  gateway: DemoGateway,
  headerAgentId: string | null = 'raw-agent',
): {
  call: Call;
  received: GatewayMessage[];
  ended: Promise<{ code: number; details: string }>;
} {
  const client = clients.get(gateway)!;
  const metadata = new Metadata();
  if (headerAgentId !== null) metadata.set('x-agent-id', headerAgentId);
  const call = client.connect(metadata);
  const received: GatewayMessage[] = [];
  call.on('data', (m: GatewayMessage) => received.push(m));
  const ended = new Promise<{ code: number; details: string }>((resolve) => {
    call.on('status', (s: { code: number; details: string }) => {
      resolve(s);
    });
    call.on('error', () => undefined);
  });
  cleanup.push(() => {
    call.cancel();
  });
  return { call, received, ended };
}

function handshake(
  overrides: Partial<{ token: string; versions: string[]; cluster: string }> = {},
): AgentMessage {
  return {
    messageId: `hs-${Math.random()}`,
    payload: {
      $case: 'handshake',
      value: {
        agentVersion: '0.1.0',
        protoVersion: overrides.versions?.[0] ?? 'v1',
        clusterId: overrides.cluster ?? 'cluster-1',
        tenantToken: overrides.token ?? 'good-token',
        caps: AgentCapabilities.fromPartial({ logs: true, state: true, metrics: true }),
        supportedProtoVersions: overrides.versions ?? ['v1'],
      },
    },
  };
}

const state = (id: string): AgentMessage => ({
  messageId: id,
  payload: { $case: 'state', value: StateEvent.fromPartial({ name: id, namespace: 'default' }) },
});

const logs = (id: string): AgentMessage => ({
  messageId: id,
  payload: {
    $case: 'logs',
    value: LogBatch.fromPartial({
      entries: [LogEntry.fromPartial({ namespace: 'default', podName: 'p', message: id })],
    }),
  },
});

const handshakeReply = (received: GatewayMessage[]) =>
  received.find((m) => m.payload?.$case === 'handshake')?.payload?.value as
    | { accepted: boolean; rejectionReason: string; protoVersion: string; deliveryAcks: boolean }
    | undefined;

const ackedIds = (received: GatewayMessage[]): string[] =>
  received.flatMap((m) => (m.payload?.$case === 'ack' ? m.payload.value.messageIds : []));

describe('demo gateway', () => {
  it('stores every message once, deduplicated by message_id, and acks every copy', async () => {
    const gateway = await startGateway();
    const { call, received } = connect(gateway);
    call.write(handshake());
    call.write(state('a'));
    call.write(state('a'));
    call.write(state('b'));
    await until(() => ackedIds(received).length === 3);
    expect(handshakeReply(received)).toMatchObject({ accepted: true, deliveryAcks: true });
    expect(gateway.store.messageIds('state')).toEqual(['a', 'b']);
    expect(gateway.store.duplicates).toBe(1);
    expect(ackedIds(received)).toEqual(['a', 'a', 'b']);
    const [session] = gateway.sessions();
    expect(session).toMatchObject({ agentId: 'raw-agent', received: 3, duplicates: 1, acked: 3 });
  });

  it('with storeLogBatches off, acks every copy of a log batch and deduplicates it without storing it', async () => {
    // What an agent relies on whether the gateway stores or not: every copy is acked (a batch
    // redelivered after a lost ack is settled again) and counted once (isNew only the first time,
    // across sessions); only log batches skip the store.
    const gateway = await startGateway({ storeLogBatches: false });
    const events: [string, boolean][] = [];
    gateway.events.on('message', (message, isNew) => events.push([message.messageId, isNew]));
    const first = connect(gateway);
    first.call.write(handshake());
    for (const message of [logs('l1'), logs('l1'), logs('l2'), state('s')]) {
      first.call.write(message);
    }
    await until(() => ackedIds(first.received).length === 4);
    expect(ackedIds(first.received)).toEqual(['l1', 'l1', 'l2', 's']);
    // The agent reconnects and redelivers a batch whose ack it did not see.
    first.call.end();
    const second = connect(gateway);
    second.call.write(handshake());
    second.call.write(logs('l2'));
    await until(() => ackedIds(second.received).length === 1);
    expect(ackedIds(second.received)).toEqual(['l2']);
    expect(events).toEqual([
      ['l1', true],
      ['l1', false],
      ['l2', true],
      ['s', true],
      ['l2', false],
    ]);
    expect(gateway.store.count('logs')).toBe(0);
    expect(gateway.store.unstored).toBe(2);
    expect(gateway.store.duplicates).toBe(2);
    expect(gateway.store.messageIds('state')).toEqual(['s']);
    expect(gateway.sessions().map((s) => [s.received, s.duplicates, s.acked])).toEqual([
      [1, 1, 1],
      [4, 1, 4],
    ]);
    // Waiting for stored log batches that never will be is refused, not left pending forever;
    // other kinds still wait as always.
    await expect(gateway.waitForStored('logs', 1)).rejects.toThrow(/storeLogBatches: false/);
    await gateway.waitForStored('state', 1);
  });

  it('does not ack when delivery_acks is off', async () => {
    const gateway = await startGateway({ deliveryAcks: false });
    const { call, received } = connect(gateway);
    call.write(handshake());
    call.write(state('a'));
    await gateway.waitForStored('state', 1);
    expect(handshakeReply(received)).toMatchObject({ deliveryAcks: false });
    expect(ackedIds(received)).toEqual([]);
  });

  it('rejects a wrong token in the handshake reply, then ends with PERMISSION_DENIED', async () => {
    const gateway = await startGateway({ acceptToken: 'good-token' });
    const { call, received, ended } = connect(gateway);
    call.write(handshake({ token: 'bad-token' }));
    expect(await ended).toMatchObject({ code: status.PERMISSION_DENIED });
    expect(handshakeReply(received)).toMatchObject({
      accepted: false,
      rejectionReason: 'invalid tenant token',
    });
    expect(gateway.store.count()).toBe(0);
  });

  it('can refuse a wrong token with UNAUTHENTICATED instead', async () => {
    const gateway = await startGateway({
      acceptToken: 'good-token',
      tokenFailure: 'unauthenticated',
    });
    const { call, received, ended } = connect(gateway);
    call.write(handshake({ token: 'bad-token' }));
    expect(await ended).toMatchObject({ code: status.UNAUTHENTICATED });
    expect(handshakeReply(received)).toBeUndefined();
  });

  it('negotiates the newest version both sides speak and refuses when there is none', async () => {
    const gateway = await startGateway({ supportedProtoVersions: ['v2', 'v1'] });
    const ok = connect(gateway);
    ok.call.write(handshake({ versions: ['v3', 'v1'] }));
    await until(() => handshakeReply(ok.received) !== undefined);
    expect(handshakeReply(ok.received)).toMatchObject({ accepted: true, protoVersion: 'v1' });

    const refused = connect(gateway);
    refused.call.write(handshake({ versions: ['v9'] }));
    expect(await refused.ended).toMatchObject({ code: status.FAILED_PRECONDITION });
    expect(handshakeReply(refused.received)?.rejectionReason).toContain(
      'unsupported proto version',
    );
  });

  it('ends a stream whose first message is not a handshake with INVALID_ARGUMENT', async () => {
    const gateway = await startGateway();
    const { call, ended } = connect(gateway);
    call.write(state('a'));
    expect(await ended).toMatchObject({ code: status.INVALID_ARGUMENT });
  });

  it('sends Shutdown, Backpressure and ConfigUpdate to a session', async () => {
    const gateway = await startGateway();
    const { call, received } = connect(gateway);
    call.write(handshake());
    const session = await gateway.waitForSession();
    gateway.sendBackpressure(session.sessionId, { throttle: true, delayMs: 500 });
    gateway.sendConfigUpdate(session.sessionId, { configVersion: '2' });
    gateway.sendShutdown(session.sessionId, 'maintenance');
    await until(() => received.length === 4);
    expect(received.map((m) => m.payload?.$case)).toEqual([
      'handshake',
      'backpressure',
      'config',
      'shutdown',
    ]);
    expect(() => gateway.sendShutdown('no-such-session', 'x')).toThrow(/no session/);
  });
});

describe('demo gateway sessions', () => {
  it("takes the agent's id from the handshake message's metadata, as the Go agent sends it", async () => {
    const gateway = await startGateway();
    for (const header of [null, 'header-id']) {
      const { call } = connect(gateway, header);
      call.write({
        ...handshake(),
        meta: {
          tenantId: '',
          clusterId: 'cluster-1',
          agentId: 'go-agent-7',
          sessionId: '',
          timestamp: '0',
        },
      });
      await until(() => gateway.sessions().length === (header === null ? 1 : 2));
    }
    expect(gateway.sessions().map((s) => s.agentId)).toEqual(['go-agent-7', 'go-agent-7']);
    // Without metadata, the header is the fallback.
    const { call } = connect(gateway, 'header-only');
    call.write(handshake());
    await until(() => gateway.sessions().some((s) => s.agentId === 'header-only'));
  });

  it('records control messages in the session timeline and shows the throttle while it lasts', async () => {
    const gateway = await startGateway();
    const { call, received } = connect(gateway);
    call.write(handshake());
    const session = await gateway.waitForSession();
    gateway.sendBackpressure(session.sessionId, { throttle: true, delayMs: 1500 });
    const throttled = gateway.sessions()[0]!.throttle;
    expect(throttled?.delayMs).toBe(1500);
    gateway.sendBackpressure(session.sessionId, { throttle: true, delayMs: 3000 });
    // Still throttled since the first signal, by the newest delay.
    expect(gateway.sessions()[0]!.throttle).toEqual({ since: throttled!.since, delayMs: 3000 });
    gateway.sendConfigUpdate(session.sessionId, {
      configVersion: 'v7',
      config: ConfigSnapshot.fromPartial({ heartbeatIntervalSec: 5 }),
    });
    gateway.sendBackpressure(session.sessionId, { throttle: false, delayMs: 0 });
    expect(gateway.sessions()[0]!.throttle).toBeUndefined();
    expect(gateway.sessions()[0]!.heartbeatIntervalMs).toBe(5000);
    await until(() => received.filter((m) => m.payload?.$case !== 'handshake').length === 4);
    expect(
      gateway.store
        .controls(session.sessionId)
        .reverse()
        .map((e) => `${e.outbound ? '>' : '<'} ${e.kind}: ${e.detail}`),
    ).toEqual([
      '< handshake: agent 0.1.0 proto v1',
      '> backpressure: throttle: wait 1500 ms between sends',
      '> backpressure: throttle: wait 3000 ms between sends',
      '> config: config update v7: heartbeat every 5 s',
      '> backpressure: unthrottle: send at full speed',
    ]);
  });
});

describe('demo gateway web UI', () => {
  it('serves the page and the live state, and sends Shutdown from a button', async () => {
    const gateway = await startGateway();
    const ui = createWebUi(gateway);
    cleanup.push(() => ui.close());
    const { call, received } = connect(gateway);
    call.write(handshake());
    call.write(state('pod-a'));
    await gateway.waitForStored('state', 1);

    const stateResponse = await ui.inject({ method: 'GET', url: '/api/state' });
    const body = stateResponse.json<{
      sessions: { sessionId: string; state: string; clusterId: string }[];
      totals: { stored: number; byKind: Record<string, number> };
      messages: { kind: string; summary: string; seq: number }[];
    }>();
    expect(body.sessions).toHaveLength(1);
    expect(body.sessions[0]).toMatchObject({ state: 'connected', clusterId: 'cluster-1' });
    expect(body.totals.byKind).toEqual({ handshake: 1, state: 1 });
    expect(body.messages.map((m) => m.kind)).toEqual(['state', 'handshake']);
    expect(JSON.stringify(body)).not.toContain('good-token');

    const newer = await ui.inject({
      method: 'GET',
      url: `/api/state?after=${body.messages[0]!.seq}`,
    });
    expect(newer.json<{ messages: unknown[] }>().messages).toEqual([]);

    const sessionId = body.sessions[0]!.sessionId;
    const shutdown = await ui.inject({
      method: 'POST',
      url: `/api/sessions/${sessionId}/shutdown`,
      payload: { reason: 'from the UI' },
    });
    expect(shutdown.json()).toEqual({ sent: true });
    await until(() => received.some((m) => m.payload?.$case === 'shutdown'));
    const missing = await ui.inject({
      method: 'POST',
      url: '/api/sessions/nope/shutdown',
      payload: {},
    });
    expect(missing.statusCode).toBe(404);
  });
});

describe('demo gateway log endpoint', () => {
  it('answers a filtered page of records and names a bad parameter with 400', async () => {
    const gateway = await startGateway();
    const ui = createWebUi(gateway);
    cleanup.push(() => ui.close());
    const { call } = connect(gateway);
    call.write(handshake());
    call.write({
      messageId: 'logs-1',
      payload: {
        $case: 'logs',
        value: LogBatch.fromPartial({
          entries: [
            LogEntry.fromPartial({ namespace: 'a', podName: 'p', message: 'one', level: 2 }),
            LogEntry.fromPartial({ namespace: 'b', podName: 'p', message: 'two', level: 4 }),
          ],
        }),
      },
    });
    await gateway.waitForStored('logs', 1);
    const page = await ui.inject({ method: 'GET', url: '/api/logs?namespace=b&level=error' });
    expect(page.json<{ lines: { message: string }[] }>().lines.map((l) => l.message)).toEqual([
      'two',
    ]);
    for (const [query, error] of [
      ['level=loud', 'level: unknown level "loud"'],
      ['before=x', 'before: not a sequence number: x'],
      ['limit=-1', 'limit: not a sequence number: -1'],
    ] as const) {
      const bad = await ui.inject({ method: 'GET', url: `/api/logs?${query}` });
      expect(bad.statusCode).toBe(400);
      expect(bad.json<{ error: string }>().error).toContain(error);
    }
  });
});

describe('demo gateway web UI bundle', () => {
  function bundleDir(stamp: string | undefined): string {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-ui-'));
    cleanup.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    mkdirSync(join(dir, 'assets'));
    writeFileSync(
      join(dir, 'index.html'),
      '<!doctype html><script src="./assets/app.js"></script>',
    );
    writeFileSync(join(dir, 'assets', 'app.js'), 'console.log(1)');
    if (stamp !== undefined) writeFileSync(join(dir, '.source-hash'), `${stamp}\n`);
    return dir;
  }

  it('serves a bundle built from the current sources, itself, and any view path as the page', async () => {
    const gateway = await startGateway();
    const ui = createWebUi(gateway, { uiDir: bundleDir(uiSourceHash()) });
    cleanup.push(() => ui.close());
    const page = await ui.inject({ method: 'GET', url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toContain('./assets/app.js');
    const script = await ui.inject({ method: 'GET', url: '/assets/app.js' });
    expect(script.headers['content-type']).toContain('text/javascript');
    expect((await ui.inject({ method: 'GET', url: '/assets/missing.js' })).statusCode).toBe(404);
    // The stamp is not served.
    expect((await ui.inject({ method: 'GET', url: '/.source-hash' })).body).not.toContain(
      uiSourceHash(),
    );
  });

  it('refuses to serve a stale or missing bundle and says how to build it', async () => {
    const gateway = await startGateway();
    for (const dir of [bundleDir('0'.repeat(64)), bundleDir(undefined)]) {
      const ui = createWebUi(gateway, { uiDir: dir });
      cleanup.push(() => ui.close());
      const page = await ui.inject({ method: 'GET', url: '/' });
      expect(page.statusCode).toBe(503);
      expect(page.body).toContain('npm run build:ui');
    }
  });
});

describe('message store', () => {
  it('keeps deduplicating across a restart when backed by a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-demo-'));
    cleanup.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const path = join(dir, 'messages.db');
    const message = {
      messageId: 'm-1',
      sessionId: 's',
      agentId: 'a',
      clusterId: 'c',
      kind: 'state',
      receivedAt: 1,
      summary: 'x',
      payload: new Uint8Array([1]),
    };
    const first = new MessageStore(path);
    expect(first.insert(message)).toBe(true);
    first.close();
    const second = new MessageStore(path);
    cleanup.push(() => {
      second.close();
    });
    expect(second.insert(message)).toBe(false);
    expect(second.count()).toBe(1);
  });
});
