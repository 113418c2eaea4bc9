// The collector's Kubernetes identity, minted by the executor. A Pod has one ServiceAccount (the
// executor's, once a privileged gate is on), so the collector's token cannot be projected: the
// executor asks TokenRequest for the collector's ServiceAccount (its RBAC allows that one account
// only) and refreshes it before expiry. The API server refuses to bind a token to a Pod that runs
// under another ServiceAccount ("cannot bind token for serviceaccount ... to pod running with
// different serviceaccount name"), so the token is bound to a Secret the Pod owns
// (token-binding.ts): the garbage collector deletes that Secret with the Pod, and the API server
// refuses the token from then on. It also lives 10 minutes at most, the bound for the case where
// the Secret outlives the Pod (the Pod deleted with orphan propagation, the garbage collector
// down). docs/security.md discusses the choice. The files land in a volume the collector mounts
// read-only, 0440 under the shared group.
import { randomBytes } from 'node:crypto';
import { chmod, chown, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { bindingLost, ensureBindingSecret, type BindingSecret } from './token-binding.js';
import type { TokenLivenessProbe } from './token-liveness.js';

/**
 * The lifetime the executor asks for: the API server's minimum (10 minutes). The token dies with
 * its binding Secret, that is with the Pod; this bounds it when the Secret outlives the Pod. The
 * API server may lengthen a short request only when its --service-account-extend-token-expiration
 * applies to Pod-bound tokens, which these are not.
 */
export const MINTED_TOKEN_SECONDS = 600;
/** Refresh once this share of the token's lifetime has passed (the kubelet uses 80 % too). */
const REFRESH_AT_SHARE = 0.8;
/** After a failed mint, the next try waits this long (doubling, capped). */
const RETRY_INITIAL_MS = 1_000;
const RETRY_MAX_MS = 60_000;
/**
 * How often the minted token is checked between refreshes (token-liveness.ts): the longest the
 * collector stays locked out when its binding Secret is deleted, before the file is replaced.
 */
export const LIVENESS_CHECK_MS = 15_000;

export interface TokenMinterOptions {
  /** The collector's ServiceAccount, in the Pod's namespace. */
  readonly serviceAccount: string;
  readonly namespace: string;
  /** The agent Pod: it owns the Secret the token is bound to (Downward API name and uid). */
  readonly podName: string;
  readonly podUid: string;
  /** Labels of the binding Secret (the release's instance label). */
  readonly bindingLabels?: Readonly<Record<string, string>>;
  /** Where the files go (the executor's mount of the collector's token volume). */
  readonly tokenDir: string;
  /** The group that may read them (the Pod's fsGroup); absent: owner only. */
  readonly readerGroup?: number;
  /** ca.crt of the cluster, copied next to the token so in-cluster config works unchanged. */
  readonly caCert: string;
  readonly expirationSeconds?: number;
  /** Between refreshes, the token is checked this often (LIVENESS_CHECK_MS by default). */
  readonly livenessCheckMs?: number;
}

export interface TokenMinterDeps {
  readonly core: CoreV1Api;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Absent: no check between refreshes (a refused token waits for the next refresh). */
  readonly liveness?: TokenLivenessProbe;
}

export interface MintedToken {
  readonly token: string;
  /** Milliseconds since the epoch. */
  readonly expiresAtMs: number;
}

/** One TokenRequest for the collector's ServiceAccount, bound to the binding Secret. */
export async function mintCollectorToken(
  core: CoreV1Api,
  options: Pick<TokenMinterOptions, 'serviceAccount' | 'namespace' | 'expirationSeconds'> & {
    readonly binding: BindingSecret;
  },
): Promise<MintedToken> {
  const answer = await core.createNamespacedServiceAccountToken({
    name: options.serviceAccount,
    namespace: options.namespace,
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: [],
        expirationSeconds: options.expirationSeconds ?? MINTED_TOKEN_SECONDS,
        boundObjectRef: {
          apiVersion: 'v1',
          kind: 'Secret',
          name: options.binding.name,
          // The uid this executor created it with: a Secret replaced since is refused (409).
          ...(options.binding.uid === undefined ? {} : { uid: options.binding.uid }),
        },
      },
    },
  });
  const token = answer.status?.token;
  const expires = answer.status?.expirationTimestamp;
  if (token === undefined || token === '' || expires === undefined) {
    throw new Error('TokenRequest answered without a token or an expiry');
  }
  return { token, expiresAtMs: new Date(expires).getTime() };
}

/**
 * Writes one file so that a reader never sees it half-written and a file planted at a temporary
 * name is never followed: a fresh random name opened with O_CREAT|O_EXCL (no symlink is
 * followed), its mode and group set before a byte is written, then renamed over the old file.
 */
export async function writeFileAtomically(
  dir: string,
  name: string,
  content: string,
  readerGroup: number | undefined,
): Promise<void> {
  const temporary = join(dir, `.${name}.${randomBytes(8).toString('hex')}`);
  const handle = await open(temporary, 'wx', 0o400);
  try {
    if (readerGroup !== undefined) await chown(temporary, -1, readerGroup);
    await chmod(temporary, readerGroup === undefined ? 0o400 : 0o440);
    await handle.writeFile(content);
    await handle.sync();
  } catch (err: unknown) {
    await handle.close();
    await unlink(temporary).catch(() => undefined);
    throw err;
  }
  await handle.close();
  await rename(temporary, join(dir, name));
}

/** When to mint again: at 80 % of the lifetime, at the latest one minute before expiry. */
export function refreshDelayMs(mintedAtMs: number, expiresAtMs: number): number {
  const lifetime = expiresAtMs - mintedAtMs;
  return Math.max(0, Math.min(lifetime * REFRESH_AT_SHARE, lifetime - 60_000));
}

export function createTokenMinter(options: TokenMinterOptions, deps: TokenMinterDeps): Service {
  const logger = deps.logger.child({
    component: 'token-minter',
    serviceAccount: options.serviceAccount,
  });
  const stop = new AbortController();
  let loop: Promise<void> | undefined;

  let binding: BindingSecret | undefined;
  /** The token in the file now, which the liveness check asks about. */
  let current: MintedToken | undefined;
  const livenessMs = options.livenessCheckMs ?? LIVENESS_CHECK_MS;

  const mintAndWrite = async (): Promise<MintedToken> => {
    binding ??= await ensureBindingSecret(deps.core, {
      namespace: options.namespace,
      podName: options.podName,
      podUid: options.podUid,
      ...(options.bindingLabels === undefined ? {} : { labels: options.bindingLabels }),
    });
    let minted: MintedToken;
    try {
      minted = await mintCollectorToken(deps.core, { ...options, binding });
    } catch (err: unknown) {
      // The Secret was deleted or replaced: create it again before the next try.
      if (bindingLost(err)) binding = undefined;
      throw err;
    }
    await writeFileAtomically(options.tokenDir, 'token', minted.token, options.readerGroup);
    current = minted;
    logger.info(
      {
        expiresAt: new Date(minted.expiresAtMs).toISOString(),
        pod: options.podName,
        boundToSecret: binding.name,
      },
      'collector token minted',
    );
    return minted;
  };

  /**
   * True when the API server refuses the token in place before its refresh point: its binding
   * Secret was deleted or replaced. The Secret is then created again (or found) before the mint.
   */
  const tokenRefused = async (signal: AbortSignal): Promise<boolean> => {
    if (deps.liveness === undefined || current === undefined) return false;
    const verdict = await deps.liveness.check(current.token, signal);
    if (verdict !== 'refused') return false;
    logger.warn(
      { boundToSecret: binding?.name, expiresAt: new Date(current.expiresAtMs).toISOString() },
      "the API server refuses the collector's token before its expiry (its binding Secret was " +
        'deleted or replaced): creating the Secret again and minting a new token',
    );
    binding = undefined;
    return true;
  };

  /**
   * Mints again at each refresh point, and at once when a liveness check finds the token refused;
   * after a failure, retries with a doubling delay.
   */
  const run = async (signal: AbortSignal, nextAtMs: number) => {
    let next = nextAtMs;
    let retryMs = RETRY_INITIAL_MS;
    let nextCheck = deps.clock.now() + livenessMs;
    for (;;) {
      const checking = deps.liveness !== undefined && nextCheck < next;
      try {
        const wakeAt = checking ? nextCheck : next;
        await deps.clock.sleep(Math.max(0, wakeAt - deps.clock.now()), signal);
      } catch {
        return; // aborted: the executor is stopping
      }
      if (checking) {
        nextCheck = deps.clock.now() + livenessMs;
        if (!(await tokenRefused(signal))) continue;
        if (signal.aborted) return;
      }
      const mintedAtMs = deps.clock.now();
      try {
        const minted = await mintAndWrite();
        next = mintedAtMs + refreshDelayMs(mintedAtMs, minted.expiresAtMs);
        nextCheck = deps.clock.now() + livenessMs;
        retryMs = RETRY_INITIAL_MS;
      } catch (err: unknown) {
        // The token in place stays until it expires; the collector keeps working meanwhile.
        logger.warn({ err, retryInMs: retryMs }, 'minting the collector token failed');
        next = deps.clock.now() + retryMs;
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
      }
    }
  };

  return {
    name: 'token-minter',
    async start(signal) {
      signal.addEventListener(
        'abort',
        () => {
          stop.abort();
        },
        { once: true },
      );
      await writeFileAtomically(options.tokenDir, 'ca.crt', options.caCert, options.readerGroup);
      await writeFileAtomically(
        options.tokenDir,
        'namespace',
        options.namespace,
        options.readerGroup,
      );
      // The first token is minted before start resolves when the API server answers; if it
      // does not, the loop keeps trying and the collector waits for its token file.
      let nextAtMs = deps.clock.now() + RETRY_INITIAL_MS;
      try {
        const mintedAtMs = deps.clock.now();
        const first = await mintAndWrite();
        nextAtMs = mintedAtMs + refreshDelayMs(mintedAtMs, first.expiresAtMs);
      } catch (err: unknown) {
        logger.warn({ err }, 'minting the first collector token failed; retrying');
      }
      loop = run(stop.signal, nextAtMs);
    },
    async close() {
      stop.abort();
      await loop;
      deps.liveness?.close();
    },
  };
}
