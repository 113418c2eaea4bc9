// The object the collector's minted token is bound to: an empty Opaque Secret owned by the agent
// Pod. The API server refuses to bind a token for the collector's ServiceAccount to a Pod that runs
// as the executor's, but it binds one to a Secret, and it refuses a Secret-bound token as soon as
// that Secret is gone or has another uid (pkg/serviceaccount/claims.go). The garbage collector
// deletes the Secret with its owner, the Pod: so the token dies with the Pod, not at its expiry.
//
// The executor may create Secrets (RBAC cannot limit `create` by name) and nothing else on them:
// no get, list, watch, update or delete. The chart's ValidatingAdmissionPolicy narrows `create`
// to exactly this object: type Opaque, no data, named after the Pod its own token is bound to,
// owned by that Pod (docs/security.md, "Identities").
import { ApiException, type CoreV1Api } from '@kubernetes/client-node';

/** Appended to the Pod's name: the binding Secret of Pod `p` is `p-token-binding`. */
export const BINDING_SECRET_SUFFIX = '-token-binding';

/** What the token is bound to; `uid` when this executor created it (absent: found it there). */
export interface BindingSecret {
  readonly name: string;
  readonly uid?: string;
}

export interface BindingSecretOptions {
  readonly namespace: string;
  /** The agent Pod, its owner: the Downward API's metadata.name and metadata.uid. */
  readonly podName: string;
  readonly podUid: string;
  /** Labels for people listing the namespace (the release's instance label). */
  readonly labels?: Readonly<Record<string, string>>;
}

export function bindingSecretName(podName: string): string {
  return `${podName}${BINDING_SECRET_SUFFIX}`;
}

/**
 * Creates the binding Secret, owned by the Pod. When it exists already (the executor container
 * restarted in the same Pod) it is used by name: the executor may not read Secrets, and the API
 * server takes the uid from the Secret it finds when the TokenRequest names none.
 */
export async function ensureBindingSecret(
  core: CoreV1Api,
  options: BindingSecretOptions,
): Promise<BindingSecret> {
  const name = bindingSecretName(options.podName);
  try {
    const created = await core.createNamespacedSecret({
      namespace: options.namespace,
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: {
          name,
          ...(options.labels === undefined ? {} : { labels: { ...options.labels } }),
          // No blockOwnerDeletion: it would need a grant on the Pod, and nothing needs to wait.
          ownerReferences: [
            { apiVersion: 'v1', kind: 'Pod', name: options.podName, uid: options.podUid },
          ],
        },
      },
    });
    const uid = created.metadata?.uid;
    return uid === undefined ? { name } : { name, uid };
  } catch (err: unknown) {
    if (err instanceof ApiException && err.code === 409) return { name };
    throw err;
  }
}

/**
 * True when a TokenRequest failed because its bound Secret is gone (404) or was replaced (409, uid
 * mismatch): the minter creates the Secret again before the next try.
 */
export function bindingLost(err: unknown): boolean {
  return err instanceof ApiException && (err.code === 404 || err.code === 409);
}
