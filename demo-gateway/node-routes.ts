// HTTP routes of the Nodes view: the cluster's nodes with their conditions, cordon state and pods,
// read through the agent (two live queries on the stream, as the platform would ask; the demo
// gateway holds no Kubernetes credentials), and node jobs: cordon, uncordon and drain sent
// signed to the agent (node-job-hub.ts), their per-pod progress, cancel, result and audit
// records. Registered with one line in web-ui.ts.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import {
  QueryErrorCode,
  QueryVerb,
  QueryView,
  ResourceQuery,
  type ResourceQueryResult,
} from '../proto/index.js';
import type { DemoGateway } from './demo-gateway.js';
import type { NodeJobSpec } from './node-job-hub.js';

const QUERY_TIMEOUT_MS = 15_000;
const MAX_PODS = 500;

export interface NodePodView {
  readonly namespace: string;
  readonly name: string;
  readonly phase: string;
  /** The kind of its controller ("DaemonSet", "ReplicaSet"), '' for a bare pod. */
  readonly owner: string;
  readonly terminating: boolean;
}

export interface NodeView {
  readonly name: string;
  readonly unschedulable: boolean;
  readonly conditions: readonly { type: string; status: string; reason: string }[];
  readonly taints: readonly string[];
  readonly pods: readonly NodePodView[];
}

export interface NodesAnswer {
  /** The agent session the nodes came from and jobs go to; '' when none is connected. */
  readonly sessionId: string;
  /** The agent advertised node jobs (its executor has mutate.node on). */
  readonly nodeJobs: boolean;
  readonly nodes: readonly NodeView[];
  /** Why the list is empty, when it is. */
  readonly error?: string;
}

interface JobBody {
  readonly node?: string;
  readonly verb?: string;
  readonly dryRun?: boolean;
  readonly force?: boolean;
  readonly deleteEmptydirData?: boolean;
  readonly gracePeriodSeconds?: number | null;
  readonly timeoutSeconds?: number;
}

const VERBS = new Set(['cordon', 'uncordon', 'drain']);

type Json = Record<string, unknown>;
const obj = (value: unknown): Json =>
  typeof value === 'object' && value !== null ? (value as Json) : {};
const str = (value: unknown): string => (typeof value === 'string' ? value : '');
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

function listQuery(resource: string, limit: number): ResourceQuery {
  return ResourceQuery.fromPartial({
    queryId: `nodes-${randomUUID()}`,
    ref: { group: '', version: 'v1', resource },
    verb: QueryVerb.QUERY_VERB_LIST,
    view: QueryView.QUERY_VIEW_FULL,
    limit,
    timeoutMs: 10_000,
  });
}

function failure(result: ResourceQueryResult): string | undefined {
  if (result.error === undefined) return undefined;
  const code = result.error.code;
  const name = Object.entries(QueryErrorCode).find(([, value]) => value === code)?.[0];
  return `${(name ?? String(code)).replace(/^QUERY_ERROR_/, '')}: ${result.error.message}`;
}

type PodOnNode = NodePodView & { readonly node: string };

function podView(item: unknown): PodOnNode {
  const pod = obj(item);
  const meta = obj(pod['metadata']);
  const controller = list(meta['ownerReferences'])
    .map(obj)
    .find((o) => o['controller'] === true);
  return {
    node: str(obj(pod['spec'])['nodeName']),
    namespace: str(meta['namespace']),
    name: str(meta['name']),
    phase: str(obj(pod['status'])['phase']),
    owner: str(controller?.['kind']),
    terminating: meta['deletionTimestamp'] !== undefined,
  };
}

function nodeView(item: unknown, pods: readonly PodOnNode[]): NodeView {
  const node = obj(item);
  const name = str(obj(node['metadata'])['name']);
  const spec = obj(node['spec']);
  return {
    name,
    unschedulable: spec['unschedulable'] === true,
    conditions: list(obj(node['status'])['conditions'])
      .map(obj)
      .map((c) => ({ type: str(c['type']), status: str(c['status']), reason: str(c['reason']) })),
    taints: list(spec['taints'])
      .map(obj)
      .map((t) => `${str(t['key'])}${t['value'] ? `=${str(t['value'])}` : ''}:${str(t['effect'])}`),
    pods: pods
      .filter((p) => p.node === name)
      .map((p) => ({
        namespace: p.namespace,
        name: p.name,
        phase: p.phase,
        owner: p.owner,
        terminating: p.terminating,
      }))
      .sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`)),
  };
}

function withTimeout<T>(work: Promise<T>): Promise<T> {
  return Promise.race([
    work,
    new Promise<never>((_, reject) =>
      setTimeout(() => {
        reject(new Error(`no answer within ${String(QUERY_TIMEOUT_MS)} ms`));
      }, QUERY_TIMEOUT_MS).unref(),
    ),
  ]);
}

/** The nodes and their pods, asked of the agent on its stream. */
async function readNodes(gateway: DemoGateway, sessionId: string): Promise<NodesAnswer> {
  const nodeJobs = gateway.nodeJobAgents().includes(sessionId);
  const [nodes, pods] = await Promise.all([
    withTimeout(gateway.query(sessionId, listQuery('nodes', 200))),
    withTimeout(gateway.query(sessionId, listQuery('pods', MAX_PODS))),
  ]);
  const error = failure(nodes) ?? failure(pods);
  if (error !== undefined) return { sessionId, nodeJobs, nodes: [], error };
  const podViews = list(JSON.parse(Buffer.from(pods.payload).toString('utf8'))).map(podView);
  return {
    sessionId,
    nodeJobs,
    nodes: list(JSON.parse(Buffer.from(nodes.payload).toString('utf8')))
      .map((item) => nodeView(item, podViews))
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
}

/** The request body as a job spec, or what is wrong with it. */
function jobSpec(body: JobBody): NodeJobSpec | string {
  if (body.node === undefined || body.node === '') return 'node is required';
  if (body.verb === undefined || !VERBS.has(body.verb))
    return 'verb must be cordon, uncordon or drain';
  const grace = body.gracePeriodSeconds;
  return {
    node: body.node,
    verb: body.verb as NodeJobSpec['verb'],
    dryRun: body.dryRun === true,
    force: body.force === true,
    deleteEmptydirData: body.deleteEmptydirData === true,
    ...(typeof grace === 'number' && Number.isInteger(grace) && grace >= 0
      ? { gracePeriodSeconds: grace }
      : {}),
    timeoutSeconds:
      typeof body.timeoutSeconds === 'number' && body.timeoutSeconds > 0
        ? Math.floor(body.timeoutSeconds)
        : 0,
  };
}

export function registerNodeRoutes(app: FastifyInstance, gateway: DemoGateway): void {
  /** The agent to ask: one that advertised node jobs, else any connected one (to read). */
  const agentSession = (): string | undefined =>
    gateway.nodeJobAgents()[0] ??
    gateway.sessions().find((s) => s.state === 'connected')?.sessionId;

  app.get('/api/nodes', async (): Promise<NodesAnswer> => {
    const sessionId = agentSession();
    if (sessionId === undefined) {
      return { sessionId: '', nodeJobs: false, nodes: [], error: 'no agent is connected' };
    }
    try {
      return await readNodes(gateway, sessionId);
    } catch (err: unknown) {
      return {
        sessionId,
        nodeJobs: false,
        nodes: [],
        error: err instanceof Error ? err.message : String(err),
      };
    }
  });

  app.get('/api/nodes/jobs', () => ({
    jobs: gateway.nodeJobs.list().slice(0, 20),
    audits: gateway.nodeJobs.audits.slice(-50).reverse(),
  }));

  app.get<{ Params: { id: string } }>('/api/nodes/jobs/:id', (request, reply) => {
    const job = gateway.nodeJobs.get(request.params.id);
    if (job === undefined) return reply.code(404).send({ error: 'no such job' });
    return job;
  });

  app.post<{ Body: JobBody | null }>('/api/nodes/jobs', (request, reply) => {
    const agent = gateway.nodeJobAgents()[0];
    if (agent === undefined) {
      return reply.code(409).send({
        error:
          'no connected agent offers node jobs (the executor needs mutate.node.enabled; the chart rbac.nodeOps)',
      });
    }
    const spec = jobSpec(request.body ?? {});
    if (typeof spec === 'string') return reply.code(400).send({ error: spec });
    const job = gateway.nodeJobs.run(agent, spec);
    return { id: job.id };
  });

  app.post<{ Params: { id: string } }>('/api/nodes/jobs/:id/cancel', (request, reply) => {
    const sent = gateway.nodeJobs.cancel(request.params.id);
    if (!sent) return reply.code(404).send({ error: 'no such job, or its agent is gone' });
    return { sent };
  });
}
