// The executor's side of the catalog, asked over its Unix socket: which privileged gates are on
// and what the executor's own ServiceAccount may do for them. The collector reports what the
// executor says and never guesses; no executor (every gate off in the chart) says so.
import { randomUUID } from 'node:crypto';
import {
  ExecutorState,
  Gate,
  type ExecutorCatalog,
  type GetCapabilitiesResponse,
  type PrivilegedCapability,
} from '../../proto/index.js';
import { getErrorMessage } from '../../shared/errors.js';
import type { ExecutorClient } from '../executor-client/executor-client.js';

export const CAPABILITY_NAMES = ['pod_exec', 'node_shell', 'node_ops', 'mutate'] as const;

const GATE_BY_NAME: Record<(typeof CAPABILITY_NAMES)[number], Gate> = {
  pod_exec: Gate.GATE_POD_EXEC,
  node_shell: Gate.GATE_NODE_SHELL,
  node_ops: Gate.GATE_NODE_OPS,
  mutate: Gate.GATE_MUTATE,
};

function allOff(): PrivilegedCapability[] {
  return CAPABILITY_NAMES.map((name) => ({ name, enabled: false, rbacAllowed: false, checks: [] }));
}

/** The catalog's executor part from one GetCapabilities answer. */
export function executorCatalogOf(response: GetCapabilitiesResponse): ExecutorCatalog {
  const capabilities = CAPABILITY_NAMES.map((name): PrivilegedCapability => {
    const access = response.gateAccess.find((entry) => entry.gate === name);
    const enabled = access?.enabled ?? response.enabledGates.includes(GATE_BY_NAME[name]);
    const checks = (access?.reviews ?? []).map((review) => ({ ...review }));
    return {
      name,
      enabled,
      rbacAllowed: enabled && checks.length > 0 && checks.every((c) => c.allowed && !c.failed),
      checks,
    };
  });
  return {
    state: ExecutorState.EXECUTOR_STATE_ANSWERED,
    executorVersion: response.executorVersion,
    capabilities,
    error: '',
  };
}

export async function askExecutor(
  client: ExecutorClient | undefined,
  signal: AbortSignal,
): Promise<ExecutorCatalog> {
  if (client === undefined) {
    return {
      state: ExecutorState.EXECUTOR_STATE_NOT_DEPLOYED,
      executorVersion: '',
      capabilities: allOff(),
      error: '',
    };
  }
  try {
    return executorCatalogOf(await client.getCapabilities(randomUUID(), signal));
  } catch (err: unknown) {
    const cause =
      err instanceof Error && err.cause !== undefined ? `: ${getErrorMessage(err.cause)}` : '';
    return {
      state: ExecutorState.EXECUTOR_STATE_UNREACHABLE,
      executorVersion: '',
      capabilities: allOff(),
      error: `${getErrorMessage(err)}${cause}`,
    };
  }
}
