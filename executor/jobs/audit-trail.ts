// The audit record of one node job: who (the verified principal), what, on which node, when, and
// how it ended. It is logged once at info ("node job ended", audit: true) and returned in the
// job's result, which the collector forwards to the gateway as agent.v1 AuditRecord.
import type { Logger } from 'pino';
import {
  NodeJobOutcome,
  RefusalCode,
  refusalCodeToJSON,
  type NodeJobResult,
  type RunNodeJobRequest,
} from '../../proto/index.js';
import type { Clock } from '../../shared/clock.js';

const MAX_FIELD = 256;
/** Fields from the caller are capped, so a hostile client cannot flood the log. */
export const capField = (value: string) =>
  value.length > MAX_FIELD ? `${value.slice(0, MAX_FIELD)}…` : value;

const OUTCOME_NAMES: Readonly<Partial<Record<NodeJobOutcome, string>>> = {
  [NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED]: 'succeeded',
  [NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED]: 'refused',
  [NodeJobOutcome.NODE_JOB_OUTCOME_FAILED]: 'failed',
  [NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT]: 'timed_out',
  [NodeJobOutcome.NODE_JOB_OUTCOME_CANCELLED]: 'cancelled',
};

export interface AuditTrail {
  /** Set once the signed command verified. */
  principal: string;
  readonly startMs: number;
  finish(body: Omit<NodeJobResult, 'jobId' | 'audit'>): NodeJobResult;
}

export function createAuditTrail(
  request: RunNodeJobRequest,
  clock: Pick<Clock, 'now'>,
  logger: Logger,
): AuditTrail {
  const trail: AuditTrail = {
    principal: '',
    startMs: clock.now(),
    finish(body) {
      const outcome = OUTCOME_NAMES[body.outcome] ?? 'failed';
      const audit = {
        requestId: capField(request.requestId),
        principal: capField(trail.principal),
        target: capField(`node/${request.node}`),
        verb: capField(request.verb),
        startUnixMs: String(trail.startMs),
        endUnixMs: String(clock.now()),
        outcome,
        refusalCode: body.refusal?.code ?? RefusalCode.REFUSAL_CODE_UNSPECIFIED,
        refusalReason: body.refusal?.reason ?? '',
        rule: '',
        dryRun: request.dryRun,
      };
      logger.info(
        {
          audit: true,
          requestId: audit.requestId,
          principal: audit.principal,
          target: audit.target,
          verb: audit.verb,
          dryRun: audit.dryRun,
          outcome,
          ...(body.refusal === undefined
            ? {}
            : {
                code: refusalCodeToJSON(body.refusal.code),
                reason: capField(body.refusal.reason),
              }),
          message: capField(body.message),
          pending: body.pending.length,
          evicted: body.evictedCount,
        },
        'node job ended',
      );
      return { ...body, jobId: request.requestId, audit };
    },
  };
  return trail;
}
