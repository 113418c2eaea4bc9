// HTTP routes of the Consoles view: the targets the collector reported (pods and containers seen
// in its logs), open, poll output, send input, and the audit list. Registered with one line in
// web-ui.ts. The page polls; a keystroke is one POST (the demo's latency is not the product's:
// the benchmark measures the agent's path, bench/cases/console-round-trip.ts).
import type { FastifyInstance } from 'fastify';
import type { DemoGateway } from './demo-gateway.js';

/** Log lines scanned for targets (newest first). */
const TARGET_SCAN_LINES = 2000;
const MAX_INPUT_BYTES = 16 * 1024;

export interface ConsoleTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly containers: string[];
  /** The node the pod's log lines came from ('' when unknown). */
  readonly node: string;
  /** Why no console can open there (a simulated node); absent when one can. */
  readonly unavailable?: string;
}

interface OpenBody {
  readonly namespace?: string;
  readonly pod?: string;
  readonly container?: string;
  readonly cols?: number;
  readonly rows?: number;
}

interface InputBody {
  readonly data?: string;
  readonly resize?: { readonly cols: number; readonly rows: number };
  readonly close?: boolean;
}

export function registerConsoleRoutes(app: FastifyInstance, gateway: DemoGateway): void {
  app.get('/api/consoles/targets', (): ConsoleTarget[] => {
    const page = gateway.store.logs.query(
      { namespace: '', workload: '', pod: '', container: '', level: '', text: '' },
      { limit: TARGET_SCAN_LINES },
    );
    const byPod = new Map<string, ConsoleTarget>();
    for (const line of page.lines) {
      const key = `${line.namespace}/${line.pod}`;
      const unavailable = gateway.consoles.unavailableOn(line.node);
      const target = byPod.get(key) ?? {
        namespace: line.namespace,
        pod: line.pod,
        containers: [],
        node: line.node,
        ...(unavailable === undefined ? {} : { unavailable }),
      };
      if (!target.containers.includes(line.container)) target.containers.push(line.container);
      byPod.set(key, target);
    }
    return [...byPod.values()].sort((a, b) =>
      `${a.namespace}/${a.pod}`.localeCompare(`${b.namespace}/${b.pod}`),
    );
  });

  app.get('/api/consoles', () => ({
    consoles: gateway.consoles.list().map((c) => c.view()),
    audits: gateway.consoles.audits.slice(-100).reverse(),
    // Agents that advertised pod consoles (an agent without an executor does not).
    available: gateway.consoleAgents(),
  }));

  app.post<{ Body: OpenBody | null }>('/api/consoles', (request, reply) => {
    const body = request.body ?? {};
    const agent = gateway.consoleAgents()[0];
    if (agent === undefined) {
      return reply
        .code(409)
        .send({ error: 'no connected agent offers pod consoles (exec.pod.enabled and rbac.exec)' });
    }
    if (!body.namespace || !body.pod) {
      return reply.code(400).send({ error: 'namespace and pod are required' });
    }
    const console = gateway.consoles.open(agent, {
      namespace: body.namespace,
      pod: body.pod,
      container: body.container ?? '',
      tty: true,
      cols: body.cols ?? 80,
      rows: body.rows ?? 24,
    });
    return { id: console.id };
  });

  app.get<{ Params: { id: string }; Querystring: { after?: string } }>(
    '/api/consoles/:id/output',
    (request, reply) => {
      const console = gateway.consoles.get(request.params.id);
      if (console === undefined) return reply.code(404).send({ error: 'no such console' });
      const after = Number(request.query.after ?? 0);
      return {
        view: console.view(),
        chunks: console
          .outputAfter(Number.isFinite(after) ? after : 0)
          .map((chunk) => ({ seq: chunk.seq, data: chunk.data.toString('base64') })),
      };
    },
  );

  app.post<{ Params: { id: string }; Body: InputBody | null }>(
    '/api/consoles/:id/input',
    (request, reply) => {
      const console = gateway.consoles.get(request.params.id);
      if (console === undefined) return reply.code(404).send({ error: 'no such console' });
      const body = request.body ?? {};
      if (body.data !== undefined && body.data.length <= MAX_INPUT_BYTES) console.stdin(body.data);
      if (body.resize !== undefined) console.resize(body.resize.cols, body.resize.rows);
      if (body.close === true) console.close();
      return { sent: true };
    },
  );
}
