// The agent's id: configured (agent.agent_id, KUBEXA_AGENT_ID), or generated once and kept in the
// data directory so a restarted Pod reports the same id to the gateway.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** File in the data directory (buffer.spill_dir, on the PVC) that holds the generated id. */
export const AGENT_ID_FILE = 'agent-id';

const VALID_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export type AgentIdSource = 'config' | 'data-dir' | 'generated' | 'generated-ephemeral';

export interface ResolvedAgentId {
  readonly agentId: string;
  /** config: set in the file or env; data-dir: read back; generated: new and persisted. */
  readonly source: AgentIdSource;
  /** The file holding a persisted id, when there is one. */
  readonly path?: string;
}

/**
 * Picks the agent id. `dataDir` empty means no persistent volume: a new id per process start
 * (the Go agent's behaviour). A file with an unusable id is replaced by a new id.
 */
export function resolveAgentId(
  configured: string,
  dataDir: string,
  create: () => string,
): ResolvedAgentId {
  if (configured !== '') return { agentId: configured, source: 'config' };
  if (dataDir === '') return { agentId: create(), source: 'generated-ephemeral' };
  const path = join(dataDir, AGENT_ID_FILE);
  const existing = readIdFile(path);
  if (existing !== undefined) return { agentId: existing, source: 'data-dir', path };
  const agentId = create();
  mkdirSync(dataDir, { recursive: true });
  // Write then rename: a crash mid-write never leaves a half id that the next start would use.
  const temp = `${path}.tmp`;
  writeFileSync(temp, `${agentId}\n`, { mode: 0o644 });
  renameSync(temp, path);
  return { agentId, source: 'generated', path };
}

function readIdFile(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const id = text.trim();
  return VALID_ID.test(id) ? id : undefined;
}
