// Our own pod reflector (client-node 1.x's informer stops on errors and spins on restarts):
// list, then watch from the list's resourceVersion with bookmarks and a server-side timeout;
// a 410 relists; other errors back off with jitter; a 403 is reported once per episode and
// retried only at the maximum backoff, never in a tight loop.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';

/** What the reflector needs from the API server: a narrow seam, faked in tests. */
export interface PodListWatch {
  list(signal: AbortSignal): Promise<{ items: V1Pod[]; resourceVersion: string }>;
  /**
   * Watches from `resourceVersion`; calls `onEvent` per event and resolves when the watch ends
   * (server timeout or abort). Rejects with an error carrying `code` (410, 403, ...).
   */
  watch(
    resourceVersion: string,
    onEvent: (type: string, object: V1Pod) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

export interface PodReflectorHandlers {
  /** The full set after a (re)list: pods missing from it are gone. */
  replace(pods: readonly V1Pod[]): void;
  upsert(pod: V1Pod): void;
  remove(pod: V1Pod): void;
  /** Forbidden: the source is not up until a list succeeds again. */
  forbidden(err: unknown): void;
}

export const INITIAL_BACKOFF_MS = 1_000;
export const MAX_BACKOFF_MS = 30_000;

export function errorCode(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, statusCode } = err as { code?: unknown; statusCode?: unknown };
  if (typeof code === 'number') return code;
  if (typeof statusCode === 'number') return statusCode;
  return undefined;
}

class GoneError extends Error {
  readonly code = 410;
}

const isDenied = (code: number | undefined): boolean => code === 403 || code === 401;

/** Read through a call: TypeScript narrows `signal.aborted` inside the loop otherwise. */
const isAborted = (signal: AbortSignal): boolean => signal.aborted;

/** Applies one watch event; returns the new resourceVersion, if the event carries one. */
function applyEvent(type: string, pod: V1Pod, handlers: PodReflectorHandlers): string | undefined {
  if (type === 'ERROR') throw new GoneError('watch error event');
  if (type === 'DELETED') handlers.remove(pod);
  else if (type !== 'BOOKMARK') handlers.upsert(pod);
  return pod.metadata?.resourceVersion;
}

/** Runs until `signal` aborts. `random` gives the jitter (injected for tests). */
export async function runPodReflector(
  api: PodListWatch,
  handlers: PodReflectorHandlers,
  deps: { clock: Clock; logger: Logger; signal: AbortSignal; random?: () => number },
): Promise<void> {
  const { clock, logger, signal } = deps;
  const random = deps.random ?? Math.random;
  const state = { backoff: INITIAL_BACKOFF_MS, wasForbidden: false };
  let resourceVersion: string | undefined;
  while (!signal.aborted) {
    try {
      if (resourceVersion === undefined) {
        const listed = await api.list(signal);
        handlers.replace(listed.items);
        resourceVersion = listed.resourceVersion;
        state.wasForbidden = false;
      }
      const progress = { events: 0 };
      await api.watch(
        resourceVersion,
        (type, pod) => {
          progress.events++;
          resourceVersion = applyEvent(type, pod, handlers) ?? resourceVersion;
        },
        signal,
      );
      if (progress.events > 0) state.backoff = INITIAL_BACKOFF_MS;
      // A normal end (the server's timeoutSeconds): re-watch from the last version at once.
    } catch (err: unknown) {
      if (isAborted(signal)) return;
      const code = errorCode(err);
      if (code === 410 || isDenied(code)) resourceVersion = undefined;
      if (code === 410) {
        logger.info('pod watch expired, relisting');
        continue;
      }
      await backOff(err, code, { state, handlers, logger, clock, signal, random });
    }
  }
}

interface BackOffContext {
  readonly state: { backoff: number; wasForbidden: boolean };
  readonly handlers: PodReflectorHandlers;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly signal: AbortSignal;
  readonly random: () => number;
}

/** Reports the failure (a denial once per episode) and sleeps with jitter. */
async function backOff(err: unknown, code: number | undefined, ctx: BackOffContext): Promise<void> {
  const { state } = ctx;
  const denied = isDenied(code);
  if (denied && !state.wasForbidden) ctx.handlers.forbidden(err);
  if (!denied) ctx.logger.warn({ err, backoffMs: state.backoff }, 'pod watch failed');
  state.wasForbidden = denied;
  // Denied: relist only after the longest backoff, never in a loop.
  if (denied) state.backoff = MAX_BACKOFF_MS;
  const jittered = state.backoff * (0.8 + 0.4 * ctx.random());
  await ctx.clock.sleep(jittered, ctx.signal).catch(() => undefined);
  state.backoff = Math.min(MAX_BACKOFF_MS, state.backoff * 2);
}
