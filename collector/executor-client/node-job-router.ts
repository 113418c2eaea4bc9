// Routes the gateway's node job and mutation requests to the executor (node-job-relay.ts) and
// brings the answers back. NodeJobEvent and MutationResult go straight on the session that asked
// (they are that session's answers: they wait behind no buffered data); every AuditRecord goes
// into the durable buffer as an `audit` item, which the overflow policy never drops, as console
// audit records do. A job is not tied to the session that asked: a drain goes on when the
// gateway connection drops, its progress to that session is then dropped, and its audit record
// still reaches the next session. docs/gateway.md ("Node jobs and mutations") explains why.
import { randomUUID } from 'node:crypto';
import { credentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { AgentMessage, ExecutorServiceClient } from '../../proto/index.js';
import type { Service } from '../../shared/lifecycle/service.js';
import type { BufferItem } from '../buffer/types.js';
import type { NodeJobAnswer, NodeJobHandler, NodeJobRequestPayload } from '../gateway/session.js';
import {
  EXECUTOR_UNAVAILABLE,
  relayCancel,
  relayMutation,
  relayNodeJob,
  type RelayedPayload,
} from './node-job-relay.js';

export interface NodeJobRouterDeps {
  readonly socketPath: string;
  readonly logger: Logger;
  /** Where audit records go: the durable buffer. */
  readonly enqueue: (item: BufferItem) => void;
  /** How long close() waits for cancelled jobs to send their results (and audit records). */
  readonly closeGraceMs?: number;
}

export interface NodeJobRouter {
  readonly handle: NodeJobHandler;
  /** Node jobs and mutations relayed right now. */
  active(): number;
  /** Answers sent to a session that had ended (dropped; the audit record carries the outcome). */
  answersDropped(): number;
  /** Closed before the stream: running jobs are cancelled and their audit records buffered. */
  readonly service: Service;
}

const DEFAULT_CLOSE_GRACE_MS = 10_000;

/** An audit record as a durable buffer item. */
export function auditItem(payload: Extract<RelayedPayload, { $case: 'auditRecord' }>): BufferItem {
  const message: AgentMessage = { messageId: randomUUID(), payload };
  return { id: message.messageId, kind: 'audit', payload: AgentMessage.encode(message).finish() };
}

/** The answer to a request no executor can take (none deployed, or the collector is stopping). */
export function unavailableAnswer(
  request: NodeJobRequestPayload,
  reason: string,
): NodeJobAnswer | undefined {
  switch (request.$case) {
    case 'nodeJobRequest':
      return {
        $case: 'nodeJobEvent',
        value: {
          jobId: request.value.requestId,
          event: {
            $case: 'done',
            value: {
              outcome: 'failed',
              refusalCode: EXECUTOR_UNAVAILABLE,
              message: reason,
              cordoned: false,
              pending: [],
              evictedCount: 0,
              skippedCount: 0,
              refusedCount: 0,
            },
          },
        },
      };
    case 'mutationRequest':
      return {
        $case: 'mutationResult',
        value: {
          requestId: request.value.requestId,
          refusalCode: EXECUTOR_UNAVAILABLE,
          refusalReason: reason,
          httpStatus: 0,
          status: 'Failure',
          reason: '',
          message: '',
          resourceVersion: '',
        },
      };
    case 'nodeJobCancel':
      // No job can run without an executor; a cancel has no answer of its own.
      return undefined;
  }
}

/** The handler of a collector deployed without an executor: every request is answered. */
export const noExecutorHandler: NodeJobHandler = (request, answer) => {
  const reply = unavailableAnswer(
    request,
    'no executor is deployed with this agent (the chart renders it with rbac.nodeOps or rbac.write)',
  );
  if (reply !== undefined) answer(reply);
};

export function createNodeJobRouter(deps: NodeJobRouterDeps): NodeJobRouter {
  const logger = deps.logger.child({ component: 'node-job-router' });
  const client = new ExecutorServiceClient(
    `unix://${deps.socketPath}`,
    credentials.createInsecure(),
  );
  const stop = new AbortController();
  /** Relays in flight, by a key of their own; `jobId` for node jobs (what close() cancels). */
  const running = new Map<string, { readonly jobId?: string; readonly work: Promise<void> }>();
  let dropped = 0;
  let closing = false;

  /** Sends one relayed payload where it belongs: audit to the buffer, the rest to the asker. */
  const deliver =
    (requestId: string, answer: (payload: NodeJobAnswer) => boolean) =>
    (payload: RelayedPayload): void => {
      if (payload.$case === 'auditRecord') {
        deps.enqueue(auditItem(payload));
        return;
      }
      if (answer(payload)) return;
      dropped += 1;
      logger.debug(
        { requestId, kind: payload.$case },
        'the session that asked has ended: answer dropped (the audit record carries the outcome)',
      );
    };

  const track = (work: Promise<void>, jobId?: string) => {
    const key = randomUUID();
    running.set(key, jobId === undefined ? { work } : { jobId, work });
    void work.finally(() => running.delete(key));
  };

  const handle: NodeJobHandler = (request, answer) => {
    if (closing) {
      const reply = unavailableAnswer(request, 'the collector is stopping');
      if (reply !== undefined) answer(reply);
      return;
    }
    switch (request.$case) {
      case 'nodeJobRequest': {
        const job = request.value;
        logger.info(
          { requestId: job.requestId, node: job.node, verb: job.verb, dryRun: job.dryRun },
          'node job relayed to the executor',
        );
        track(
          relayNodeJob(client, job, deliver(job.requestId, answer), stop.signal),
          job.requestId,
        );
        return;
      }
      case 'mutationRequest': {
        const mutation = request.value;
        logger.info(
          { requestId: mutation.requestId, verb: mutation.verb, resource: mutation.resource },
          'mutation relayed to the executor',
        );
        track(relayMutation(client, mutation, deliver(mutation.requestId, answer)));
        return;
      }
      case 'nodeJobCancel': {
        const jobId = request.value.jobId;
        void relayCancel(client, jobId).then((cancelled) => {
          logger.info({ jobId, cancelled }, 'node job cancel relayed to the executor');
        });
        return;
      }
    }
  };

  return {
    handle,
    active: () => running.size,
    answersDropped: () => dropped,
    service: {
      name: 'node-job-router',
      start: () => Promise.resolve(),
      async close() {
        if (closing) return;
        closing = true;
        // Cancel rather than cut: the executor then ends each job with its result and audit
        // record, which reach the buffer before it is flushed to disk.
        const relays = [...running.values()];
        await Promise.all(
          relays.flatMap((relay) =>
            relay.jobId === undefined ? [] : [relayCancel(client, relay.jobId)],
          ),
        );
        const grace = new Promise<void>((resolve) => {
          setTimeout(resolve, deps.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS).unref();
        });
        await Promise.race([Promise.all(relays.map((relay) => relay.work)), grace]);
        stop.abort();
        client.close();
      },
    },
  };
}
