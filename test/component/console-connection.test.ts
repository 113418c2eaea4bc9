// Console frames never queue behind the Connect stream's bytes: a console's call has a TCP
// connection of its own to the gateway. Here the Connect call's connection is frozen (a TCP
// forwarder stops passing its bytes, as a socket full of log batches the gateway has not read
// yet would hold them) while a console is open: keystrokes still reach the agent and their
// echoes still reach the gateway. On one shared connection they would wait behind the frozen
// bytes forever.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import type { ConsoleGatewayFrame } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import {
  stateItem,
  TEST_AGENT,
  TEST_CLUSTER,
  TEST_TOKEN,
  until,
} from '../helpers/gateway-harness.js';
import { startTcpForwarder } from '../helpers/tcp-proxy.js';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { GatewayStream } from '../../collector/gateway/gateway-stream.js';
import type { ConsoleHandler } from '../../collector/gateway/session.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Terminal sizes the agent-side console received, in order. */
const resizes: { cols: number; rows: number }[] = [];

/** An agent-side console that echoes every stdin frame back as output (no executor needed). */
const echoConsole: ConsoleHandler = (request, dial) => {
  const call = dial();
  call.on('error', () => undefined);
  const requestId = request.value.requestId;
  call.write({ requestId, frame: undefined });
  call.write({
    requestId,
    frame: {
      $case: 'opened',
      value: {
        sessionId: 'echo-session',
        principal: 'demo-user@example.com',
        container: 'main',
        command: ['cat'],
        resumeWindowSec: 0,
        maxSessionSec: 60,
        replayFrom: '1',
      },
    },
  });
  let seq = 0;
  call.on('data', (frame: ConsoleGatewayFrame) => {
    if (frame.frame?.$case === 'resize') resizes.push(frame.frame.value);
    if (frame.frame?.$case !== 'stdin') return;
    seq += 1;
    call.write({
      requestId,
      frame: {
        $case: 'output',
        value: { seq: String(seq), stderr: false, data: frame.frame.value },
      },
    });
  });
};

/** The demo gateway, a TCP forwarder in front of it, and a gateway stream with the echo console. */
async function startAgent() {
  const logger = pino({ level: 'silent' });
  const gateway = new DemoGateway({ acceptToken: TEST_TOKEN }, { logger });
  cleanups.push(() => gateway.close());
  const port = await gateway.listen('127.0.0.1', 0);
  const forwarder = await startTcpForwarder('127.0.0.1', port);
  cleanups.push(() => forwarder.close());
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-console-conn-'));
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const buffer = new DurableBuffer(
    { path: join(dir, 'buffer.db'), maxMemoryBytes: 1024 * 1024, maxDiskBytes: 8 * 1024 * 1024 },
    { logger },
  );
  const stream = new GatewayStream(
    {
      address: `127.0.0.1:${String(forwarder.port)}`,
      tls: false,
      dialTimeoutMs: 5000,
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
    { logger, buffer, clock: systemClock, random: () => 0.5, consoleHandler: echoConsole },
  );
  const controller = new AbortController();
  await stream.start(controller.signal);
  cleanups.push(async () => {
    controller.abort();
    await stream.close();
    await buffer.close();
  });
  const session = await gateway.waitForSession((s) => s.state === 'connected');
  return { gateway, forwarder, buffer, session };
}

describe("a console's own connection to the gateway", () => {
  it('keeps echoing keystrokes while the Connect call’s connection passes no bytes', async () => {
    const { gateway, forwarder, buffer, session } = await startAgent();
    expect(forwarder.open()).toBe(1);

    const console = gateway.consoles.open(session.sessionId, {
      namespace: 'default',
      pod: 'echo',
      tty: true,
    });
    await until(() => console.state === 'open', 'the console open');
    // The console dialled a second connection; the Connect call keeps the first.
    expect(forwarder.open()).toBe(2);
    console.stdin('before ');
    await until(() => console.text().includes('before '), 'the first echo');

    // The Connect call's connection stops passing bytes; the buffer keeps writing onto it.
    forwarder.freeze(1);
    for (let n = 0; n < 200; n++) buffer.enqueue(stateItem(n));
    console.stdin('after-freeze');
    await until(() => console.text().includes('after-freeze'), 'the echo past the frozen stream');
    expect(console.text()).toBe('before after-freeze');
  });
});

describe('the demo gateway sizes a console', () => {
  it('sends a size asked for before the agent’s call arrived once the call arrives', async () => {
    const { gateway, session } = await startAgent();
    resizes.length = 0;
    const console = gateway.consoles.open(session.sessionId, { namespace: 'default', pod: 'echo' });
    // The page sizes its terminal at once: no call of the agent's has arrived yet.
    expect(console.resize(132, 41)).toBe(false);
    await until(() => console.state === 'open', 'the console open');
    await until(() => resizes.length > 0, 'the size at the agent');
    expect(resizes).toEqual([{ cols: 132, rows: 41 }]);
  });
});
