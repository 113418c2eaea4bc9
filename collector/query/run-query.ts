// Answers one live query (ResourceQuery -> ResourceQueryResult): the policy first (a denial
// never reaches the API server), then the concurrency gate, then one read of the API server in
// the requested view, sanitized and capped. Always answers: every failure is a QueryError with
// a code and the API server's own message where there is one.
import type { Logger } from 'pino';
import {
  QueryErrorCode,
  QueryVerb,
  QueryView,
  type ResourceQuery,
  type ResourceQueryResult,
} from '../../proto/index.js';
import { getErrorMessage } from '../../shared/errors.js';
import type { QueryHandler } from '../gateway/types.js';
import { ACCEPT_METADATA, ACCEPT_METADATA_LIST } from '../watch/kube-http.js';
import { BodyTooLargeError, type KubeRest } from './kube-rest.js';
import { parseLossless, stringifyLossless } from './lossless-json.js';
import {
  andSelectors,
  namesAllow,
  refKey,
  type AllowedDecision,
  type GroupVersionResource,
  type QueryPolicy,
  type QueryVerbName,
} from './policy.js';
import { QueryGate } from './query-gate.js';
import type { QueryMetrics, QueryOutcome } from './query-metrics.js';
import { sanitizeObject } from './sanitize.js';
import {
  scanTable,
  TableShapeError,
  type ScannedTable,
  type TableScanOptions,
} from './table-scan.js';

/** The payload cap of one answer (the gateway's message limit leaves room for the rest). */
export const MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;
/** What a FULL read may take from the API server before sanitizing shrinks it. */
export const MAX_FULL_BODY_BYTES = 32 * 1024 * 1024;
export const DEFAULT_TIMEOUT_MS = 10_000;
export const MIN_TIMEOUT_MS = 1000;
export const MAX_TIMEOUT_MS = 30_000;
export const DEFAULT_PAGE_SIZE = 500;
export const MAX_PAGE_SIZE = 5000;
export const MAX_RUNNING_QUERIES = 4;
export const MAX_WAITING_QUERIES = 8;

const TABLE_ACCEPT = 'application/json;as=Table;v=v1;g=meta.k8s.io';
const INT32_MAX = 2_147_483_647;

export interface QueryRunnerDeps {
  readonly rest: KubeRest;
  readonly policy: QueryPolicy;
  readonly logger: Logger;
  readonly metrics?: QueryMetrics;
  readonly now?: () => number;
  /**
   * security.profile strict: Secrets are read as PartialObjectMetadata (GET and FULL LIST), so
   * their values never reach this process; the TABLE view already asks for metadata only.
   */
  readonly secretsMetadataOnly?: boolean;
}

/** A refusal or failure on its way to becoming a QueryError. */
class QueryFailure extends Error {
  readonly code: QueryErrorCode;
  constructor(code: QueryErrorCode, message: string) {
    super(message);
    this.name = 'QueryFailure';
    this.code = code;
  }
}

interface Answer {
  readonly payload: Buffer;
  readonly continueToken: string;
  readonly remaining: number;
  readonly truncated: boolean;
}

type JsonObject = Record<string, unknown>;
const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Clamps timeout_ms: 0 -> 10 s, under 1 s -> 1 s, over 30 s -> 30 s. */
export function clampTimeoutMs(requested: number): number {
  if (requested <= 0) return DEFAULT_TIMEOUT_MS;
  return Math.min(MAX_TIMEOUT_MS, Math.max(MIN_TIMEOUT_MS, requested));
}

/** Clamps limit: 0 (or less) -> 500, over 5000 -> 5000. */
export function clampPageSize(requested: number): number {
  if (requested <= 0) return DEFAULT_PAGE_SIZE;
  return Math.min(MAX_PAGE_SIZE, requested);
}

const OUTCOMES: Partial<Record<QueryErrorCode, QueryOutcome>> = {
  [QueryErrorCode.QUERY_ERROR_UNSPECIFIED]: 'internal',
  [QueryErrorCode.QUERY_ERROR_POLICY_DENIED]: 'policy_denied',
  [QueryErrorCode.QUERY_ERROR_RBAC_DENIED]: 'rbac_denied',
  [QueryErrorCode.QUERY_ERROR_NOT_FOUND]: 'not_found',
  [QueryErrorCode.QUERY_ERROR_TIMEOUT]: 'timeout',
  [QueryErrorCode.QUERY_ERROR_TOO_LARGE]: 'too_large',
  [QueryErrorCode.QUERY_ERROR_RESOURCE_EXHAUSTED]: 'resource_exhausted',
  [QueryErrorCode.QUERY_ERROR_INTERNAL]: 'internal',
  [QueryErrorCode.QUERY_ERROR_EXPIRED]: 'expired',
};

/** The API server's path of a collection or one object. */
export function resourcePath(
  ref: GroupVersionResource,
  namespace: string,
  name: string | undefined,
): string {
  const base = ref.group === '' ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
  const scope = namespace === '' ? '' : `/namespaces/${encodeURIComponent(namespace)}`;
  const object = name === undefined ? '' : `/${encodeURIComponent(name)}`;
  return `${base}${scope}/${ref.resource}${object}`;
}

/** HTTP statuses and Status reasons, to the codes a platform can act on; the rest is INTERNAL. */
const API_ERRORS: readonly {
  code: QueryErrorCode;
  statuses: readonly number[];
  reasons: readonly string[];
}[] = [
  {
    code: QueryErrorCode.QUERY_ERROR_RBAC_DENIED,
    statuses: [401, 403],
    reasons: ['Forbidden', 'Unauthorized'],
  },
  { code: QueryErrorCode.QUERY_ERROR_EXPIRED, statuses: [410], reasons: ['Expired', 'Gone'] },
  { code: QueryErrorCode.QUERY_ERROR_NOT_FOUND, statuses: [404], reasons: ['NotFound'] },
  {
    code: QueryErrorCode.QUERY_ERROR_TIMEOUT,
    statuses: [504],
    reasons: ['Timeout', 'ServerTimeout'],
  },
  {
    code: QueryErrorCode.QUERY_ERROR_TOO_LARGE,
    statuses: [413],
    reasons: ['RequestEntityTooLarge'],
  },
  {
    code: QueryErrorCode.QUERY_ERROR_RESOURCE_EXHAUSTED,
    statuses: [429],
    reasons: ['TooManyRequests'],
  },
];

/** The Status object's message and reason, or the body's text. */
function statusOf(status: number, body: Buffer): { message: string; reason: string } {
  let message = '';
  let reason = '';
  try {
    const parsed = JSON.parse(body.toString('utf8')) as unknown;
    if (isObject(parsed)) {
      message = typeof parsed['message'] === 'string' ? parsed['message'] : '';
      reason = typeof parsed['reason'] === 'string' ? parsed['reason'] : '';
    }
  } catch {
    // Not a Status: the text itself is the best message there is.
  }
  if (message === '') message = body.toString('utf8', 0, Math.min(body.length, 512)).trim();
  if (message === '') message = `the API server answered HTTP ${status}`;
  return { message, reason };
}

/** Maps a non-200 answer to a QueryError code, with the Status message the API server wrote. */
export function apiFailure(status: number, body: Buffer): QueryFailure {
  const { message, reason } = statusOf(status, body);
  const match = API_ERRORS.find(
    (entry) => entry.statuses.includes(status) || entry.reasons.includes(reason),
  );
  return new QueryFailure(match?.code ?? QueryErrorCode.QUERY_ERROR_INTERNAL, message);
}

function result(queryId: string, answer: Answer): ResourceQueryResult {
  return { queryId, ...answer };
}

function failed(queryId: string, code: QueryErrorCode, message: string): ResourceQueryResult {
  return {
    queryId,
    error: { code, message },
    payload: Buffer.alloc(0),
    continueToken: '',
    remaining: 0,
    truncated: false,
  };
}

function listMeta(list: JsonObject): { continueToken: string; remaining: number } {
  const metadata = isObject(list['metadata']) ? list['metadata'] : {};
  const token = metadata['continue'];
  const count = Number(metadata['remainingItemCount'] ?? 0);
  return {
    continueToken: typeof token === 'string' ? token : '',
    remaining: Number.isFinite(count) && count > 0 ? Math.min(INT32_MAX, Math.floor(count)) : 0,
  };
}

function nameOf(object: unknown): string | undefined {
  if (!isObject(object) || !isObject(object['metadata'])) return undefined;
  const name = object['metadata']['name'];
  return typeof name === 'string' ? name : undefined;
}

/**
 * The page's items that pass the names patterns, completed and sanitized, as JSON texts, up to
 * the payload cap. `consumed` counts the page's items dealt with (sent or filtered out).
 */
function encodeItems(
  items: readonly unknown[],
  plan: Plan,
  defaults: { apiVersion: string; kind: string },
): { parts: string[]; consumed: number; truncated: boolean } {
  const parts: string[] = [];
  let bytes = 2;
  let consumed = 0;
  for (const item of items) {
    const name = nameOf(item);
    if (name === undefined || !isObject(item) || !namesAllow(plan.decision.names, name)) {
      consumed++;
      continue;
    }
    const whole: JsonObject = plan.metadataOnly
      ? { ...item, ...SECRET_TYPE }
      : {
          apiVersion: item['apiVersion'] ?? defaults.apiVersion,
          kind: item['kind'] ?? defaults.kind,
          ...item,
        };
    sanitizeObject(whole, {
      resource: plan.ref.resource,
      redactSecrets: plan.decision.redactSecrets,
    });
    const text = stringifyLossless(whole);
    const size = Buffer.byteLength(text, 'utf8') + (parts.length > 0 ? 1 : 0);
    if (bytes + size > MAX_PAYLOAD_BYTES) return { parts, consumed, truncated: true };
    bytes += size;
    parts.push(text);
    consumed++;
  }
  return { parts, consumed, truncated: false };
}

interface Plan {
  readonly query: ResourceQuery;
  readonly ref: GroupVersionResource;
  readonly decision: AllowedDecision;
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
  /** Read as PartialObjectMetadata: a Secret under security.profile strict. */
  readonly metadataOnly: boolean;
}

/** What a metadata-only read stands for: the platform still sees Secrets, without a body. */
const SECRET_TYPE = { apiVersion: 'v1', kind: 'Secret' } as const;

/** The core Secret, the one resource read as metadata only under security.profile strict. */
const isSecretRef = (ref: GroupVersionResource): boolean =>
  ref.group === '' && ref.resource === 'secrets';

/**
 * A metadata-only answer must be one: an API server (or a proxy in front of it) that ignored
 * the Accept header sent the object's body, and it is not passed on.
 */
function expectMetadataKind(body: unknown, kind: string): void {
  if (isObject(body) && body['kind'] === kind) return;
  const got = isObject(body) && typeof body['kind'] === 'string' ? body['kind'] : 'no kind';
  throw new QueryFailure(
    QueryErrorCode.QUERY_ERROR_INTERNAL,
    `security.profile strict reads secrets as metadata only, and the API server answered with ${got} instead of ${kind}`,
  );
}

/**
 * A TABLE answer filtered by the names patterns and sanitized: on its bytes (table-scan.ts), or,
 * when the answer is not in the shape that walker handles, parsed whole. Undefined when the
 * answer is not a Table.
 */
export function tableAnswer(
  plan: Pick<Plan, 'ref' | 'decision'>,
  body: Buffer,
): { payload: Buffer; page: { continueToken: string; remaining: number } } | undefined {
  const options = { names: plan.decision.names, resource: plan.ref.resource };
  let scanned: ScannedTable | undefined;
  try {
    scanned = scanTable(body, options);
  } catch (err: unknown) {
    if (!(err instanceof TableShapeError)) throw err;
  }
  if (scanned !== undefined) {
    if (!scanned.isTable) return undefined;
    const metadata = scanned.metadata;
    return { payload: scanned.payload, page: listMeta({ metadata }) };
  }
  return parsedTableAnswer(body, options);
}

/** The same, by parsing the answer whole: for what the byte walker refuses. */
export function parsedTableAnswer(
  body: Buffer,
  options: TableScanOptions,
): { payload: Buffer; page: { continueToken: string; remaining: number } } | undefined {
  const table = parseLossless(body.toString('utf8'));
  if (!isObject(table) || table['kind'] !== 'Table') return undefined;
  const rows = Array.isArray(table['rows']) ? (table['rows'] as unknown[]) : [];
  const names = options.names;
  table['rows'] = rows.filter((row) => {
    if (!isObject(row)) return false;
    if (!('object' in row) || row['object'] === null || row['object'] === undefined) {
      return names.length === 0;
    }
    const object = row['object'];
    const name = nameOf(object);
    if (name === undefined || !namesAllow(names, name)) return false;
    // The TABLE view never carries Secret values, whatever redaction says (the seed's promise).
    sanitizeObject(object, { resource: options.resource, redactSecrets: true });
    return true;
  });
  return { payload: Buffer.from(stringifyLossless(table), 'utf8'), page: listMeta(table) };
}

/** The handler the gateway session calls; each query runs on its own, never blocking others. */
export function createQueryRunner(deps: QueryRunnerDeps): QueryHandler {
  const gate = new QueryGate(MAX_RUNNING_QUERIES, MAX_WAITING_QUERIES);
  const now = deps.now ?? Date.now;
  const logger = deps.logger.child({ component: 'query' });

  const read = async (plan: Plan, path: string, accept: string | undefined, maxBytes: number) => {
    const response = await deps.rest.request({
      method: 'GET',
      path,
      ...(accept === undefined ? {} : { accept }),
      maxBodyBytes: maxBytes,
      signal: plan.signal,
    });
    if (response.status !== 200) throw apiFailure(response.status, response.body);
    return parseLossless(response.body.toString('utf8'));
  };

  const listPath = (plan: Plan, extra: Record<string, string>): string => {
    const { query, decision } = plan;
    const params = new URLSearchParams();
    params.set('limit', String(clampPageSize(query.limit)));
    const labels = andSelectors(decision.labelSelector, query.labelSelector);
    const fields = andSelectors(decision.fieldSelector, query.fieldSelector);
    if (labels !== '') params.set('labelSelector', labels);
    if (fields !== '') params.set('fieldSelector', fields);
    if (query.continueToken !== '') params.set('continue', query.continueToken);
    for (const [key, value] of Object.entries(extra)) params.set(key, value);
    return `${resourcePath(plan.ref, query.namespace, undefined)}?${params.toString()}`;
  };

  const getFull = async (plan: Plan): Promise<Answer> => {
    const object = await read(
      plan,
      resourcePath(plan.ref, plan.query.namespace, plan.query.name),
      plan.metadataOnly ? ACCEPT_METADATA : undefined,
      MAX_FULL_BODY_BYTES,
    );
    if (plan.metadataOnly) {
      expectMetadataKind(object, 'PartialObjectMetadata');
      Object.assign(object as JsonObject, SECRET_TYPE);
    }
    sanitizeObject(object, {
      resource: plan.ref.resource,
      redactSecrets: plan.decision.redactSecrets,
    });
    const payload = Buffer.from(stringifyLossless(object), 'utf8');
    if (payload.length > MAX_PAYLOAD_BYTES) {
      throw new QueryFailure(
        QueryErrorCode.QUERY_ERROR_TOO_LARGE,
        `object is ${payload.length} bytes, over the ${MAX_PAYLOAD_BYTES} byte limit`,
      );
    }
    return { payload, continueToken: '', remaining: 0, truncated: false };
  };

  const listFull = async (plan: Plan): Promise<Answer> => {
    const accept = plan.metadataOnly ? ACCEPT_METADATA_LIST : undefined;
    const list = await read(plan, listPath(plan, {}), accept, MAX_FULL_BODY_BYTES);
    if (plan.metadataOnly) expectMetadataKind(list, 'PartialObjectMetadataList');
    if (!isObject(list) || !Array.isArray(list['items'])) {
      throw new QueryFailure(QueryErrorCode.QUERY_ERROR_INTERNAL, 'the API server sent no list');
    }
    // List items come without apiVersion and kind; the Go agent's unstructured list fills them
    // from the list, so the platform sees whole objects.
    const listKind = typeof list['kind'] === 'string' ? list['kind'] : '';
    const kind = listKind.endsWith('List') ? listKind.slice(0, -4) : '';
    const apiVersion = typeof list['apiVersion'] === 'string' ? list['apiVersion'] : '';
    const { parts, consumed, truncated } = encodeItems(list['items'] as unknown[], plan, {
      apiVersion,
      kind,
    });
    let page = listMeta(list);
    if (truncated) {
      if (consumed === 0) {
        throw new QueryFailure(
          QueryErrorCode.QUERY_ERROR_TOO_LARGE,
          `the first object of this page is over the ${MAX_PAYLOAD_BYTES} byte limit`,
        );
      }
      page = await resumeAfter(plan, list, consumed);
    }
    return {
      payload: Buffer.from(`[${parts.join(',')}]`, 'utf8'),
      continueToken: page.continueToken,
      remaining: page.remaining,
      truncated,
    };
  };

  /**
   * The continue token that resumes right after the `consumed` items sent, so paging on from a
   * truncated page skips nothing (the list's own token would resume after the whole page). The
   * same page is asked again with limit=consumed, pinned to the first answer's snapshot: a
   * continue token carries it, a first page names its resourceVersion exactly.
   */
  const resumeAfter = async (plan: Plan, list: JsonObject, consumed: number) => {
    const metadata = isObject(list['metadata']) ? list['metadata'] : {};
    const version =
      typeof metadata['resourceVersion'] === 'string' ? metadata['resourceVersion'] : '';
    const pin: Record<string, string> =
      plan.query.continueToken === '' && version !== ''
        ? { resourceVersion: version, resourceVersionMatch: 'Exact' }
        : {};
    const again = await read(
      plan,
      listPath(plan, { ...pin, limit: String(consumed) }),
      plan.metadataOnly ? ACCEPT_METADATA_LIST : undefined,
      MAX_FULL_BODY_BYTES,
    );
    return isObject(again) ? listMeta(again) : { continueToken: '', remaining: 0 };
  };

  const listTable = async (plan: Plan): Promise<Answer> => {
    const response = await deps.rest.request({
      method: 'GET',
      path: listPath(plan, { includeObject: 'Metadata' }),
      accept: TABLE_ACCEPT,
      maxBodyBytes: MAX_PAYLOAD_BYTES,
      signal: plan.signal,
    });
    if (response.status !== 200) throw apiFailure(response.status, response.body);
    const table = tableAnswer(plan, response.body);
    if (table === undefined) {
      throw new QueryFailure(
        QueryErrorCode.QUERY_ERROR_INTERNAL,
        `${refKey(plan.ref)} does not support server-side printing (the API server did not answer with a Table), so request the full view instead`,
      );
    }
    if (table.payload.length > MAX_PAYLOAD_BYTES) {
      throw new QueryFailure(
        QueryErrorCode.QUERY_ERROR_TOO_LARGE,
        `the table is ${table.payload.length} bytes, over the ${MAX_PAYLOAD_BYTES} byte limit; ask for a smaller limit`,
      );
    }
    return { payload: table.payload, ...table.page, truncated: false };
  };

  const execute = (plan: Plan, verb: QueryVerbName, table: boolean): Promise<Answer> => {
    if (verb === 'get') return getFull(plan);
    return table ? listTable(plan) : listFull(plan);
  };

  /** After the policy: the gate, the deadline and the read; every failure becomes a code. */
  const run = async (
    query: ResourceQuery,
    ref: GroupVersionResource,
    decision: AllowedDecision,
    sessionSignal: AbortSignal,
  ): Promise<ResourceQueryResult> => {
    const verb: QueryVerbName = query.verb === QueryVerb.QUERY_VERB_GET ? 'get' : 'list';
    const timeoutMs = clampTimeoutMs(query.timeoutMs);
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([sessionSignal, deadline]);
    try {
      const entered = gate.enter(signal);
      if (entered === undefined) {
        throw new QueryFailure(
          QueryErrorCode.QUERY_ERROR_RESOURCE_EXHAUSTED,
          `too many concurrent queries for this agent (${MAX_RUNNING_QUERIES} running, ${MAX_WAITING_QUERIES} waiting); retry shortly`,
        );
      }
      const release = await entered;
      try {
        const metadataOnly = deps.secretsMetadataOnly === true && isSecretRef(ref);
        const plan = { query, ref, decision, signal, timeoutMs, metadataOnly };
        const table = query.view === QueryView.QUERY_VIEW_TABLE;
        return result(query.queryId, await execute(plan, verb, table));
      } finally {
        release();
      }
    } catch (err: unknown) {
      const failure = classify(err, deadline, timeoutMs);
      if (failure.code === QueryErrorCode.QUERY_ERROR_INTERNAL) {
        logger.warn({ queryId: query.queryId, err: failure.message }, 'live query failed');
      }
      return failed(query.queryId, failure.code, failure.message);
    }
  };

  return async (query, sessionSignal) => {
    const started = now();
    const verb: QueryVerbName = query.verb === QueryVerb.QUERY_VERB_GET ? 'get' : 'list';
    const view = query.view === QueryView.QUERY_VIEW_TABLE ? 'table' : 'full';
    const ref = refOf(query);
    const finish = (answer: ResourceQueryResult, resource: string): ResourceQueryResult => {
      deps.metrics?.observe({
        verb,
        resource,
        view,
        outcome: outcomeOf(answer),
        seconds: (now() - started) / 1000,
        bytes: answer.payload.length,
      });
      return answer;
    };

    const decision = deps.policy.decide(ref, verb, query.namespace, query.name);
    if (!decision.allowed) {
      logger.info(
        { queryId: query.queryId, verb, resource: refKey(ref), namespace: query.namespace },
        'live query refused by policy',
      );
      const code = QueryErrorCode.QUERY_ERROR_POLICY_DENIED;
      return finish(failed(query.queryId, code, decision.reason), 'other');
    }
    if (verb === 'get' && query.name === '') {
      const code = QueryErrorCode.QUERY_ERROR_INTERNAL;
      return finish(failed(query.queryId, code, 'get requires a name'), refKey(ref));
    }
    deps.metrics?.started();
    try {
      const answer = await run(query, ref, decision, sessionSignal);
      // A wildcard rule makes the resource space unbounded: its failures are not labelled by
      // resource, so a caller probing names cannot grow the metric without bound.
      const label = answer.error !== undefined && decision.wildcard ? 'other' : refKey(ref);
      return finish(answer, label);
    } finally {
      deps.metrics?.finished();
    }
  };
}

function refOf(query: ResourceQuery): GroupVersionResource {
  const ref = query.ref;
  return ref === undefined
    ? { group: '', version: '', resource: '' }
    : { group: ref.group, version: ref.version, resource: ref.resource };
}

function outcomeOf(answer: ResourceQueryResult): QueryOutcome {
  const code = answer.error?.code;
  return code === undefined ? 'ok' : (OUTCOMES[code] ?? 'internal');
}

function classify(err: unknown, deadline: AbortSignal, timeoutMs: number): QueryFailure {
  if (err instanceof QueryFailure) return err;
  if (deadline.aborted) {
    return new QueryFailure(
      QueryErrorCode.QUERY_ERROR_TIMEOUT,
      `no answer from the API server within ${timeoutMs} ms`,
    );
  }
  if (err instanceof BodyTooLargeError) {
    return new QueryFailure(
      QueryErrorCode.QUERY_ERROR_TOO_LARGE,
      `${err.message} (the limit of one answer); ask for a smaller limit`,
    );
  }
  return new QueryFailure(QueryErrorCode.QUERY_ERROR_INTERNAL, getErrorMessage(err));
}
