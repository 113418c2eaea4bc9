// What never leaves the cluster through a live query, whatever the view: managedFields and the
// last-applied annotation (for a Secret written with kubectl apply, a second full copy of it,
// values included), on every object; and, with redaction on, a Secret's data and stringData.

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Strips what the metadata must not carry, in place. */
export function sanitizeMetadata(metadata: unknown): void {
  if (!isObject(metadata)) return;
  delete metadata['managedFields'];
  const annotations = metadata['annotations'];
  if (isObject(annotations) && LAST_APPLIED_ANNOTATION in annotations) {
    Reflect.deleteProperty(annotations, LAST_APPLIED_ANNOTATION);
    if (Object.keys(annotations).length === 0) delete metadata['annotations'];
  }
}

/**
 * Sanitizes one object in place. `resource` is the plural the query named: a Secret is known by
 * it (as the Go agent does), not by a kind field the object might lack.
 */
export function sanitizeObject(
  object: unknown,
  options: { readonly resource: string; readonly redactSecrets: boolean },
): void {
  if (!isObject(object)) return;
  sanitizeMetadata(object['metadata']);
  if (options.redactSecrets && (options.resource === 'secrets' || object['kind'] === 'Secret')) {
    delete object['data'];
    delete object['stringData'];
  }
}
