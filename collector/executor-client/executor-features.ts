// What the executor says it does, asked once at start: pod and node consoles, node jobs and
// mutations are advertised to the gateway only when the executor's own gates for them are on
// (GetCapabilities). The executor still checks every request; this only keeps the handshake
// honest.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Gate } from '../../proto/index.js';
import { getErrorMessage } from '../../shared/errors.js';
import { createExecutorClient } from './executor-client.js';

export interface ExecutorWriteFeatures {
  /** mutate.node.enabled in the executor's config: AgentCapabilities.node_jobs. */
  readonly nodeJobs: boolean;
  /** mutate.enabled in the executor's config: AgentCapabilities.mutations. */
  readonly mutations: boolean;
}

const NONE: ExecutorWriteFeatures = { nodeJobs: false, mutations: false };

/** Asks the executor on `socketPath`; an executor that does not answer advertises nothing. */
export async function askExecutorWriteFeatures(
  socketPath: string,
  logger: Logger,
  timeoutMs = 5000,
): Promise<ExecutorWriteFeatures> {
  const client = createExecutorClient(socketPath);
  try {
    const answer = await client.getCapabilities(randomUUID(), AbortSignal.timeout(timeoutMs));
    return {
      nodeJobs: answer.enabledGates.includes(Gate.GATE_NODE_OPS),
      mutations: answer.enabledGates.includes(Gate.GATE_MUTATE),
    };
  } catch (err: unknown) {
    logger.warn(
      { reason: getErrorMessage(err) },
      'the executor did not answer at start: node jobs and mutations are not advertised',
    );
    return NONE;
  } finally {
    client.close();
  }
}

/** The console relay the collector runs: the executor's socket and which kinds it serves. */
export interface ExecutorConsoleFeatures {
  readonly executorSocket: string;
  /** exec.pod.enabled in the executor's config (GATE_POD_EXEC): AgentCapabilities.pod_consoles. */
  readonly podConsoles: boolean;
  /** exec.node.enabled (GATE_NODE_SHELL): AgentCapabilities.node_consoles. */
  readonly nodeConsoles: boolean;
}

/**
 * Consoles are relayed only when the executor says exec.pod or exec.node is on; undefined (no
 * relay, nothing advertised, console requests ignored) otherwise or when it does not answer.
 */
export async function askExecutorConsoleFeatures(
  socketPath: string,
  logger: Logger,
  timeoutMs = 5000,
): Promise<ExecutorConsoleFeatures | undefined> {
  const client = createExecutorClient(socketPath);
  try {
    const answer = await client.getCapabilities(randomUUID(), AbortSignal.timeout(timeoutMs));
    const podConsoles = answer.enabledGates.includes(Gate.GATE_POD_EXEC);
    const nodeConsoles = answer.enabledGates.includes(Gate.GATE_NODE_SHELL);
    if (!podConsoles && !nodeConsoles) return undefined;
    return { executorSocket: socketPath, podConsoles, nodeConsoles };
  } catch (err: unknown) {
    logger.warn(
      { reason: getErrorMessage(err) },
      'the executor did not answer at start: pod consoles are not advertised',
    );
    return undefined;
  } finally {
    client.close();
  }
}
