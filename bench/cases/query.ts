// Live query overhead: a GET of one ConfigMap and a 500-row TABLE LIST through the collector's
// query path (policy, the API request, sanitizing, encoding the AgentMessage) beside the same
// request made with a bare keep-alive HTTPS client, in the same run against the same test cluster.
// The same queries sent by the demo gateway over a real gRPC stream are printed as detail: that
// path adds the gateway's own work (it stores every message in SQLite) and the gRPC hops.
// Requests alternate between the two so both see the same machine load.
// Targets (fixed before measuring): GET p99 at most 5 ms above the direct p99; LIST p99 at most
// 1.3x the direct p99.
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createLiveQuery } from '../../collector/query/query-service.js';
import { AgentMessage, QueryVerb, QueryView, ResourceQuery } from '../../proto/index.js';
import { load } from '../../shared/config/load-for-test.js';
import {
  killClusterProcesses,
  startCluster,
  stopCluster,
  type ClusterOptions,
} from '../../test/cluster/cluster.js';
import { startHarness } from '../../test/helpers/gateway-harness.js';
import { loadKubeConfig } from '../../test/helpers/kube.js';
import type { BenchCase, BenchContext, BenchResult } from '../types.js';

const NAMESPACE = 'bench-query';
const ROWS = 500;
const GET_ROUNDS = 400;
const LIST_ROUNDS = 80;
const WARMUP = 20;
const TABLE_ACCEPT = 'application/json;as=Table;v=v1;g=meta.k8s.io';

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/** A bare HTTPS client on the same credentials: one kept-alive agent, the body read whole. */
async function directClient(kc: KubeConfig) {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('no cluster');
  const options: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  const agent = new https.Agent({
    ca: options.ca,
    cert: options.cert,
    key: options.key,
    keepAlive: true,
  });
  const headers = (options.headers ?? {}) as Record<string, string>;
  return {
    get: (path: string, accept: string) =>
      new Promise<number>((resolve, reject) => {
        const request = https.request(
          new URL(cluster.server + path),
          { agent, headers: { ...headers, accept } },
          (response) => {
            let bytes = 0;
            response.on('data', (chunk: Buffer) => (bytes += chunk.length));
            response.on('end', () => {
              if (response.statusCode === 200) resolve(bytes);
              else reject(new Error(`HTTP ${String(response.statusCode)}`));
            });
          },
        );
        request.on('error', reject);
        request.end();
      }),
    close: () => {
      agent.destroy();
    },
  };
}

export const queryBench: BenchCase = {
  name: 'query',
  async run({ dir, log }: BenchContext): Promise<BenchResult[]> {
    const options: ClusterOptions = {
      name: `kubexa-bench-query-${String(process.pid)}`,
      workdir: `${dir}/cluster`,
      env: process.env,
    };
    const onExit = (): void => {
      killClusterProcesses(options.workdir, options.name);
    };
    process.once('exit', onExit);
    try {
      const cluster = await startCluster(options);
      const kc = loadKubeConfig(cluster.kubeconfigPath);
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
      for (let i = 0; i < ROWS; i += 25) {
        await Promise.all(
          Array.from({ length: 25 }, (_, j) =>
            core.createNamespacedConfigMap({
              namespace: NAMESPACE,
              body: {
                metadata: {
                  name: `cm-${String(i + j).padStart(4, '0')}`,
                  labels: { app: 'bench' },
                },
                data: { value: `row ${String(i + j)}` },
              },
            }),
          ),
        );
      }
      const { config } = load('query: {rules: [{resources: ["*"]}]}');
      const live = createLiveQuery(config.query, {
        kube: kc,
        logger: pino({ level: 'silent' }),
        registry: new Registry(),
      });
      const harness = await startHarness({ deps: { queryHandler: live.handler } });
      const direct = await directClient(kc);
      try {
        const session = await harness.gateway.waitForSession();
        const signal = new AbortController().signal;
        /** The collector's query path, up to the bytes it would write on the stream. */
        const handle = async (query: Partial<ResourceQuery>) => {
          const result = await live.handler(
            ResourceQuery.fromPartial({ queryId: randomUUID(), timeoutMs: 30_000, ...query }),
            signal,
          );
          if (result.error) throw new Error(result.error.message);
          const bytes = AgentMessage.encode({
            messageId: randomUUID(),
            payload: { $case: 'resourceQueryResult', value: result },
          }).finish();
          return bytes.length;
        };
        const ask = async (query: Partial<ResourceQuery>) => {
          const result = await harness.gateway.query(
            session.sessionId,
            ResourceQuery.fromPartial({ queryId: randomUUID(), timeoutMs: 30_000, ...query }),
          );
          if (result.error) throw new Error(result.error.message);
          return result.payload.length;
        };
        const ref = { group: '', version: 'v1', resource: 'configmaps' };
        const getQuery = {
          ref,
          verb: QueryVerb.QUERY_VERB_GET,
          namespace: NAMESPACE,
          name: 'cm-0042',
        };
        const listQuery = {
          ref,
          verb: QueryVerb.QUERY_VERB_LIST,
          view: QueryView.QUERY_VIEW_TABLE,
          namespace: NAMESPACE,
          limit: ROWS,
        };
        const getPath = `/api/v1/namespaces/${NAMESPACE}/configmaps/cm-0042`;
        const listPath = `/api/v1/namespaces/${NAMESPACE}/configmaps?limit=${String(ROWS)}&includeObject=Metadata`;

        const measure = async (
          rounds: number,
          viaCollector: () => Promise<number>,
          viaDirect: () => Promise<number>,
        ) => {
          const through: number[] = [];
          const bare: number[] = [];
          let bytes = { through: 0, bare: 0 };
          for (let i = 0; i < rounds + WARMUP; i++) {
            const order = i % 2 === 0;
            for (const which of order ? ['c', 'd'] : ['d', 'c']) {
              const started = performance.now();
              const size = which === 'c' ? await viaCollector() : await viaDirect();
              const ms = performance.now() - started;
              if (i < WARMUP) continue;
              if (which === 'c') {
                through.push(ms);
                bytes = { ...bytes, through: size };
              } else {
                bare.push(ms);
                bytes = { ...bytes, bare: size };
              }
            }
          }
          return { through, bare, bytes };
        };

        const get = await measure(
          GET_ROUNDS,
          () => handle(getQuery),
          () => direct.get(getPath, 'application/json'),
        );
        const list = await measure(
          LIST_ROUNDS,
          () => handle(listQuery),
          () => direct.get(listPath, TABLE_ACCEPT),
        );
        const getStream = await measure(
          GET_ROUNDS / 4,
          () => ask(getQuery),
          () => direct.get(getPath, 'application/json'),
        );
        const listStream = await measure(
          LIST_ROUNDS / 4,
          () => ask(listQuery),
          () => direct.get(listPath, TABLE_ACCEPT),
        );
        const line = (what: string, m: typeof get) =>
          `${what}: collector p50 ${percentile(m.through, 50).toFixed(2)} ms p99 ${percentile(m.through, 99).toFixed(2)} ms (${String(m.bytes.through)} B payload) | direct p50 ${percentile(m.bare, 50).toFixed(2)} ms p99 ${percentile(m.bare, 99).toFixed(2)} ms (${String(m.bytes.bare)} B body) | ${String(m.through.length)} rounds`;
        log(line('GET one ConfigMap', get));
        log(line(`TABLE LIST ${String(ROWS)} rows`, list));
        log(line('detail, GET sent by the demo gateway on the stream', getStream));
        log(line(`detail, TABLE LIST ${String(ROWS)} rows on the stream`, listStream));
        const getDirect99 = percentile(get.bare, 99);
        const listDirect99 = percentile(list.bare, 99);
        return [
          {
            name: 'query GET p50 through the collector',
            itemsPerSecond: percentile(get.through, 50),
            baselineName: 'direct HTTPS p50',
            baselineItemsPerSecond: percentile(get.bare, 50),
            unit: 'ms',
          },
          {
            name: 'query GET p99 through the collector',
            itemsPerSecond: percentile(get.through, 99),
            baselineName: 'direct HTTPS p99',
            baselineItemsPerSecond: getDirect99,
            targetAtMost: getDirect99 + 5,
            unit: 'ms',
          },
          {
            name: `query TABLE LIST ${String(ROWS)} rows p50 (collector)`,
            itemsPerSecond: percentile(list.through, 50),
            baselineName: 'direct HTTPS p50',
            baselineItemsPerSecond: percentile(list.bare, 50),
            unit: 'ms',
          },
          {
            name: `query TABLE LIST ${String(ROWS)} rows p99 (collector)`,
            itemsPerSecond: percentile(list.through, 99),
            baselineName: 'direct HTTPS p99',
            baselineItemsPerSecond: listDirect99,
            targetAtMost: listDirect99 * 1.3,
            unit: 'ms',
          },
        ];
      } finally {
        direct.close();
        await harness[Symbol.asyncDispose]();
        await live.service.close();
      }
    } finally {
      await stopCluster(options);
      process.off('exit', onExit);
    }
  },
};
