// The collector's side of executor.v1: a client on the Pod-local Unix socket. What the executor
// answers is the truth about privileged capabilities; the collector never assumes them.
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { ExecutorServiceClient, type GetCapabilitiesResponse } from '../../proto/index.js';
import { AgentError } from '../../shared/errors.js';

export interface ExecutorClient {
  getCapabilities(requestId: string, signal: AbortSignal): Promise<GetCapabilitiesResponse>;
  close(): void;
}

export function createExecutorClient(socketPath: string): ExecutorClient {
  const client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
  return {
    getCapabilities(requestId, signal) {
      return new Promise((resolve, reject) => {
        const call = client.getCapabilities(
          { requestId },
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
