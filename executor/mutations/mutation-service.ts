// Generic mutations for the executor's ApplyMutation RPC: create, update, patch (merge,
// strategic, JSON, server-side apply), delete (with a propagation policy) and scale, each one
// allowed by a rule of mutate.rules that the executor checks itself. In order: the request's
// shape (INVALID_REQUEST); the guard (signature, lifetime, match, replay; then the mutate.enabled
// gate); the rules (POLICY_DENIED); then the write, with dryRun=All when asked. The API server's
// status, reason and message come back as they are; its 403 is RBAC_DENIED (the chart's
// rbac.write is off, or does not cover the resource). The written object never comes back (a
// Secret's data must not leave through a result); only its resourceVersion does.
import type { Logger } from 'pino';
import {
  PatchType,
  RefusalCode,
  refusalCodeToJSON,
  type ApplyMutationRequest,
  type ApplyMutationResponse,
  type ExecutorAudit,
} from '../../proto/index.js';
import type { Clock } from '../../shared/clock.js';
import { parseResource } from '../../shared/config/resources.js';
import type { Config } from '../../shared/config/schema.js';
import type { CommandGuard } from '../guard/authorize-command.js';
import { matchesAnyNamePattern, matchesNamePattern } from '../guard/name-pattern.js';
import { refusalCodeOf } from '../jobs/node-job-service.js';
import {
  isRecord,
  statusOf,
  type KubeHttp,
  type KubeRequest,
  type KubeResponse,
} from '../kube/kube-http.js';

export const MUTATION_PERMISSION = 'cluster:node_write';
const DEFAULT_FIELD_MANAGER = 'kubexa-agent';

type MutateRuleConfig = Config['mutate']['rules'][number];

export interface MutationServiceOptions {
  readonly config: Pick<Config['mutate'], 'rules'>;
  readonly guard: CommandGuard;
  readonly kube: KubeHttp;
  readonly clock: Pick<Clock, 'now'>;
  readonly logger: Logger;
}

export interface MutationService {
  apply(request: ApplyMutationRequest): Promise<ApplyMutationResponse>;
}

const VERBS = new Set(['create', 'update', 'patch', 'delete', 'scale']);
// DNS-1123 subdomains and labels, as the API server accepts them in a path.
const GROUP_RE = /^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$/;
const SEGMENT_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NAME_RE = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const PROPAGATION = new Set(['', 'Foreground', 'Background', 'Orphan']);
const PATCH_CONTENT_TYPES: Partial<Record<PatchType, string>> = {
  [PatchType.PATCH_TYPE_MERGE]: 'application/merge-patch+json',
  [PatchType.PATCH_TYPE_STRATEGIC]: 'application/strategic-merge-patch+json',
  [PatchType.PATCH_TYPE_JSON]: 'application/json-patch+json',
  [PatchType.PATCH_TYPE_APPLY]: 'application/apply-patch+yaml',
};
const MAX_LOG_FIELD = 256;
const cap = (value: string) =>
  value.length > MAX_LOG_FIELD ? `${value.slice(0, MAX_LOG_FIELD)}…` : value;

/** The target's resource as the signed command names it: "group/resource", or "resource" for core. */
export function commandResource(group: string, resource: string): string {
  return group === '' ? resource : `${group}/${resource}`;
}

/** The first rule that allows this verb on this object, or undefined. */
export function findRule(
  rules: readonly MutateRuleConfig[],
  request: { verb: string; group: string; resource: string; namespace: string; name: string },
): MutateRuleConfig | undefined {
  return rules.find((rule) => {
    if (!(rule.verbs as readonly string[]).includes(request.verb)) return false;
    // A cluster-scoped object has no namespace: only "*" reaches it.
    const namespaceOk =
      request.namespace === ''
        ? rule.namespace.trim() === '*'
        : matchesNamePattern(rule.namespace, request.namespace);
    if (!namespaceOk) return false;
    // Group and resource decide, as in RBAC: the version a rule spells does not narrow it.
    const resourceOk = rule.resources.some((entry) => {
      const ref = parseResource(entry);
      return ref?.group === request.group && ref.resource === request.resource;
    });
    if (!resourceOk) return false;
    return rule.names.length === 0 || matchesAnyNamePattern(rule.names, request.name);
  });
}

function objectPath(request: ApplyMutationRequest, withName: boolean): string {
  const root =
    request.group === '' ? `/api/${request.version}` : `/apis/${request.group}/${request.version}`;
  const scope = request.namespace === '' ? '' : `/namespaces/${request.namespace}`;
  return `${root}${scope}/${request.resource}${withName ? `/${request.name}` : ''}`;
}

/** Checks of the request's fields: each a problem sentence, or undefined. */
const FIELD_CHECKS: readonly ((request: ApplyMutationRequest) => string | undefined)[] = [
  (r) => (r.requestId === '' ? 'request_id is required' : undefined),
  (r) =>
    VERBS.has(r.verb)
      ? undefined
      : `verb must be create, update, patch, delete or scale, not "${cap(r.verb)}"`,
  (r) =>
    GROUP_RE.test(r.group) && r.group.length <= 253 ? undefined : 'group is not an API group name',
  (r) => (SEGMENT_RE.test(r.version) ? undefined : 'version is required (e.g. v1)'),
  (r) =>
    SEGMENT_RE.test(r.resource)
      ? undefined
      : 'resource must be a plural resource name, e.g. deployments',
  (r) =>
    r.namespace === '' || (SEGMENT_RE.test(r.namespace) && r.namespace.length <= 63)
      ? undefined
      : 'namespace is not a namespace name',
  (r) =>
    NAME_RE.test(r.name) && r.name.length <= 253
      ? undefined
      : 'name is required and must be an object name',
  (r) =>
    PROPAGATION.has(r.propagationPolicy)
      ? undefined
      : 'propagation_policy must be Foreground, Background or Orphan',
  (r) =>
    r.verb === 'patch' && PATCH_CONTENT_TYPES[r.patchType] === undefined
      ? 'patch_type must be merge, strategic, json or apply'
      : undefined,
  (r) => (r.verb === 'scale' && r.replicas < 0 ? 'replicas must be 0 or more' : undefined),
  (r) =>
    ['create', 'update', 'patch'].includes(r.verb) && r.body.length === 0
      ? `${r.verb} needs a body (the object, or the patch document)`
      : undefined,
  bodyProblem,
];

/** create and update: the body must write the object the rules were checked against. */
function bodyProblem(request: ApplyMutationRequest): string | undefined {
  if (request.verb !== 'create' && request.verb !== 'update') return undefined;
  let object: unknown;
  try {
    object = JSON.parse(request.body.toString('utf8'));
  } catch {
    return 'body must be a JSON object';
  }
  const metadata = isRecord(object) && isRecord(object['metadata']) ? object['metadata'] : {};
  if (metadata['name'] !== request.name) return 'body.metadata.name must equal name';
  const namespace = metadata['namespace'];
  if (namespace !== undefined && namespace !== request.namespace) {
    return 'body.metadata.namespace must equal namespace';
  }
  return undefined;
}

/** A problem with the request's shape, or undefined. */
function shapeProblem(request: ApplyMutationRequest): string | undefined {
  for (const check of FIELD_CHECKS) {
    const problem = check(request);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function buildRequest(request: ApplyMutationRequest): KubeRequest {
  const dryRun = request.dryRun ? 'All' : undefined;
  const body = request.body.toString('utf8');
  switch (request.verb) {
    case 'create':
      return { method: 'POST', path: objectPath(request, false), query: { dryRun }, body };
    case 'update':
      return { method: 'PUT', path: objectPath(request, true), query: { dryRun }, body };
    case 'patch': {
      const apply = request.patchType === PatchType.PATCH_TYPE_APPLY;
      return {
        method: 'PATCH',
        path: objectPath(request, true),
        query: {
          dryRun,
          ...(apply
            ? {
                fieldManager:
                  request.fieldManager === '' ? DEFAULT_FIELD_MANAGER : request.fieldManager,
                force: request.force ? 'true' : undefined,
              }
            : {}),
        },
        contentType: PATCH_CONTENT_TYPES[request.patchType] ?? 'application/merge-patch+json',
        body,
      };
    }
    case 'delete':
      return {
        method: 'DELETE',
        path: objectPath(request, true),
        body: JSON.stringify({
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          ...(request.propagationPolicy === ''
            ? {}
            : { propagationPolicy: request.propagationPolicy }),
          ...(request.dryRun ? { dryRun: ['All'] } : {}),
        }),
        query: { dryRun },
      };
    default:
      return {
        method: 'PATCH',
        path: `${objectPath(request, true)}/scale`,
        query: { dryRun },
        contentType: 'application/merge-patch+json',
        body: JSON.stringify({ spec: { replicas: request.replicas } }),
      };
  }
}

type ResultBody = Omit<ApplyMutationResponse, 'audit'>;

function refusal(code: RefusalCode, reason: string, httpStatus = 0): ResultBody {
  return {
    refusal: { code, reason: reason.slice(0, 512) },
    httpStatus,
    status: 'Failure',
    reason: '',
    message: reason.slice(0, 512),
    resourceVersion: '',
  };
}

/** The API server's answer as the result: its status, reason and message, never the object. */
function fromAnswer(request: ApplyMutationRequest, answer: KubeResponse): ResultBody {
  const status = statusOf(answer);
  if (answer.status === 403) {
    return refusal(
      RefusalCode.REFUSAL_CODE_RBAC_DENIED,
      `the API server refused the executor's ServiceAccount (rbac.write): ${status.message}`,
      403,
    );
  }
  const ok = answer.status >= 200 && answer.status < 300;
  const body = isRecord(answer.body) ? answer.body : {};
  const metadata = isRecord(body['metadata']) ? body['metadata'] : {};
  const resourceVersion = metadata['resourceVersion'];
  let message = status.message.slice(0, 1024);
  if (ok) {
    message = request.dryRun
      ? `dry run: the API server accepted ${request.verb} (nothing was written)`
      : `${request.verb} accepted`;
  }
  return {
    httpStatus: answer.status,
    status: ok ? 'Success' : 'Failure',
    reason: status.reason,
    message,
    resourceVersion:
      typeof resourceVersion === 'string' && body['kind'] !== 'Status' ? resourceVersion : '',
  };
}

function outcomeOf(result: ResultBody): string {
  if (result.refusal !== undefined) return 'refused';
  return result.status === 'Success' ? 'succeeded' : 'failed';
}

export function createMutationService(options: MutationServiceOptions): MutationService {
  const logger = options.logger.child({ component: 'mutations' });

  /** Shape, guard and rules: a refusal, or the principal and the rule that allows it. */
  function admit(request: ApplyMutationRequest): {
    principal: string;
    rule: string;
    refused?: ResultBody;
  } {
    const problem = shapeProblem(request);
    if (problem !== undefined) {
      return {
        principal: '',
        rule: '',
        refused: refusal(RefusalCode.REFUSAL_CODE_INVALID_REQUEST, problem),
      };
    }
    const resource = commandResource(request.group, request.resource);
    const decision = options.guard.authorize(request.command?.jws ?? '', {
      requestId: request.requestId,
      permission: MUTATION_PERMISSION,
      target: {
        kind: 'resource',
        namespace: request.namespace,
        name: request.name,
        container: '',
        resource,
      },
      verb: request.verb,
    });
    if (!decision.accepted) {
      return {
        principal: decision.principal,
        rule: '',
        refused: refusal(refusalCodeOf(decision.code), decision.reason),
      };
    }
    const rule = findRule(options.config.rules, request);
    if (rule === undefined) {
      const where = request.namespace === '' ? '' : `${request.namespace}/`;
      return {
        principal: decision.principal,
        rule: '',
        refused: refusal(
          RefusalCode.REFUSAL_CODE_POLICY_DENIED,
          `no mutate.rules entry allows ${request.verb} on ${resource} ${where}${request.name}`,
        ),
      };
    }
    return { principal: decision.principal, rule: rule.id };
  }

  async function send(request: ApplyMutationRequest): Promise<ResultBody> {
    try {
      return fromAnswer(request, await options.kube.request(buildRequest(request)));
    } catch (err: unknown) {
      const reason = err instanceof Error ? err.message : String(err);
      return {
        httpStatus: 0,
        status: 'Failure',
        reason: 'Unreachable',
        message: `the API server did not answer: ${reason}`.slice(0, 512),
        resourceVersion: '',
      };
    }
  }

  return {
    async apply(request) {
      const startMs = options.clock.now();
      const identity = admit(request);
      const result = identity.refused ?? (await send(request));
      const outcome = outcomeOf(result);
      const audit: ExecutorAudit = {
        requestId: cap(request.requestId),
        principal: cap(identity.principal),
        target: cap(
          `${commandResource(request.group, request.resource)}/${request.namespace}/${request.name}`,
        ),
        verb: cap(request.verb),
        startUnixMs: String(startMs),
        endUnixMs: String(options.clock.now()),
        outcome,
        refusalCode: result.refusal?.code ?? RefusalCode.REFUSAL_CODE_UNSPECIFIED,
        refusalReason: result.refusal?.reason ?? '',
        rule: cap(identity.rule),
        dryRun: request.dryRun,
      };
      logger.info(
        {
          audit: true,
          requestId: audit.requestId,
          principal: audit.principal,
          target: audit.target,
          verb: audit.verb,
          rule: audit.rule,
          dryRun: request.dryRun,
          outcome,
          httpStatus: result.httpStatus,
          ...(result.refusal === undefined
            ? {}
            : { code: refusalCodeToJSON(result.refusal.code), reason: cap(result.refusal.reason) }),
        },
        'mutation ended',
      );
      return { ...result, audit };
    },
  };
}
