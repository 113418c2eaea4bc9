// Fault tests of the delivery path, with real processes: the demo gateway (demo-gateway/main.ts,
// SQLite store on a file) is SIGKILLed and restarted 20 times during a steady stream, then the
// producing collector (test/fixtures/stream-producer.ts: DurableBuffer + GatewayStream) is
// SIGTERMed and SIGKILLed mid-stream. Afterwards the gateway's store must hold every produced
// item, once, in production order. The only documented loss is checked as a bound: after a
// SIGKILL, items held only in the memory tier (docs/buffer.md).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { AgentMessage, StateEvent } from '../../proto/index.js';
import { makeTempDir } from '../helpers/buffer-test-support.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const producerScript = join(root, 'test', 'fixtures', 'stream-producer.ts');
const gatewayScript = join(root, 'demo-gateway', 'main.ts');
const GATEWAY_RESTARTS = 20;
const MEMORY_BYTES = 16 * 1024;
/** Progress wanted between two faults, in items: each fault hits a stream that is moving. */
const STEP = 100;

type Report = Record<string, unknown> & { readonly produced?: number; readonly settled?: number };

const isReport = (line: string): boolean => line.startsWith('{"produced"');

/** Phase markers on stderr, so a stuck run shows where it stopped. */
function progress(message: string): void {
  process.stderr.write(`[faults] ${message}\n`);
}

/** A child process whose stdout is JSON lines (or, for the gateway, a few plain lines). */
class Child {
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #child: ChildProcess;
  readonly #waiters = new Set<() => void>();
  #scanned = 0;

  constructor(args: readonly string[]) {
    this.#child = spawn(process.execPath, ['--import', 'tsx', ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const stdout = this.#child.stdout;
    if (!stdout) throw new Error('no stdout');
    createInterface({ input: stdout }).on('line', (line) => {
      this.lines.push(line);
      this.#wake();
    });
    this.exited = once(this.#child, 'exit').then(([code, signal]) => {
      this.#wake();
      return { code: code as number | null, signal: signal as NodeJS.Signals | null };
    });
  }

  #wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }

  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  kill(signal: NodeJS.Signals): void {
    this.#child.kill(signal);
  }

  reports(): Report[] {
    return this.lines.filter(isReport).map((l) => JSON.parse(l) as Report);
  }

  last(): Report {
    const line = this.lines.findLast(isReport);
    return line === undefined ? {} : (JSON.parse(line) as Report);
  }

  /** Resolves with the first new line matching; rejects if the process exits first. */
  async waitForLine(match: (line: string) => boolean, what: string): Promise<string> {
    progress(`waiting for ${what}`);
    // Only lines that arrive from now on (and, for the first wait, what is already there)
    // are looked at, each once.
    let next = this.#scanned;
    for (let i = 0; i < 1_000_000; i++) {
      while (next < this.lines.length) {
        const line = this.lines[next++];
        if (line !== undefined && match(line)) {
          this.#scanned = next;
          return line;
        }
      }
      if (!this.running) throw new Error(`process exited before ${what}`);
      await new Promise<void>((resolve) => {
        this.#waiters.add(resolve);
      });
    }
    throw new Error(`gave up waiting for ${what}`);
  }

  /** Waits for a report satisfying `predicate`. */
  async waitForReport(predicate: (r: Report) => boolean, what: string): Promise<Report> {
    const line = await this.waitForLine(
      (l) => isReport(l) && predicate(JSON.parse(l) as Report),
      what,
    );
    return JSON.parse(line) as Report;
  }
}

function startGateway(dbPath: string, port: number): Child {
  return new Child([
    gatewayScript,
    '--grpc-port',
    String(port),
    '--http-port',
    '0',
    '--db',
    dbPath,
  ]);
}

async function gatewayPort(gateway: Child): Promise<number> {
  const line = await gateway.waitForLine((l) => l.startsWith('demo gateway: gRPC'), 'gateway up');
  const port = Number(/127\.0\.0\.1:(\d+)/.exec(line)?.[1]);
  expect(port).toBeGreaterThan(0);
  return port;
}

function startProducer(dbPath: string, port: number, run: string, memoryBytes: number): Child {
  return new Child([
    producerScript,
    '--db',
    dbPath,
    '--address',
    `127.0.0.1:${port}`,
    '--run',
    run,
    '--memory-bytes',
    String(memoryBytes),
  ]);
}

/** Accounting size of one item, as the buffer charges it (payload + id + 32). */
function itemCost(run: string): number {
  const id = `${run}-0000000`;
  const payload = AgentMessage.encode({
    messageId: id,
    payload: {
      $case: 'state',
      value: StateEvent.fromPartial({ name: id, namespace: 'faults', resource: 'pods' }),
    },
  }).finish();
  return payload.byteLength + id.length + 32;
}

interface Stored {
  readonly run: string;
  readonly n: number;
}

function readStore(dbPath: string): { ids: string[]; stored: Stored[] } {
  const db = new Database(dbPath, { readonly: true });
  try {
    const ids = db
      .prepare<[], { message_id: string }>(
        "SELECT message_id FROM messages WHERE kind = 'state' ORDER BY seq",
      )
      .all()
      .map((row) => row.message_id);
    const stored = ids.map((id) => {
      const match = /^([a-z])-(\d{7})$/.exec(id);
      if (!match?.[1] || !match[2]) throw new Error(`unexpected id ${id}`);
      return { run: match[1], n: Number(match[2]) };
    });
    return { ids, stored };
  } finally {
    db.close();
  }
}

function range(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}

describe('delivery under faults (real processes)', () => {
  it('gateway killed 20 times, collector SIGTERMed and SIGKILLed: every item once, in order', async () => {
    const dir = makeTempDir('kubexa-faults-');
    const children: Child[] = [];
    const track = (child: Child): Child => {
      children.push(child);
      return child;
    };
    try {
      const gatewayDb = join(dir.path, 'gateway.db');
      const bufferDb = join(dir.path, 'buffer.db');
      let gateway = track(startGateway(gatewayDb, 0));
      const port = await gatewayPort(gateway);

      // Phase 1: a steady stream while the gateway is SIGKILLed and restarted 20 times.
      const a = track(startProducer(bufferDb, port, 'a', MEMORY_BYTES));
      let sessions = 0;
      for (let restart = 0; restart < GATEWAY_RESTARTS; restart++) {
        const settled = a.last().settled ?? 0;
        await a.waitForReport((r) => (r.settled ?? 0) >= settled + STEP, `flow ${restart}`);
        gateway.kill('SIGKILL');
        expect((await gateway.exited).signal).toBe('SIGKILL');
        const produced = a.last().produced ?? 0;
        await a.waitForReport((r) => (r.produced ?? 0) >= produced + STEP, `buffering ${restart}`);
        gateway = track(startGateway(gatewayDb, port));
        await gatewayPort(gateway);
        await gateway.waitForLine((l) => l.includes('"agent connected"'), 'agent reconnected');
        sessions++;
      }
      expect(sessions).toBe(GATEWAY_RESTARTS);

      // Phase 2: the collector SIGTERMed mid-stream flushes memory to disk and exits 0.
      const settledBeforeTerm = a.last().settled ?? 0;
      await a.waitForReport((r) => (r.settled ?? 0) > settledBeforeTerm, 'flow before TERM');
      a.kill('SIGTERM');
      expect(await a.exited).toEqual({ code: 0, signal: null });
      const aStopped = a.reports().find((r) => r['stopped'] === true);
      const producedA = aStopped?.produced ?? -1;
      const pendingAtTerm = Number(aStopped?.['pending'] ?? 0);

      // Phase 3: the next process replays a's rest; then, with the gateway down so that items
      // pile up in its memory tier, it is SIGKILLed.
      const b = track(startProducer(bufferDb, port, 'b', MEMORY_BYTES));
      const bStart = await b.waitForReport(() => true, 'b started');
      await b.waitForReport(
        (r) => (r.settled ?? 0) >= Number(bStart['recovered']) + STEP,
        'b flow',
      );
      gateway.kill('SIGKILL');
      await gateway.exited;
      const producedBeforeOutage = b.last().produced ?? 0;
      await b.waitForReport((r) => (r.produced ?? 0) >= producedBeforeOutage + STEP, 'b buffering');
      b.kill('SIGKILL');
      await b.exited;
      const bLast = b.last();
      const producedB = bLast.produced ?? 0;
      gateway = track(startGateway(gatewayDb, port));
      await gatewayPort(gateway);

      // Phase 4: every item straight to disk (a memory tier smaller than one item): a SIGKILL
      // then loses nothing that was produced.
      const c = track(startProducer(bufferDb, port, 'c', 1));
      await c.waitForReport((r) => (r.settled ?? 0) >= STEP && (r.produced ?? 0) >= 2 * STEP, 'c');
      c.kill('SIGKILL');
      await c.exited;
      const producedC = c.last().produced ?? 0;

      // Phase 5: a last run replays everything left, stops producing and drains.
      const d = track(startProducer(bufferDb, port, 'd', MEMORY_BYTES));
      await d.waitForReport((r) => (r.produced ?? 0) >= 2 * STEP, 'd produced');
      d.kill('SIGUSR2');
      const producedD = (await d.waitForReport((r) => r['final'] === true, 'd final')).produced;
      await d.waitForReport((r) => r['drained'] === true, 'd drained');
      d.kill('SIGTERM');
      expect(await d.exited).toEqual({ code: 0, signal: null });
      gateway.kill('SIGTERM');
      await gateway.exited;

      const { ids, stored } = readStore(gatewayDb);
      const byRun = (run: string): number[] => stored.filter((s) => s.run === run).map((s) => s.n);

      // None twice: the store deduplicates by message_id, and every stored id is distinct.
      expect(new Set(ids).size).toBe(ids.length);
      // Order: production order across all runs and restarts (run letter, then number).
      const key = (s: Stored): string => `${s.run}-${String(s.n).padStart(7, '0')}`;
      const sorted = [...stored].sort((x, y) => (key(x) < key(y) ? -1 : 1));
      expect(stored.map(key)).toEqual(sorted.map(key));
      // Every produced item arrived (a, c, d: exactly; c was SIGKILLed with nothing in memory).
      expect(producedA).toBeGreaterThan(GATEWAY_RESTARTS * STEP);
      expect(byRun('a')).toEqual(range(producedA));
      const storedC = byRun('c');
      expect(storedC).toEqual(range(storedC.length));
      expect(storedC.length).toBeGreaterThanOrEqual(producedC);
      expect(byRun('d')).toEqual(range(producedD ?? -1));
      // b was SIGKILLed with a memory tier: what is missing is at most what memory could hold.
      const bStored = byRun('b');
      const bMissing = range(producedB).filter((n) => !bStored.includes(n)).length;
      const memoryItems = Math.floor(MEMORY_BYTES / itemCost('b'));
      expect(bMissing).toBeLessThanOrEqual(memoryItems);

      process.stdout.write(
        `${JSON.stringify({
          gatewayRestarts: GATEWAY_RESTARTS,
          producedA,
          pendingAtTerm,
          sentA: aStopped?.['sent'],
          settledA: aStopped?.settled,
          producedB,
          bPendingAtKill: bLast['pending'],
          bMissing,
          memoryItems,
          producedC,
          storedC: storedC.length,
          producedD,
          stored: ids.length,
        })}\n`,
      );
    } finally {
      for (const child of children) if (child.running) child.kill('SIGKILL');
      await Promise.all(children.map((child) => child.exited));
      dir.remove();
    }
  }, 300_000);
});
