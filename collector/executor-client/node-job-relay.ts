// The collector's relay for node jobs and mutations: a gateway request goes to the executor as
// it came (the signed command untouched), and every executor answer comes back as agent.v1
// payloads: NodeJobEvent per step, MutationResult, and one AuditRecord per action. The relay
// decides nothing: the executor checks every gate. When the executor cannot be reached the
// answer says so (outcome "failed", refusal code EXECUTOR_UNAVAILABLE), never silence.
import { Metadata, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import {
  NodeJobOutcome,
  PatchType,
  podPhaseToJSON,
  refusalCodeToJSON,
  RefusalCode,
  type ApplyMutationResponse,
  type AuditRecord,
  type ExecutorAudit,
  type ExecutorServiceClient,
  type GatewayMutationRequest,
  type MutationResult,
  type NodeJobEvent,
  type NodeJobRequest,
  type RunNodeJobResponse,
} from '../../proto/index.js';

export type RelayedPayload =
  | { readonly $case: 'nodeJobEvent'; readonly value: NodeJobEvent }
  | { readonly $case: 'mutationResult'; readonly value: MutationResult }
  | { readonly $case: 'auditRecord'; readonly value: AuditRecord };

export const EXECUTOR_UNAVAILABLE = 'EXECUTOR_UNAVAILABLE';

const OUTCOME_WORDS: Readonly<Partial<Record<NodeJobOutcome, string>>> = {
  [NodeJobOutcome.NODE_JOB_OUTCOME_SUCCEEDED]: 'succeeded',
  [NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED]: 'refused',
  [NodeJobOutcome.NODE_JOB_OUTCOME_FAILED]: 'failed',
  [NodeJobOutcome.NODE_JOB_OUTCOME_TIMED_OUT]: 'timed_out',
  [NodeJobOutcome.NODE_JOB_OUTCOME_CANCELLED]: 'cancelled',
};

const PATCH_TYPES: Readonly<Record<string, PatchType>> = {
  merge: PatchType.PATCH_TYPE_MERGE,
  strategic: PatchType.PATCH_TYPE_STRATEGIC,
  json: PatchType.PATCH_TYPE_JSON,
  apply: PatchType.PATCH_TYPE_APPLY,
};

/**
 * The wire's refusal code: the executor's RefusalCode name without its prefix
 * ("GATE_DISABLED"), the same words console refusals and audit records use.
 */
const codeName = (code: RefusalCode | undefined) =>
  code === undefined || code === RefusalCode.REFUSAL_CODE_UNSPECIFIED
    ? ''
    : refusalCodeToJSON(code).replace(/^REFUSAL_CODE_/, '');

/** The executor's audit record as the gateway's AuditRecord. */
export function toAuditRecord(audit: ExecutorAudit): AuditRecord {
  return {
    event: NODE_JOB_VERBS.has(audit.verb) ? 'node_job' : 'mutation',
    requestId: audit.requestId,
    sessionId: '',
    principal: audit.principal,
    target: audit.target,
    verb: audit.verb,
    command: [],
    tty: false,
    startUnixMs: audit.startUnixMs,
    endUnixMs: audit.endUnixMs,
    exitCode: 0,
    endReason: '',
    bytesIn: '0',
    bytesOut: '0',
    refusalCode: codeName(audit.refusalCode),
    refusalReason: audit.refusalReason,
    rule: audit.rule,
    outcome: audit.outcome,
    dryRun: audit.dryRun,
  };
}

/** The verbs of node jobs; every other privileged verb here is a generic mutation. */
const NODE_JOB_VERBS: ReadonlySet<string> = new Set(['cordon', 'uncordon', 'drain']);

/** One executor event as the gateway's NodeJobEvent (and, for the result, its AuditRecord). */
export function toGatewayEvents(jobId: string, response: RunNodeJobResponse): RelayedPayload[] {
  const event = response.event;
  if (event === undefined) return [];
  switch (event.$case) {
    case 'started':
      return [
        {
          $case: 'nodeJobEvent',
          value: {
            jobId,
            event: {
              $case: 'started',
              value: {
                principal: event.value.principal,
                timeoutSeconds: event.value.timeoutSeconds,
              },
            },
          },
        },
      ];
    case 'pod': {
      const pod = event.value;
      return [
        {
          $case: 'nodeJobEvent',
          value: {
            jobId,
            event: {
              $case: 'pod',
              value: {
                namespace: pod.namespace,
                name: pod.name,
                phase: podPhaseToJSON(pod.phase)
                  .replace(/^POD_PHASE_/, '')
                  .toLowerCase(),
                reason: pod.reason,
                pdb: pod.pdb,
                message: pod.message,
                atUnixMs: pod.atUnixMs,
              },
            },
          },
        },
      ];
    }
    case 'result': {
      const result = event.value;
      const done: RelayedPayload = {
        $case: 'nodeJobEvent',
        value: {
          jobId,
          event: {
            $case: 'done',
            value: {
              outcome: OUTCOME_WORDS[result.outcome] ?? 'failed',
              refusalCode: codeName(result.refusal?.code),
              message: result.message,
              cordoned: result.cordoned,
              pending: result.pending,
              evictedCount: result.evictedCount,
              skippedCount: result.skippedCount,
              refusedCount: result.refusedCount,
            },
          },
        },
      };
      return result.audit === undefined
        ? [done]
        : [done, { $case: 'auditRecord', value: toAuditRecord(result.audit) }];
    }
  }
}

function unavailable(jobId: string, err: unknown): RelayedPayload {
  return {
    $case: 'nodeJobEvent',
    value: {
      jobId,
      event: {
        $case: 'done',
        value: {
          outcome: 'failed',
          refusalCode: EXECUTOR_UNAVAILABLE,
          message: `the executor did not answer: ${err instanceof Error ? err.message : String(err)}`,
          cordoned: false,
          pending: [],
          evictedCount: 0,
          skippedCount: 0,
          refusedCount: 0,
        },
      },
    },
  };
}

/** Relays one node job; resolves once its last payload was emitted. */
export function relayNodeJob(
  client: ExecutorServiceClient,
  request: NodeJobRequest,
  emit: (payload: RelayedPayload) => void,
  signal: AbortSignal,
): Promise<void> {
  return new Promise((resolve) => {
    let ended = false;
    const call: ClientReadableStream<RunNodeJobResponse> = client.runNodeJob(
      {
        requestId: request.requestId,
        command: { jws: request.signedCommand },
        node: request.node,
        verb: request.verb,
        dryRun: request.dryRun,
        drain: {
          force: request.force,
          deleteEmptydirData: request.deleteEmptydirData,
          gracePeriodSeconds: request.gracePeriodSeconds,
          timeoutSeconds: request.timeoutSeconds,
          podSelector: request.podSelector,
        },
      },
      new Metadata(),
    );
    const cancel = () => {
      call.cancel();
    };
    signal.addEventListener('abort', cancel, { once: true });
    const finish = () => {
      signal.removeEventListener('abort', cancel);
      resolve();
    };
    call.on('data', (response: RunNodeJobResponse) => {
      const payloads = toGatewayEvents(request.requestId, response);
      if (payloads.some((p) => p.$case === 'nodeJobEvent' && p.value.event?.$case === 'done')) {
        ended = true;
      }
      for (const payload of payloads) emit(payload);
    });
    call.on('error', (err: ServiceError) => {
      if (!ended) emit(unavailable(request.requestId, err));
      ended = true;
      finish();
    });
    call.on('end', () => {
      if (!ended)
        emit(unavailable(request.requestId, new Error('the stream ended without a result')));
      finish();
    });
  });
}

/** Relays one mutation; emits its MutationResult and AuditRecord. */
export function relayMutation(
  client: ExecutorServiceClient,
  request: GatewayMutationRequest,
  emit: (payload: RelayedPayload) => void,
): Promise<void> {
  return new Promise((resolve) => {
    client.applyMutation(
      {
        requestId: request.requestId,
        command: { jws: request.signedCommand },
        verb: request.verb,
        group: request.group,
        version: request.version,
        resource: request.resource,
        namespace: request.namespace,
        name: request.name,
        body: request.body,
        patchType: PATCH_TYPES[request.patchType] ?? PatchType.PATCH_TYPE_UNSPECIFIED,
        replicas: request.replicas,
        propagationPolicy: request.propagationPolicy,
        dryRun: request.dryRun,
        fieldManager: request.fieldManager,
        force: request.force,
      },
      (err: ServiceError | null, response?: ApplyMutationResponse) => {
        if (err !== null || response === undefined) {
          emit({
            $case: 'mutationResult',
            value: {
              requestId: request.requestId,
              refusalCode: EXECUTOR_UNAVAILABLE,
              refusalReason: `the executor did not answer: ${err?.message ?? 'no response'}`,
              httpStatus: 0,
              status: 'Failure',
              reason: '',
              message: '',
              resourceVersion: '',
            },
          });
        } else {
          emit({
            $case: 'mutationResult',
            value: {
              requestId: request.requestId,
              refusalCode: codeName(response.refusal?.code),
              refusalReason: response.refusal?.reason ?? '',
              httpStatus: response.httpStatus,
              status: response.status,
              reason: response.reason,
              message: response.message,
              resourceVersion: response.resourceVersion,
            },
          });
          if (response.audit !== undefined) {
            emit({ $case: 'auditRecord', value: toAuditRecord(response.audit) });
          }
        }
        resolve();
      },
    );
  });
}

/** Relays a cancel; resolves whether a job was cancelled. */
export function relayCancel(client: ExecutorServiceClient, jobId: string): Promise<boolean> {
  return new Promise((resolve) => {
    client.cancelNodeJob({ requestId: `cancel-${jobId}`, jobId }, (err, response) => {
      resolve(err === null && response.cancelled);
    });
  });
}
