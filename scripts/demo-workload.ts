// The demo's sample workload on the local test cluster: a few Deployments in two namespaces on
// the kwok nodes, whose containers "write" realistic lines. kwok serves each container's log from
// a CRI-format file on this machine (a ClusterLogs object per container name); this module
// appends to those files the way a container runtime would, so the collector reads them through
// the real API server exactly as it reads any pod's log.
import { appendFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';

/** Label on everything the demo creates. */
const DEMO_LABEL = 'kubexa.io/demo';
const TICK_MS = 250;
/** A Python traceback every this many ticks (20 s). */
const TRACE_EVERY = 80;

interface SampleApp {
  readonly namespace: string;
  readonly name: string;
  readonly container: string;
  readonly replicas: number;
  /** Lines for one tick, `n` counting ticks. */
  readonly lines: (n: number) => string[];
}

const pick = <T>(items: readonly T[], n: number): T => items[n % items.length] as T;

const PATHS = ['/', '/cart', '/product/1742', '/product/88', '/checkout', '/api/search?q=shoes'];
const AGENTS = ['Mozilla/5.0 (X11; Linux x86_64)', 'curl/8.5.0', 'kube-probe/1.36'];

function accessLine(n: number): string {
  const status = n % 37 === 0 ? 502 : n % 11 === 0 ? 404 : 200;
  const at = new Date()
    .toUTCString()
    .replace(/^\w+, (\d+) (\w+) (\d+) ([\d:]+) GMT$/, '$1/$2/$3:$4 +0000');
  return `10.244.${n % 4}.${(n * 7) % 250} - - [${at}] "GET ${pick(PATHS, n)} HTTP/1.1" ${status} ${512 + ((n * 131) % 9000)} "-" "${pick(AGENTS, n)}"`;
}

function apiLine(n: number): string {
  if (n % 53 === 0) {
    return JSON.stringify({
      level: 'error',
      msg: 'checkout failed: payments upstream returned 503',
      order: `ord-${10_000 + n}`,
      attempt: 3,
    });
  }
  if (n % 17 === 0) {
    return JSON.stringify({
      level: 'warn',
      msg: 'slow query',
      table: 'orders',
      ms: 840 + (n % 400),
    });
  }
  if (n % 5 === 0)
    return JSON.stringify({ level: 'debug', msg: 'cache hit', key: `cart:${n % 97}` });
  return JSON.stringify({
    level: 'info',
    msg: 'request served',
    route: pick(['/api/cart', '/api/orders', '/api/search'], n),
    ms: 3 + (n % 40),
  });
}

export const TRACEBACK: readonly string[] = [
  'ERROR settlement batch failed',
  'Traceback (most recent call last):',
  '  File "/app/ledger/settle.py", line 88, in settle_batch',
  '    entry = self.book.post(txn)',
  '  File "/app/ledger/book.py", line 41, in post',
  '    raise InsufficientFunds(account, txn.amount)',
  'ledger.errors.InsufficientFundsError: account acct-2231 balance 12.40 < 99.00',
];

function ledgerLines(n: number): string[] {
  if (n > 0 && n % TRACE_EVERY === 0) return [...TRACEBACK];
  if (n % 4 !== 0) return [];
  const batch = 2200 + Math.floor(n / 4);
  return [
    n % 24 === 0
      ? `WARN  settle batch=${batch} retry=1 reason="lock timeout"`
      : `INFO  settled batch=${batch} entries=${(n * 3) % 40} total=${((n * 917) % 100_000) / 100}`,
  ];
}

export const SAMPLE_APPS: readonly SampleApp[] = [
  {
    namespace: 'demo-shop',
    name: 'web',
    container: 'nginx',
    replicas: 2,
    lines: (n) => (n % 2 === 0 ? [accessLine(n), accessLine(n + 1)] : [accessLine(n)]),
  },
  {
    namespace: 'demo-shop',
    name: 'api',
    container: 'api',
    replicas: 1,
    lines: (n) => [apiLine(n)],
  },
  {
    namespace: 'demo-payments',
    name: 'ledger',
    container: 'worker',
    replicas: 1,
    lines: ledgerLines,
  },
];

/** `<RFC3339Nano> stdout F <line>`: what a container runtime writes. */
function criLine(at: Date, line: string): string {
  const iso = at.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
  return `${iso} stdout F ${line}\n`;
}

export interface SampleWorkload {
  readonly namespaces: readonly string[];
  /** Stops writing; the cluster (and its objects) go away with the local cluster. */
  stop(): void;
}

/** Creates the namespaces, ClusterLogs and Deployments, and starts writing lines. */
export async function startSampleWorkload(kc: KubeConfig, dir: string): Promise<SampleWorkload> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const namespaces = [...new Set(SAMPLE_APPS.map((a) => a.namespace))];
  // The API calls go out together (each app's in order): on a loaded machine every round trip
  // to the API server is slow, and the collector waits for these pods.
  await Promise.all(
    namespaces.map((name) =>
      core.createNamespace({ body: { metadata: { name, labels: { [DEMO_LABEL]: 'true' } } } }),
    ),
  );
  const files = new Map<SampleApp, string>();
  await Promise.all(
    SAMPLE_APPS.map(async (app) => {
      const file = join(dir, `${app.namespace}-${app.name}.log`);
      await writeFile(file, '');
      files.set(app, file);
      await custom.createClusterCustomObject({
        group: 'kwok.x-k8s.io',
        version: 'v1alpha1',
        plural: 'clusterlogs',
        body: {
          apiVersion: 'kwok.x-k8s.io/v1alpha1',
          kind: 'ClusterLogs',
          metadata: {
            name: `demo-${app.namespace}-${app.name}`,
            labels: { [DEMO_LABEL]: 'true' },
          },
          spec: {
            selector: { matchNamespaces: [app.namespace] },
            logs: [{ containers: [app.container], logsFile: file, follow: true }],
          },
        },
      });
      const labels = { app: app.name, [DEMO_LABEL]: 'true' };
      await apps.createNamespacedDeployment({
        namespace: app.namespace,
        body: {
          metadata: { name: app.name, labels },
          spec: {
            replicas: app.replicas,
            selector: { matchLabels: { app: app.name } },
            template: {
              metadata: { labels },
              spec: {
                containers: [
                  { name: app.container, image: `registry.invalid/demo/${app.name}:1.0` },
                ],
                tolerations: [
                  { key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' },
                ],
              },
            },
          },
        },
      });
    }),
  );
  let tick = 0;
  let writing = Promise.resolve();
  const timer = setInterval(() => {
    const n = tick++;
    // One write at a time: lines of a file stay in order.
    writing = writing
      .then(async () => {
        for (const app of SAMPLE_APPS) {
          const lines = app.lines(n);
          if (lines.length === 0) continue;
          const at = Date.now();
          // A stack trace's lines are written together, a millisecond apart, as a runtime would.
          await appendFile(
            files.get(app) ?? '',
            lines.map((l, i) => criLine(new Date(at + i), l)).join(''),
          );
        }
      })
      .catch(() => undefined);
  }, TICK_MS);
  return {
    namespaces,
    stop() {
      clearInterval(timer);
    },
  };
}
