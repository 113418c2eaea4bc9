// Runs node jobs (cordon, uncordon, drain) for the executor's RunNodeJob RPC. Every request
// passes, in order: its own shape (INVALID_REQUEST); the guard (signature, lifetime, match,
// replay; then the mutate.node.enabled gate); mutate.node.verbs and mutate.node.nodes
// (POLICY_DENIED); one job at a time (LIMIT_REACHED); the executor's own RBAC, asked of the API
// server with SelfSubjectAccessReviews (RBAC_DENIED: the chart's rbac.nodeOps is off); the node
// exists (TARGET_NOT_FOUND). Only then does it write. Every job ends in one audit log line and
// an ExecutorAudit in its result.
import type { Logger } from 'pino';
import {
  NodeJobOutcome,
  RefusalCode,
  type NodeJobResult,
  type NodePodProgress,
  type RunNodeJobRequest,
  type RunNodeJobResponse,
} from '../../proto/index.js';
import type { Clock } from '../../shared/clock.js';
import type { Config } from '../../shared/config/schema.js';
import type { CommandGuard } from '../guard/authorize-command.js';
import { matchesAnyNamePattern } from '../guard/name-pattern.js';
import { runDrain, type DrainOutcome, type DrainResult } from './drain.js';
import type { NodeApi } from './node-api.js';
import { createAuditTrail, type AuditTrail } from './audit-trail.js';

export const NODE_JOB_PERMISSION = 'cluster:node_write';

/** The grants each job needs: exactly the chart's rbac.nodeOps. */
const CORDON_GRANTS = ['/nodes:get', '/nodes:patch'] as const;
const DRAIN_GRANTS = [
  ...CORDON_GRANTS,
  '/pods:list',
  '/pods/eviction:create',
  'apps/daemonsets:get',
] as const;

const REFUSAL_NAMES: Readonly<Record<string, RefusalCode>> = {
  SIGNATURE_INVALID: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
  SIGNATURE_EXPIRED: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
  SIGNATURE_REPLAYED: RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED,
  SIGNATURE_MISMATCH: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
  LIMIT_REACHED: RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
  INVALID_REQUEST: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
  GATE_DISABLED: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
};

/** The wire code of a guard refusal. */
export function refusalCodeOf(name: string): RefusalCode {
  return REFUSAL_NAMES[name] ?? RefusalCode.REFUSAL_CODE_INVALID_REQUEST;
}

const OUTCOMES: Readonly<Record<DrainOutcome, NodeJobOutcome>> = {
  succeeded: NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED,
  refused: NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED,
  failed: NodeJobOutcome.NODE_JOB_OUTCOME_FAILED,
  timed_out: NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT,
  cancelled: NodeJobOutcome.NODE_JOB_OUTCOME_CANCELLED,
};

export interface NodeJobServiceOptions {
  readonly config: Config['mutate']['node'];
  readonly guard: CommandGuard;
  readonly api: NodeApi;
  /** The agent's own Pod: never evicted. */
  readonly self?: { readonly namespace: string; readonly name: string } | undefined;
  readonly clock: Pick<Clock, 'now'>;
  readonly logger: Logger;
  /** Tests may shorten kubectl's 5 s retry and 1 s poll; production never sets these. */
  readonly retryDelayMs?: number;
  readonly pollIntervalMs?: number;
}

export interface NodeJobService {
  /** Runs one job; `send` gets every event but the result, which is returned. */
  run(
    request: RunNodeJobRequest,
    send: (event: RunNodeJobResponse) => void,
    signal: AbortSignal,
  ): Promise<NodeJobResult>;
  /** Cancels the running job with this id; false when none runs. */
  cancel(jobId: string): boolean;
  /** Cancels the running job (executor shutdown) and waits for it to end. */
  close(): Promise<void>;
}

const VERBS = new Set(['cordon', 'uncordon', 'drain']);

type JobBody = Omit<NodeJobResult, 'jobId' | 'audit'>;
const EMPTY_COUNTS = { pending: [], evictedCount: 0, skippedCount: 0, refusedCount: 0 };

function refusal(code: RefusalCode, reason: string): JobBody {
  return {
    ...EMPTY_COUNTS,
    outcome: NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED,
    refusal: { code, reason: reason.slice(0, 512) },
    message: reason.slice(0, 512),
    cordoned: false,
  };
}

function fromDrain(result: DrainResult): JobBody {
  return {
    outcome: OUTCOMES[result.outcome],
    ...(result.outcome === 'refused'
      ? {
          refusal: {
            code: RefusalCode.REFUSAL_CODE_DRAIN_NEEDS_OPTIONS,
            reason: result.message.slice(0, 512),
          },
        }
      : {}),
    message: result.message,
    cordoned: result.cordoned,
    pending: [...result.pending],
    evictedCount: result.evicted,
    skippedCount: result.skipped,
    refusedCount: result.refused,
  };
}

/** Everything before the job may run: the verified principal (once known) and any refusal. */
function admit(
  request: RunNodeJobRequest,
  options: NodeJobServiceOptions,
): { readonly principal: string; readonly refused?: JobBody } {
  if (!VERBS.has(request.verb) || request.node === '' || request.requestId === '') {
    return {
      principal: '',
      refused: refusal(
        RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
        'a node job needs a request_id, a node and a verb of cordon, uncordon or drain',
      ),
    };
  }
  const decision = options.guard.authorize(request.command?.jws ?? '', {
    requestId: request.requestId,
    permission: NODE_JOB_PERMISSION,
    target: { kind: 'node', namespace: '', name: request.node, container: '', resource: '' },
    verb: request.verb,
  });
  if (!decision.accepted) {
    return {
      principal: decision.principal,
      refused: refusal(refusalCodeOf(decision.code), decision.reason),
    };
  }
  const principal = decision.principal;
  const config = options.config;
  if (!(config.verbs as readonly string[]).includes(request.verb)) {
    return {
      principal,
      refused: refusal(
        RefusalCode.REFUSAL_CODE_POLICY_DENIED,
        `mutate.node.verbs does not allow ${request.verb} (allowed: ${config.verbs.join(', ')})`,
      ),
    };
  }
  if (!matchesAnyNamePattern(config.nodes, request.node)) {
    return {
      principal,
      refused: refusal(
        RefusalCode.REFUSAL_CODE_POLICY_DENIED,
        `node ${request.node} matches no pattern of mutate.node.nodes`,
      ),
    };
  }
  return { principal };
}

/** The effective drain timeout: 0 or above the cap means the cap (mutate.node.max_timeout_sec). */
export function effectiveTimeoutSeconds(requested: number, maxTimeoutSec: number): number {
  return requested === 0 || requested > maxTimeoutSec ? maxTimeoutSec : requested;
}

export function createNodeJobService(options: NodeJobServiceOptions): NodeJobService {
  const logger = options.logger.child({ component: 'node-jobs' });
  let running: { id: string; abort: AbortController; done: Promise<unknown> } | undefined;

  async function cordonJob(
    request: RunNodeJobRequest,
    nodeUnschedulable: boolean,
  ): Promise<JobBody> {
    const want = request.verb === 'cordon';
    const done = { ...EMPTY_COUNTS, outcome: NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED };
    // kubectl sends nothing for a node already in the wanted state.
    if (nodeUnschedulable === want) {
      return { ...done, message: `${request.node} already ${request.verb}ed`, cordoned: want };
    }
    const written = await options.api.setUnschedulable(request.node, want, request.dryRun);
    return {
      ...done,
      message: request.dryRun
        ? `dry run: ${request.node} would be ${request.verb}ed`
        : `${request.node} ${request.verb}ed`,
      cordoned: request.dryRun ? nodeUnschedulable : written.spec?.unschedulable === true,
    };
  }

  async function drainJob(
    request: RunNodeJobRequest,
    abort: AbortController,
    send: (event: RunNodeJobResponse) => void,
  ): Promise<JobBody> {
    const drain = request.drain;
    const result = await runDrain(
      {
        node: request.node,
        force: drain?.force ?? false,
        deleteEmptydirData: drain?.deleteEmptydirData ?? false,
        gracePeriodSeconds: drain?.gracePeriodSeconds,
        podSelector: drain?.podSelector ?? '',
        dryRun: request.dryRun,
        self: options.self,
      },
      {
        api: options.api,
        signal: abort.signal,
        emit: (progress) => {
          const value: NodePodProgress = { ...progress, atUnixMs: String(options.clock.now()) };
          send({ event: { $case: 'pod', value } });
        },
        ...(options.retryDelayMs === undefined ? {} : { retryDelayMs: options.retryDelayMs }),
        ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
      },
    );
    return fromDrain(result);
  }

  /** The job after admission: RBAC, the node, then the work under its timeout. */
  async function execute(
    request: RunNodeJobRequest,
    abort: AbortController,
    send: (event: RunNodeJobResponse) => void,
    trail: AuditTrail,
  ): Promise<JobBody> {
    const missing = await options.api.missingGrants(
      request.verb === 'drain' ? DRAIN_GRANTS : CORDON_GRANTS,
    );
    if (missing.length > 0) {
      return refusal(
        RefusalCode.REFUSAL_CODE_RBAC_DENIED,
        `the executor's ServiceAccount lacks ${missing.join(', ')} (the chart's rbac.nodeOps grants them)`,
      );
    }
    const node = await options.api.getNode(request.node, abort.signal);
    if (node === undefined) {
      return refusal(
        RefusalCode.REFUSAL_CODE_TARGET_NOT_FOUND,
        `node ${request.node} does not exist`,
      );
    }
    const timeoutSeconds =
      request.verb === 'drain'
        ? effectiveTimeoutSeconds(
            request.drain?.timeoutSeconds ?? 0,
            options.config.max_timeout_sec,
          )
        : 0;
    send({
      event: {
        $case: 'started',
        value: {
          jobId: request.requestId,
          principal: trail.principal,
          timeoutSeconds,
          startedUnixMs: String(trail.startMs),
        },
      },
    });
    if (request.verb !== 'drain') return cordonJob(request, node.spec?.unschedulable === true);
    const timer = setTimeout(() => {
      abort.abort('timeout');
    }, timeoutSeconds * 1000);
    try {
      return await drainJob(request, abort, send);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A job that threw: a failure, or the timeout or cancel that interrupted a call. */
  async function interrupted(
    request: RunNodeJobRequest,
    abort: AbortController,
    err: unknown,
  ): Promise<JobBody> {
    const reason = String(abort.signal.reason);
    const node = await options.api.getNode(request.node).catch(() => undefined);
    const message = err instanceof Error ? err.message : String(err);
    let outcome: NodeJobOutcome = NodeJobOutcome.NODE_JOB_OUTCOME_FAILED;
    if (abort.signal.aborted) {
      outcome =
        reason === 'timeout'
          ? NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT
          : NodeJobOutcome.NODE_JOB_OUTCOME_CANCELLED;
    }
    return {
      ...EMPTY_COUNTS,
      outcome,
      message: abort.signal.aborted ? `${reason}: ${message}` : message,
      cordoned: node?.spec?.unschedulable === true,
    };
  }

  async function run(
    request: RunNodeJobRequest,
    send: (event: RunNodeJobResponse) => void,
    callSignal: AbortSignal,
  ): Promise<NodeJobResult> {
    const trail = createAuditTrail(request, options.clock, logger);
    const admitted = admit(request, options);
    trail.principal = admitted.principal;
    if (admitted.refused !== undefined) return trail.finish(admitted.refused);
    if (running !== undefined) {
      return trail.finish(
        refusal(
          RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
          `one node job runs at a time; ${running.id} is running`,
        ),
      );
    }
    const abort = new AbortController();
    const job = { id: request.requestId, abort, done: Promise.resolve() as Promise<unknown> };
    running = job;
    const onCallAbort = () => {
      abort.abort('cancelled');
    };
    callSignal.addEventListener('abort', onCallAbort, { once: true });
    const work = (async () => {
      try {
        return trail.finish(
          await execute(request, abort, send, trail).catch((err: unknown) =>
            interrupted(request, abort, err),
          ),
        );
      } finally {
        callSignal.removeEventListener('abort', onCallAbort);
        if (running === job) running = undefined;
      }
    })();
    job.done = work.catch(() => undefined);
    return work;
  }

  return {
    run,
    cancel(jobId) {
      if (running?.id !== jobId) return false;
      running.abort.abort('cancelled');
      return true;
    },
    async close() {
      const job = running;
      if (job === undefined) return;
      job.abort.abort('cancelled');
      await job.done;
    },
  };
}
