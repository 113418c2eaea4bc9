// The collector's side of executor.v1: a client on the Pod-local Unix socket. What the executor
// answers is the truth about privileged capabilities; the collector never assumes them.
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { ExecutorServiceClient, type GetCapabilitiesResponse } from '../../proto/index.js';
import { AgentError } from '../../shared/errors.js';

const CALL_DEADLINE_MS = 10_000;

export interface ExecutorClient {
  getCapabilities(requestId: string, signal: AbortSignal): Promise<GetCapabilitiesResponse>;
  close(): void;
}

export function createExecutorClient(socketPath: string): ExecutorClient {
  const client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
  return {
    getCapabilities(requestId, signal) {
      if (signal.aborted) {
        return Promise.reject(
          new AgentError('ERR_EXECUTOR_UNAVAILABLE', 'executor call cancelled before it started'),
        );
      }
      return new Promise((resolve, reject) => {
        const call = client.getCapabilities(
          { requestId },
          new Metadata(),
          // A deadline of its own: a wedged executor must not hang the caller.
          { deadline: Date.now() + CALL_DEADLINE_MS },
          (err: ServiceError | null, response?: GetCapabilitiesResponse) => {
            signal.removeEventListener('abort', cancel);
            if (err !== null || response === undefined) {
              reject(
                new AgentError('ERR_EXECUTOR_UNAVAILABLE', 'executor did not answer', {
                  cause: err,
                }),
              );
            } else {
              resolve(response);
            }
          },
        );
        const cancel = () => {
          call.cancel();
        };
        signal.addEventListener('abort', cancel, { once: true });
      });
    },
    close() {
      client.close();
    },
  };
}
