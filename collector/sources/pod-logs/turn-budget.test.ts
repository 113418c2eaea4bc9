// The turn budget: log readers yield the event loop once a turn's budget is spent, so the rest
// of the collector (the gateway stream's window updates and acks above all) gets every turn. The
// clock is a counter the consumer advances, so "a chunk takes 6 ms" is exact on any machine.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { PodLogHttp } from './pod-log-http.js';
import { TurnBudget, type PausableStream } from './turn-budget.js';

const BUDGET_MS = 10;
const CHUNK_COST_MS = 6;

/** Counts event-loop turns: an immediate that queues itself runs once per turn. */
function turnCounter(): { current: () => number; stop: () => void } {
  let turns = 0;
  let stopped = false;
  const tick = (): void => {
    if (stopped) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    current: () => turns,
    stop: () => {
      stopped = true;
    },
  };
}

class FakeStream implements PausableStream {
  paused = false;
  destroyed = false;
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
}

describe('TurnBudget', () => {
  it('hands chunks over at once while the turn has budget, then queues them in order and pauses their stream', async () => {
    let clock = 0;
    const budget = new TurnBudget(BUDGET_MS, () => clock);
    const a = new FakeStream();
    const b = new FakeStream();
    const handled: string[] = [];
    const handle =
      (name: string) =>
      (chunk: Buffer): void => {
        handled.push(`${name}:${chunk.toString()}`);
        clock += CHUNK_COST_MS;
      };
    budget.offer(a, Buffer.from('1'), handle('a'));
    budget.offer(b, Buffer.from('1'), handle('b'));
    // 12 ms spent: what comes now waits, and its stream stops reading.
    budget.offer(a, Buffer.from('2'), handle('a'));
    budget.offer(b, Buffer.from('2'), handle('b'));
    budget.offer(a, Buffer.from('3'), handle('a'));
    expect(handled).toEqual(['a:1', 'b:1']);
    expect(budget.waiting).toBe(3);
    expect([a.paused, b.paused]).toEqual([true, true]);

    // The next turn works off 10 ms worth, oldest first; b has nothing left waiting: resumed.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(handled).toEqual(['a:1', 'b:1', 'a:2', 'b:2']);
    expect([a.paused, b.paused]).toEqual([true, false]);
    await new Promise<void>((resolve) => setImmediate(resolve));
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(handled).toEqual(['a:1', 'b:1', 'a:2', 'b:2', 'a:3']);
    expect([a.paused, b.paused, budget.waiting]).toEqual([false, false, 0]);
  });

  it('hands a closed stream its last chunks before settled() resolves, and never resumes it', async () => {
    let clock = 0;
    const budget = new TurnBudget(BUDGET_MS, () => clock);
    const stream = new FakeStream();
    const handled: string[] = [];
    const handle = (chunk: Buffer): void => {
      handled.push(chunk.toString());
      clock += 2 * BUDGET_MS;
    };
    budget.offer(stream, Buffer.from('1'), handle);
    budget.offer(stream, Buffer.from('2'), handle);
    stream.destroyed = true;
    let settled = false;
    const done = budget.settled(stream).then(() => {
      settled = true;
    });
    expect([handled, settled]).toEqual([['1'], false]);
    await done;
    expect(handled).toEqual(['1', '2']);
    expect(stream.paused).toBe(true);
  });

  it('drops the waiting chunks of a forgotten stream (an aborted read)', async () => {
    let clock = 0;
    const budget = new TurnBudget(BUDGET_MS, () => clock);
    const stream = new FakeStream();
    const handled: string[] = [];
    const handle = (chunk: Buffer): void => {
      handled.push(chunk.toString());
      clock += 2 * BUDGET_MS;
    };
    budget.offer(stream, Buffer.from('1'), handle);
    budget.offer(stream, Buffer.from('2'), handle);
    budget.forget(stream);
    await budget.settled(stream);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(handled).toEqual(['1']);
    expect(budget.waiting).toBe(0);
  });
});

describe('PodLogHttp with a turn budget', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('handles at most a budget of chunks per event-loop turn across all its reads, every byte in order', async () => {
    const STREAMS = 4;
    const BYTES = 2 * 1024 * 1024;
    // Each stream's body at once: its socket always has more waiting than one turn may take.
    const body = (pod: string): Buffer =>
      Buffer.from(
        Array.from({ length: BYTES / 16 }, (_, i) => `${pod}${String(i).padStart(10, '0')}\n`).join(
          '',
        ),
      );
    const server = createServer((request, response) => {
      const pod = /pods\/(p\d)\/log/.exec(request.url ?? '')?.[1] ?? 'p?';
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end(body(pod));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: 'c',
          server: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
          skipTLSVerify: true,
        },
      ],
      users: [{ name: 'u', token: 'test-token-123' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });

    let clock = 0;
    const reader = new PodLogHttp(kc, new TurnBudget(BUDGET_MS, () => clock));
    const turns = turnCounter();
    const chunksPerTurn = new Map<number, number>();
    const received = new Map<string, Buffer[]>();
    try {
      await Promise.all(
        Array.from({ length: STREAMS }, (_, i) => {
          const pod = `p${String(i)}`;
          received.set(pod, []);
          return reader.read(
            { namespace: 'ns', pod, container: 'c', follow: true },
            new AbortController().signal,
            (chunk) => {
              received.get(pod)?.push(chunk);
              const turn = turns.current();
              chunksPerTurn.set(turn, (chunksPerTurn.get(turn) ?? 0) + 1);
              clock += CHUNK_COST_MS;
            },
          );
        }),
      );
    } finally {
      turns.stop();
      reader.close();
    }
    for (const [pod, chunks] of received) {
      expect(Buffer.concat(chunks).equals(body(pod)), pod).toBe(true);
    }
    // 10 ms a turn at 6 ms a chunk: two in the poll phase, two in the check phase at most.
    // Without the budget a turn takes whatever the sockets hold (dozens of 64 KiB chunks).
    expect(Math.max(...chunksPerTurn.values())).toBeLessThanOrEqual(4);
  });

  it('hands over no chunk after the read was aborted, even one that waited in the queue', async () => {
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end(Buffer.alloc(4 * 1024 * 1024, 'a\n'));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: 'c',
          server: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
          skipTLSVerify: true,
        },
      ],
      users: [{ name: 'u', token: 'test-token-123' }],
      contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
      currentContext: 'ctx',
    });
    let clock = 0;
    const budget = new TurnBudget(BUDGET_MS, () => clock);
    const reader = new PodLogHttp(kc, budget);
    const controllers = [new AbortController(), new AbortController()];
    let handed = 0;
    let afterAbort = 0;
    try {
      // Two reads share the budget, so chunks of both wait in its queue when one is aborted.
      await Promise.all(
        controllers.map((controller, i) =>
          reader.read(
            { namespace: 'ns', pod: `p${String(i)}`, container: 'c', follow: true },
            controller.signal,
            () => {
              if (controller.signal.aborted) afterAbort++;
              clock += CHUNK_COST_MS;
              // Aborted once chunks wait in the queue (they do within a few turns: two 4 MiB
              // bodies at 6 ms a chunk against a 10 ms turn), so that one would be handed over
              // after the abort if nothing stopped it.
              if (++handed >= 6 && budget.waiting > 0 && !controller.signal.aborted) {
                for (const c of controllers) c.abort();
              }
            },
          ),
        ),
      );
      // Let any queued chunk's turn come.
      for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    } finally {
      reader.close();
    }
    expect(handed).toBeGreaterThanOrEqual(6);
    // The abort happened, with chunks waiting: the check below is not vacuous.
    expect(controllers.every((c) => c.signal.aborted)).toBe(true);
    expect(afterAbort).toBe(0);
  });
});
