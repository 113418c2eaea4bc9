// The boot sweep: helpers a previous executor left behind (killed before it could delete them)
// are root shells on nodes that nobody holds. At start, the executor deletes this release's
// helpers from exec.node.namespace and the release namespace, and only those: the selector names
// this release and the node-console session label, so other releases' helpers and any other Pod
// are never touched. Helpers in any other namespace end on their activeDeadlineSeconds.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { deleteHelper } from './helper-lifecycle.js';
import {
  labelValue,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  RELEASE_LABEL,
  SESSION_LABEL,
} from './helper-pod.js';

/** The label selector of one release's helpers (every session). */
export function helperSelector(release: string): string {
  return [
    `${MANAGED_BY_LABEL}=${MANAGED_BY}`,
    `${RELEASE_LABEL}=${labelValue(release)}`,
    SESSION_LABEL,
  ].join(',');
}

export interface SweepOptions {
  readonly namespaces: readonly string[];
  readonly release: string;
  /** Helpers this executor created already (a console opened during the sweep): kept. */
  readonly keep: (namespace: string, name: string) => boolean;
}

export interface SweepResult {
  readonly deleted: readonly string[];
  readonly failed: readonly string[];
}

export async function sweepOrphanHelpers(
  core: CoreV1Api,
  options: SweepOptions,
  logger: Logger,
): Promise<SweepResult> {
  const deleted: string[] = [];
  const failed: string[] = [];
  const selector = helperSelector(options.release);
  for (const namespace of new Set(options.namespaces)) {
    let names: string[];
    try {
      const list = await core.listNamespacedPod({ namespace, labelSelector: selector });
      names = list.items.map((pod) => pod.metadata?.name ?? '').filter((name) => name !== '');
    } catch (err: unknown) {
      logger.warn(
        { namespace, err: err instanceof Error ? err.message : String(err) },
        'boot sweep: cannot list node-console helpers (orphans there end on activeDeadlineSeconds)',
      );
      failed.push(`${namespace}/*`);
      continue;
    }
    for (const name of names) {
      if (options.keep(namespace, name)) continue;
      try {
        await deleteHelper(core, namespace, name);
        deleted.push(`${namespace}/${name}`);
      } catch (err: unknown) {
        logger.warn(
          { namespace, pod: name, err: err instanceof Error ? err.message : String(err) },
          'boot sweep: cannot delete an orphan node-console helper',
        );
        failed.push(`${namespace}/${name}`);
      }
    }
  }
  logger.info({ deleted, failed, selector }, 'boot sweep of node-console helpers done');
  return { deleted, failed };
}
