// The demo gateway's log query endpoint (GET /api/logs, through fastify's inject: routing, the
// SQLite query and the JSON answer) over 1 million stored log records. Each filter's page
// latency (p50 and p99 of a 200-row page, newest pages and deep pages alike) is printed beside
// the unfiltered page measured in the same run. Target, fixed before measuring (issue 13): a
// filtered page answers in under 100 ms, read as p99 <= 100 ms for every filter.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import type { LogPage } from '../../demo-gateway/api-types.js';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import type { NewLogLine } from '../../demo-gateway/log-store.js';
import { createWebUi } from '../../demo-gateway/web-ui.js';
import { rate, type BenchCase, type BenchResult } from '../types.js';

const LINES = 1_000_000;
const PER_MESSAGE = 200;
const QUERIES = 60;
const TARGET_P99_MS = 100;

const NAMESPACES = Array.from({ length: 20 }, (_, i) => `team-${i}`);
const CONTAINERS = ['app', 'nginx', 'worker', 'sidecar', 'init'];

/** A well-mixed 0..99 from a line number and a salt: columns independent of each other. */
function mix(i: number, salt: number): number {
  let h = Math.imul(i ^ salt, 0x45d9f3b);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return ((h ^ (h >>> 16)) >>> 0) % 100;
}

/** Deterministic spread: 1% error, 9% warn, 60% info, 20% debug, 10% no level. */
function levelOf(i: number): 0 | 1 | 2 | 3 | 4 {
  const r = mix(i, 0x1234);
  if (r < 1) return 4;
  if (r < 10) return 3;
  if (r < 70) return 2;
  if (r < 90) return 1;
  return 0;
}

function line(i: number, receivedAt: number): NewLogLine {
  const workload = `svc-${(i * 31) % 100}`;
  const namespace = NAMESPACES[((i * 31) % 100) % NAMESPACES.length] ?? 'team-0';
  const pod = `${workload}-${Math.floor(i / 100) % 10}`;
  const level = levelOf(i);
  // 0.1% of the lines mention one account: a rare free-text match.
  const message =
    i % 1000 === 7
      ? `payment declined for account acct-2231 order ${i}`
      : `GET /api/items/${i % 5000} 200 ${i % 90} ms`;
  return {
    kind: 'line',
    sessionId: 'bench',
    timeMs: receivedAt,
    receivedAt,
    namespace,
    pod,
    container: CONTAINERS[i % CONTAINERS.length] ?? 'app',
    workload,
    workloadKind: 'Deployment',
    node: `node-${i % 8}`,
    level,
    message,
    raw: message,
    lineCount: 1,
    truncated: false,
  };
}

function fill(gateway: DemoGateway): number {
  const start = performance.now();
  const now = Date.now();
  for (let m = 0; m < LINES / PER_MESSAGE; m++) {
    const lines = Array.from({ length: PER_MESSAGE }, (_, k) => line(m * PER_MESSAGE + k, now));
    gateway.store.insert(
      {
        messageId: `m-${m}`,
        sessionId: 'bench',
        agentId: 'bench',
        clusterId: 'bench',
        kind: 'logs',
        receivedAt: now,
        summary: '',
        payload: new Uint8Array(0),
      },
      lines,
    );
  }
  return performance.now() - start;
}

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

export const demoLogQueryBench: BenchCase = {
  name: 'demo-log-query',
  async run({ dir }) {
    const gateway = new DemoGateway(
      { databasePath: join(dir, 'demo.db') },
      { logger: pino({ level: 'silent' }) },
    );
    const ui = createWebUi(gateway);
    try {
      const fillMs = fill(gateway);
      const newest = gateway.store.logs.newestSeq();
      /** Page latencies of one query string: newest pages and pages from random depths. */
      const measure = async (query: string): Promise<number[]> => {
        const times: number[] = [];
        for (let q = 0; q < QUERIES; q++) {
          // Every other page is deep: before a seq spread over the whole store.
          const before = q % 2 === 0 ? '' : `&before=${1 + Math.floor((newest * q) / QUERIES)}`;
          const start = performance.now();
          const response = await ui.inject({
            method: 'GET',
            url: `/api/logs?limit=200${query}${before}`,
          });
          times.push(performance.now() - start);
          if (response.statusCode !== 200) throw new Error(`${query}: ${response.body}`);
          if (q === 0 && response.json<LogPage>().lines.length === 0)
            throw new Error(`${query}: no rows`);
        }
        return times.sort((a, b) => a - b);
      };
      const baseline = await measure('');
      const results: BenchResult[] = [
        {
          name: `store ${LINES.toLocaleString('en-US')} records`,
          itemsPerSecond: rate(LINES, fillMs),
          unit: 'lines/s',
          baselineName: 'same',
          baselineItemsPerSecond: rate(LINES, fillMs),
        },
      ];
      const filters: [string, string][] = [
        ['namespace', '&namespace=team-3'],
        ['pod', '&pod=svc-42-2'],
        ['level error (1%)', '&level=error'],
        ['namespace + level error', '&namespace=team-3&level=error'],
        ['text, rare (0.1%)', '&q=acct-2231'],
        ['text, common', '&q=GET%20%2Fapi'],
      ];
      const base50 = percentile(baseline, 50);
      const base99 = percentile(baseline, 99);
      for (const [name, query] of filters) {
        const times = await measure(query);
        results.push(
          {
            name: `page p50, ${name}`,
            itemsPerSecond: percentile(times, 50),
            unit: 'ms',
            baselineName: 'unfiltered p50',
            baselineItemsPerSecond: base50,
          },
          {
            name: `page p99, ${name}`,
            itemsPerSecond: percentile(times, 99),
            unit: 'ms',
            baselineName: 'unfiltered p99',
            baselineItemsPerSecond: base99,
            targetAtMost: TARGET_P99_MS,
          },
        );
      }
      return results;
    } finally {
      await ui.close();
      await gateway.close();
    }
  },
};
