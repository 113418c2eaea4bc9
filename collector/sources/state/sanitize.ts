// What leaves the cluster of a watched object (seed README, "Secret handling"; reference 5):
// managedFields and the kubectl last-applied annotation always go, from every object (for a
// Secret applied with kubectl, that annotation is a second copy of every value); a Secret's
// data and stringData go when redact_secrets is on.
import type { KubeObject } from '../../watch/kube-list-watch.js';

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

export interface SanitizeOptions {
  /** Strip data/stringData from Secrets (core group `secrets`). */
  readonly redactSecrets: boolean;
}

/** Whether this group/resource is the core Secret. */
export const isSecretResource = (group: string, resource: string): boolean =>
  group === '' && resource === 'secrets';

/**
 * Sanitizes in place and returns the object. The raw object was just parsed from the wire; on a
 * shared watch (collector/watch/shared-watch.ts) the other users of the same pods (the log source,
 * the lifecycle deriver) see the same object, which is safe because what this removes
 * (managedFields, the last-applied annotation, a Secret's data) is nothing they read.
 */
export function sanitizeObject(
  object: KubeObject,
  resource: { readonly group: string; readonly resource: string },
  options: SanitizeOptions,
): KubeObject {
  const metadata = object.metadata;
  if (metadata !== undefined) {
    delete metadata['managedFields'];
    const annotations = metadata.annotations;
    if (annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations) {
      const others = Object.fromEntries(
        Object.entries(annotations).filter(([key]) => key !== LAST_APPLIED_ANNOTATION),
      );
      if (Object.keys(others).length === 0) delete metadata.annotations;
      else metadata.annotations = others;
    }
  }
  if (options.redactSecrets && isSecretResource(resource.group, resource.resource)) {
    delete object['data'];
    delete object['stringData'];
  }
  return object;
}
