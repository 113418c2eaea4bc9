// The Query view's endpoints: the newest capability catalog an agent published, and a live
// query sent to an agent's session on the stream (the way the platform would) with its answer.
import type { FastifyInstance } from 'fastify';
import {
  ExecutorState,
  QueryErrorCode,
  QueryVerb,
  QueryView,
  ResourceQuery,
  type ResourceCatalog,
  type ResourceQueryResult,
} from '../proto/index.js';
import type { DemoGateway } from './demo-gateway.js';

/** What the view gets for a catalog (proto enums as names). */
export interface CatalogView {
  readonly sessionId: string;
  readonly fingerprint: string;
  readonly collectedAt: number;
  readonly failedGroups: readonly string[];
  readonly entries: ResourceCatalog['entries'];
  readonly executor: {
    readonly state: string;
    readonly version: string;
    readonly error: string;
    readonly capabilities: NonNullable<ResourceCatalog['executor']>['capabilities'];
  };
}

export interface QueryRequestBody {
  readonly sessionId?: string;
  readonly group?: string;
  readonly version?: string;
  readonly resource?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly labelSelector?: string;
  readonly view?: 'table' | 'full';
  readonly limit?: number;
  readonly continueToken?: string;
}

export interface QueryAnswer {
  readonly error?: { readonly code: string; readonly message: string };
  /** The payload as the agent sent it (JSON text; numbers untouched). */
  readonly payload: string;
  readonly continueToken: string;
  readonly remaining: number;
  readonly truncated: boolean;
  readonly bytes: number;
  readonly ms: number;
}

const ERROR_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(QueryErrorCode)
    .filter(([, value]) => typeof value === 'number')
    .map(([key, value]) => [value, key.replace('QUERY_ERROR_', '')]),
);

const STATE_NAMES: Record<number, string> = {
  [ExecutorState.EXECUTOR_STATE_NOT_DEPLOYED]: 'not deployed',
  [ExecutorState.EXECUTOR_STATE_UNREACHABLE]: 'unreachable',
  [ExecutorState.EXECUTOR_STATE_ANSWERED]: 'answered',
};

const QUERY_TIMEOUT_MS = 15_000;

function catalogView(sessionId: string, catalog: ResourceCatalog): CatalogView {
  const executor = catalog.executor;
  return {
    sessionId,
    fingerprint: catalog.fingerprint,
    collectedAt: Number(catalog.collectedAt),
    failedGroups: catalog.failedGroups,
    entries: catalog.entries,
    executor: {
      state: STATE_NAMES[executor?.state ?? 0] ?? 'unknown',
      version: executor?.executorVersion ?? '',
      error: executor?.error ?? '',
      capabilities: executor?.capabilities ?? [],
    },
  };
}

/** A form's fields as the ResourceQuery the platform would send: a name makes it a GET. */
function toResourceQuery(body: QueryRequestBody): ResourceQuery {
  const text = (value: string | undefined) => value?.trim() ?? '';
  const name = text(body.name);
  return ResourceQuery.fromPartial({
    queryId: `demo-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
    ref: { group: text(body.group), version: text(body.version), resource: text(body.resource) },
    verb: name === '' ? QueryVerb.QUERY_VERB_LIST : QueryVerb.QUERY_VERB_GET,
    view: body.view === 'full' ? QueryView.QUERY_VIEW_FULL : QueryView.QUERY_VIEW_TABLE,
    namespace: text(body.namespace),
    name,
    labelSelector: text(body.labelSelector),
    limit: body.limit ?? 50,
    continueToken: body.continueToken ?? '',
    timeoutMs: 10_000,
  });
}

function toAnswer(result: ResourceQueryResult, ms: number): QueryAnswer {
  return {
    ...(result.error === undefined
      ? {}
      : {
          error: {
            code: ERROR_NAMES[result.error.code] ?? String(result.error.code),
            message: result.error.message,
          },
        }),
    payload: Buffer.from(result.payload).toString('utf8'),
    continueToken: result.continueToken,
    remaining: result.remaining,
    truncated: result.truncated,
    bytes: result.payload.length,
    ms,
  };
}

export function registerQueryRoutes(app: FastifyInstance, gateway: DemoGateway): void {
  const catalogs = new Map<string, ResourceCatalog>();
  gateway.events.on('message', (message, _isNew, session) => {
    if (message.payload?.$case === 'catalog')
      catalogs.set(session.sessionId, message.payload.value);
  });
  const sessionFor = (wanted: string | undefined): string | undefined => {
    const connected = gateway.sessions().filter((s) => s.state === 'connected');
    if (wanted !== undefined && wanted !== '') return wanted;
    return (connected.find((s) => catalogs.has(s.sessionId)) ?? connected[0])?.sessionId;
  };

  app.get<{ Querystring: { session?: string } }>('/api/query/catalog', (request, reply) => {
    const sessionId = sessionFor(request.query.session);
    const catalog = sessionId === undefined ? undefined : catalogs.get(sessionId);
    if (sessionId === undefined || catalog === undefined) {
      return reply.code(404).send({ error: 'no agent has published a catalog yet' });
    }
    return catalogView(sessionId, catalog);
  });

  app.post<{ Body: QueryRequestBody | null }>('/api/query', async (request, reply) => {
    const body = request.body ?? {};
    const sessionId = sessionFor(body.sessionId);
    if (sessionId === undefined) return reply.code(404).send({ error: 'no agent is connected' });
    const query = toResourceQuery(body);
    const started = Date.now();
    try {
      const result = await Promise.race([
        gateway.query(sessionId, query),
        new Promise<never>((_, reject) =>
          setTimeout(() => {
            reject(new Error(`no answer within ${QUERY_TIMEOUT_MS} ms`));
          }, QUERY_TIMEOUT_MS).unref(),
        ),
      ]);
      return toAnswer(result, Date.now() - started);
    } catch (err: unknown) {
      return reply.code(502).send({ error: err instanceof Error ? err.message : String(err) });
    }
  });
}
