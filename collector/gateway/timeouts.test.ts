import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { AgentServiceService } from '../../proto/index.js';
import { bufferStats } from '../../test/helpers/buffer-stats.js';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import { captureLogs, until } from '../../test/helpers/gateway-harness.js';
import { GatewayStream, type GatewayStreamOptions } from './gateway-stream.js';
import type { GatewayBuffer } from './types.js';

/** A buffer that never has anything: these tests are about connecting. */
const emptyBuffer: GatewayBuffer = {
  take: () => [],
  ack: () => 0,
  discard: () => 0,
  quarantine: () => 0,
  requeue: () => 0,
  waitForItems: (signal) =>
    new Promise((_resolve, reject) => {
      signal.addEventListener('abort', () => {
        reject(new Error('aborted'));
      });
    }),
  stats: () => bufferStats(),
};

function options(
  port: number,
  overrides: Partial<GatewayStreamOptions> = {},
): GatewayStreamOptions {
  return {
    address: `127.0.0.1:${port}`,
    tls: false,
    dialTimeoutMs: 5000,
    handshakeTimeoutMs: 10_000,
    reconnectInitialDelayMs: 100,
    reconnectMaxDelayMs: 1000,
    identity: {
      tenantToken: 't',
      agentVersion: 'test',
      clusterId: 'c',
      agentId: 'a',
      capabilities: { logs: false, state: true, metrics: false },
    },
    ...overrides,
  };
}

describe('gateway stream timeouts', () => {
  it('gives up on a gateway that never answers the handshake, then backs off', async () => {
    const server = new Server();
    server.addService(AgentServiceService, {
      connect: (call: { on(event: string, fn: () => void): void }) => {
        call.on('data', () => undefined);
      },
    });
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => {
        if (err) reject(err);
        else resolve(p);
      });
    });
    const logs = captureLogs();
    const clock = new FakeClock();
    await using stream = new GatewayStream(options(port), {
      logger: logs.logger,
      buffer: emptyBuffer,
      clock,
      random: () => 0.5,
    });
    await stream.start(new AbortController().signal);
    await clock.waitForSleep((ms) => ms === 10_000);
    expect(stream.status().state).toBe('handshaking');
    clock.advance(10_000);
    await clock.waitForSleep((ms) => ms === 100);
    const lost = logs.lines.find((l) => l.msg === 'gateway stream lost; reconnecting');
    expect(lost?.['reason']).toBe('no handshake reply within 10000 ms');
    server.forceShutdown();
  });

  it('never resets the backoff for a session that was never accepted, however long it lasted', async () => {
    const server = new Server();
    server.addService(AgentServiceService, {
      connect: (call: { on(event: string, fn: () => void): void }) => {
        call.on('data', () => undefined);
      },
    });
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => {
        if (err) reject(err);
        else resolve(p);
      });
    });
    const logs = captureLogs();
    const clock = new FakeClock();
    // Each attempt waits 10 s for a handshake reply: twice the time that makes an accepted
    // session healthy. Unanswered, it must still count as a failure.
    await using stream = new GatewayStream(options(port, { healthySessionMs: 5000 }), {
      logger: logs.logger,
      buffer: emptyBuffer,
      clock,
      random: () => 0.5,
    });
    await stream.start(new AbortController().signal);
    for (const backoff of [100, 200, 400]) {
      await clock.waitForSleep((ms) => ms === 10_000);
      clock.advance(10_000);
      await clock.waitForSleep((ms) => ms === backoff);
      expect(stream.status().consecutiveFailures).toBe(Math.log2(backoff / 50));
      clock.advance(backoff);
    }
    server.forceShutdown();
  });

  it('gives up dialing a peer that accepts TCP but never speaks HTTP/2', async () => {
    const sockets: Socket[] = [];
    const silent: NetServer = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const logs = captureLogs();
    const clock = new FakeClock();
    await using stream = new GatewayStream(options(address.port, { dialTimeoutMs: 200 }), {
      logger: logs.logger,
      buffer: emptyBuffer,
      clock,
      random: () => 0.5,
    });
    await stream.start(new AbortController().signal);
    await clock.waitForSleep((ms) => ms === 100);
    const lost = logs.lines.find((l) => l.msg === 'gateway stream lost; reconnecting');
    // A silent peer is a timeout, not a failure: said as such, without a TLS probe.
    expect(lost?.['reason']).toBe(
      `dial timed out after 200 ms: nothing answered at 127.0.0.1:${String(address.port)}; check that it is reachable from this pod (network policy, firewall, egress proxy) and its port`,
    );
    for (const socket of sockets) socket.destroy();
    silent.close();
  });

  it('retries a refused connection with backoff', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const address = probe.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    await new Promise<void>((resolve) =>
      probe.close(() => {
        resolve();
      }),
    );
    const logs = captureLogs();
    const clock = new FakeClock();
    await using stream = new GatewayStream(options(address.port), {
      logger: logs.logger,
      buffer: emptyBuffer,
      clock,
      random: () => 0.5,
    });
    await stream.start(new AbortController().signal);
    await clock.waitForSleep((ms) => ms === 100);
    const lost = logs.lines.find((l) => l.msg === 'gateway stream lost; reconnecting');
    expect(lost?.['reason']).toBe(
      `could not connect to 127.0.0.1:${String(address.port)}: connection refused by 127.0.0.1:${String(address.port)}: nothing listens there; check the host and port in gateway.address`,
    );
    clock.advance(100);
    await clock.waitForSleep((ms) => ms === 200);
    await until(() => stream.status().consecutiveFailures === 2);
  });
});
