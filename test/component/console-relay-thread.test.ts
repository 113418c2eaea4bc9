// The collector's console relay thread (collector/consoles/console-relay-thread.ts) with the
// demo gateway, a real gateway stream, a TCP forwarder that counts the connections to the
// gateway, and an executor that is a real gRPC server on a Unix socket holding every console
// stream open without answering (no process behind it):
// - the thread is not started with the collector, only by the first console request (consoles
//   offered but unused cost no second V8 heap), and it then runs until the collector stops;
// - the thread dials a console's call on a connection of its own, and closes that connection
//   when the last console ends, and when the thread is stopped with a console still open;
// - the relay's own flow control: with a gateway that reads nothing and an executor that has no
//   output window (it writes whatever its stream takes), the relay stops reading the executor,
//   so the executor is held back after far less than it had to send; the 50 MiB test on the real
//   node cannot show this, the executor's window bounds the output there whatever the relay does;
// - a console the gateway cuts before it opened at the executor (before the relay's call reached
//   the gateway, or after) ends the relay's executor stream: no session is left attached there;
// - a thread that fails refuses the console with EXECUTOR_UNAVAILABLE on the gateway's call
//   (the gateway is not left waiting), and the failure is in the main thread's log.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import {
  ConsoleStream,
  ExecutorServiceService,
  type ConsoleRequest,
  type ConsoleResponse,
} from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { createConsoleRelayThread } from '../../collector/consoles/console-relay-thread.js';
import { GatewayStream } from '../../collector/gateway/gateway-stream.js';
import { TEST_AGENT, TEST_CLUSTER, TEST_TOKEN, until } from '../helpers/gateway-harness.js';
import { startTcpForwarder } from '../helpers/tcp-proxy.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Output the pushing executor writes at most, in chunks of PUSH_CHUNK bytes. */
const PUSH_TOTAL = 128 * 1024 * 1024;
const PUSH_CHUNK = 64 * 1024;

/**
 * An executor that holds each console stream open and counts them; with `push`, it writes
 * output chunks as fast as the stream takes them, waiting for its drain when a write is refused
 * (grpc-js's backpressure), and ignores acknowledgements: no output window of its own.
 */
async function holdingExecutor(socketPath: string, push = false) {
  const server = new Server();
  const streams: ServerDuplexStream<ConsoleRequest, ConsoleResponse>[] = [];
  /** Streams the collector ended (cancelled or half-closed): the session would detach. */
  const gone = new Set<ServerDuplexStream<ConsoleRequest, ConsoleResponse>>();
  const pushed = { bytes: 0, waiting: false };
  const pushOutput = async (call: ServerDuplexStream<ConsoleRequest, ConsoleResponse>) => {
    const data = Buffer.alloc(PUSH_CHUNK, 0x61);
    for (let seq = 1; pushed.bytes < PUSH_TOTAL && !call.cancelled; seq++) {
      const chunk = { seq: String(seq), stream: ConsoleStream.CONSOLE_STREAM_STDOUT, data };
      pushed.bytes += PUSH_CHUNK;
      if (!call.write({ output: { $case: 'chunk', value: chunk } })) {
        pushed.waiting = true;
        await once(call, 'drain');
        pushed.waiting = false;
      }
    }
  };
  const unimplemented = () => {
    throw new Error('not used here');
  };
  server.addService(ExecutorServiceService, {
    getCapabilities: unimplemented,
    authorizeCommand: unimplemented,
    runNodeJob: unimplemented,
    cancelNodeJob: unimplemented,
    runMutation: unimplemented,
    console: (call: ServerDuplexStream<ConsoleRequest, ConsoleResponse>) => {
      call.on('error', () => undefined);
      call.on('cancelled', () => gone.add(call));
      call.on('end', () => gone.add(call));
      call.on('data', () => undefined);
      streams.push(call);
      if (push) void pushOutput(call).catch(() => undefined);
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${socketPath}`, ServerCredentials.createInsecure(), (err) => {
      if (err) reject(err);
      else resolve();
    });
  });
  cleanups.push(() => {
    server.forceShutdown();
  });
  return { streams, gone, pushed };
}

async function startAgent(options: { workerUrl?: URL; push?: boolean } = {}) {
  const logged: { msg: string; err?: string; thread?: string }[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(JSON.parse(chunk.toString()) as (typeof logged)[number]);
        done();
      },
    }),
  );
  const gateway = new DemoGateway(
    { acceptToken: TEST_TOKEN },
    { logger: pino({ level: 'silent' }) },
  );
  cleanups.push(() => gateway.close());
  const port = await gateway.listen('127.0.0.1', 0);
  const forwarder = await startTcpForwarder('127.0.0.1', port);
  cleanups.push(() => forwarder.close());
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-relay-thread-'));
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const socketPath = join(dir, 'executor.sock');
  const executor = await holdingExecutor(socketPath, options.push === true);
  const buffer = new DurableBuffer(
    { path: join(dir, 'buffer.db'), maxMemoryBytes: 1024 * 1024, maxDiskBytes: 8 * 1024 * 1024 },
    { logger: pino({ level: 'silent' }) },
  );
  const dial = {
    address: `127.0.0.1:${String(forwarder.port)}`,
    tls: false,
    dialTimeoutMs: 5000,
  };
  const relay = createConsoleRelayThread({
    socketPath,
    dial,
    logLevel: 'info',
    logger,
    enqueue: (item) => {
      buffer.enqueue(item);
    },
    ...(options.workerUrl === undefined ? {} : { workerUrl: options.workerUrl }),
  });
  const stream = new GatewayStream(
    {
      ...dial,
      handshakeTimeoutMs: 10_000,
      reconnectInitialDelayMs: 100,
      reconnectMaxDelayMs: 1000,
      identity: {
        tenantToken: TEST_TOKEN,
        agentVersion: '0.1.0-test',
        clusterId: TEST_CLUSTER,
        agentId: TEST_AGENT,
        capabilities: { logs: true, state: true, metrics: false, podConsoles: true },
      },
    },
    { logger, buffer, clock: systemClock, random: () => 0.5, consoleHandler: relay.handle },
  );
  const controller = new AbortController();
  // In the collector's order: the relay thread starts before the stream and closes after it.
  await relay.service.start(controller.signal);
  await stream.start(controller.signal);
  cleanups.push(async () => {
    controller.abort();
    await stream.close();
    await relay.service.close();
    await buffer.close();
  });
  const session = await gateway.waitForSession((s) => s.state === 'connected');
  return { gateway, forwarder, session, relay, executor, logged };
}

describe('the console relay thread', () => {
  it('is started by the first console, not with the collector, and then runs until it stops', async () => {
    const { gateway, session, relay, executor } = await startAgent();
    // The service started and the gateway session is up: no thread yet.
    expect(relay.running).toBe(false);
    const first = gateway.consoles.open(session.sessionId, { namespace: 'default', pod: 'a' });
    await until(() => executor.streams.length === 1, 'the first console at the executor');
    expect(relay.running).toBe(true);
    executor.streams[0]?.end();
    await until(() => first.state === 'detached', 'the gateway call ended');
    // No console open any more: the thread stays (only its gateway connection closes).
    expect(relay.running).toBe(true);
    await relay.service.close();
    expect(relay.running).toBe(false);
  });

  it("dials a console's call on its own connection, closed when no console is open and when the thread stops", async () => {
    const { gateway, forwarder, session, relay, executor } = await startAgent();
    expect(forwarder.open()).toBe(1);

    const first = gateway.consoles.open(session.sessionId, {
      namespace: 'default',
      pod: 'a',
      tty: true,
    });
    await until(() => executor.streams.length === 1, 'the first console at the executor');
    await until(() => forwarder.open() === 2, "the first console's connection");
    // The executor ends the stream (as at the process's exit): the thread's last console is
    // gone, and so is its connection.
    executor.streams[0]?.end();
    await until(() => first.state === 'detached', 'the gateway call ended');
    await until(() => forwarder.open() === 1, 'the console connection closed once idle');

    gateway.consoles.open(session.sessionId, { namespace: 'default', pod: 'b', tty: true });
    await until(() => executor.streams.length === 2, 'the second console at the executor');
    await until(() => forwarder.open() === 2, "the second console's connection");
    // The collector stops with the console open: the thread ends, and its connection with it.
    await relay.service.close();
    await until(() => forwarder.open() === 1, 'the console connection closed with the thread');
  });

  it('stops reading the executor while the gateway reads nothing: the executor is held back', async () => {
    // The executor here has no output window, so nothing but the relay's own pause (a gateway
    // call that refuses a write pauses the executor stream) holds its output back. Without that
    // pause the relay reads all PUSH_TOTAL and queues it on the gateway's call, in memory.
    const { gateway, session, executor } = await startAgent({ push: true });
    const console = gateway.consoles.open(session.sessionId, { namespace: 'default', pod: 'a' });
    console.pauseReading();
    await until(() => executor.pushed.waiting, 'the executor waiting for the stream to drain');
    // A second for a relay that keeps reading to show it (it takes PUSH_TOTAL in well under that).
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(executor.pushed.waiting).toBe(true);
    // What the sockets, the HTTP/2 windows and the streams' buffers between executor and gateway
    // hold, far below PUSH_TOTAL.
    expect(executor.pushed.bytes).toBeLessThan(PUSH_TOTAL / 4);
  });

  /**
   * After a cut from the gateway: the relay ended its executor stream, the gateway shows the
   * console detached, and the console connection closed once no console is open (grpc-js reports
   * the call's status before its readable side ends).
   */
  async function expectCutEnded(
    agent: Pick<Awaited<ReturnType<typeof startAgent>>, 'forwarder' | 'executor'>,
    console: { readonly state: string },
  ): Promise<void> {
    const stream = agent.executor.streams[0];
    await until(
      () => stream !== undefined && agent.executor.gone.has(stream),
      'the executor stream ended by the relay',
      { timeoutMs: 10_000 },
    );
    expect(console.state).toBe('detached');
    await until(() => agent.forwarder.open() === 1, 'the console connection closed once idle');
  }

  it('a call the gateway cut before it arrived there ends the executor stream when it does', async () => {
    // The gateway ends a console's call (cut: a lost network) while the console is still opening,
    // before the relay's call has even reached the gateway. The call that arrives afterwards must
    // not live on as if nothing happened: the relay would keep its executor stream, and the
    // session at the executor would count against max_sessions until max_session_sec.
    const { gateway, forwarder, session, executor } = await startAgent();
    const console = gateway.consoles.open(session.sessionId, { namespace: 'default', pod: 'a' });
    console.cut();
    await until(() => executor.streams.length === 1, 'the console at the executor');
    await expectCutEnded({ forwarder, executor }, console);
  });

  it('a call the gateway cut before the console opened at the executor ends the executor stream', async () => {
    // Cut once the relay's call reached the gateway, with the executor not answering yet.
    const { gateway, forwarder, session, executor } = await startAgent();
    const console = gateway.consoles.open(session.sessionId, { namespace: 'default', pod: 'a' });
    await until(() => executor.streams.length === 1, 'the console at the executor');
    await until(() => console.resize(80, 24), "the relay's call bound at the gateway");
    console.cut();
    await expectCutEnded({ forwarder, executor }, console);
  });

  it('that failed refuses the console with a code, and its error is in the main log', async () => {
    const { gateway, session, logged } = await startAgent({
      workerUrl: new URL('../fixtures/console-relay/failing-worker.mjs', import.meta.url),
    });
    const console = gateway.consoles.open(session.sessionId, {
      namespace: 'default',
      pod: 'a',
      tty: true,
    });
    await until(() => console.state === 'refused', 'the console refused');
    expect(console.refusal?.code).toBe('EXECUTOR_UNAVAILABLE');
    expect(console.refusal?.reason).toContain('the relay thread failed on purpose');
    expect(logged).toContainEqual(
      expect.objectContaining({
        msg: 'console relay thread failed',
        err: 'the relay thread failed on purpose',
      }),
    );
  });
});
