// The RunNodeJob, CancelNodeJob and ApplyMutation handlers of the executor's gRPC server. They
// only adapt gRPC to the services (executor/jobs, executor/mutations), which run every check.
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';
import {
  NodeJobOutcome,
  RefusalCode,
  type ApplyMutationRequest,
  type ApplyMutationResponse,
  type CancelNodeJobRequest,
  type CancelNodeJobResponse,
  type ExecutorServiceServer,
  type RunNodeJobRequest,
  type RunNodeJobResponse,
} from '../../proto/index.js';
import type { MutationService } from '../mutations/mutation-service.js';
import type { NodeJobService } from '../jobs/node-job-service.js';

const NOT_CONFIGURED =
  'this executor serves no node jobs or mutations (no API server access configured)';

export function nodeJobHandlers(options: {
  readonly nodeJobs?: NodeJobService | undefined;
  readonly mutations?: MutationService | undefined;
}): Pick<ExecutorServiceServer, 'runNodeJob' | 'cancelNodeJob' | 'applyMutation'> {
  return {
    runNodeJob(call: ServerWritableStream<RunNodeJobRequest, RunNodeJobResponse>) {
      const service = options.nodeJobs;
      const abort = new AbortController();
      call.on('cancelled', () => {
        abort.abort('cancelled');
      });
      const send = (event: RunNodeJobResponse) => {
        if (!call.cancelled) call.write(event);
      };
      const jobId = call.request.requestId;
      const done =
        service === undefined
          ? Promise.resolve({
              jobId,
              outcome: NodeJobOutcome.NODE_JOB_OUTCOME_REFUSED,
              refusal: { code: RefusalCode.REFUSAL_CODE_GATE_DISABLED, reason: NOT_CONFIGURED },
              message: NOT_CONFIGURED,
              cordoned: false,
              pending: [],
              evictedCount: 0,
              skippedCount: 0,
              refusedCount: 0,
            })
          : service.run(call.request, send, abort.signal);
      done
        .then((result) => {
          send({ event: { $case: 'result', value: result } });
          call.end();
        })
        .catch((err: unknown) => {
          call.destroy(err instanceof Error ? err : new Error(String(err)));
        });
    },
    cancelNodeJob(
      call: ServerUnaryCall<CancelNodeJobRequest, CancelNodeJobResponse>,
      callback: sendUnaryData<CancelNodeJobResponse>,
    ) {
      callback(null, { cancelled: options.nodeJobs?.cancel(call.request.jobId) ?? false });
    },
    applyMutation(
      call: ServerUnaryCall<ApplyMutationRequest, ApplyMutationResponse>,
      callback: sendUnaryData<ApplyMutationResponse>,
    ) {
      const service = options.mutations;
      if (service === undefined) {
        callback(null, {
          refusal: { code: RefusalCode.REFUSAL_CODE_GATE_DISABLED, reason: NOT_CONFIGURED },
          httpStatus: 0,
          status: 'Failure',
          reason: '',
          message: NOT_CONFIGURED,
          resourceVersion: '',
        });
        return;
      }
      service.apply(call.request).then(
        (response) => {
          callback(null, response);
        },
        (err: unknown) => {
          callback(err instanceof Error ? err : new Error(String(err)), null);
        },
      );
    },
  };
}
