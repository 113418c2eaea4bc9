// The collector's one list/watch loop, for every resource (client-node 1.x's informer stops on
// errors, spins on restarts and has no bookmarks; reference D.4): list page by page, then watch
// from the list's resourceVersion with bookmarks and a server-side timeout. A 410 (an expired
// version, or an expired continue token mid-list) relists at once; every other error backs off
// with jitter, doubling to a cap; a 403/401 is reported once per episode, naming the verb the
// API server refused, and retried only at the cap, never in a tight loop.
import type { Logger } from 'pino';
import type { Clock } from '../../shared/clock.js';
import type { ListPage, ListWatch } from './list-watch.js';

export type { ListWatch, ListPage, WatchEventType } from './list-watch.js';

export interface ReflectorHandlers<T> {
  /** The full set after a (re)list: objects missing from it are gone. */
  replace(objects: readonly T[]): void;
  upsert(object: T): void;
  remove(object: T): void;
  /** Forbidden (403/401): not up until a list succeeds again. `verb` is the refused one. */
  forbidden(err: unknown, verb: 'list' | 'watch'): void;
  /** Each restart of the watch and why (the watch_restarts metric). */
  restarted?(cause: RestartCause): void;
  /** Any other failure (it is retried with backoff): e.g. a 400 for a malformed selector. */
  failed?(err: unknown, verb: 'list' | 'watch'): void;
}

/**
 * Something that feeds a reflector's handlers until `signal` aborts: a reflector of its own
 * (reflectorFeed) or a user's share of a watch (shared-watch.ts).
 */
export interface WatchFeed<T> {
  run(handlers: ReflectorHandlers<T>, signal: AbortSignal): Promise<void>;
}

/** Why a watch was started again. */
export type RestartCause = 'expired' | 'timeout' | 'error' | 'forbidden';

export const INITIAL_BACKOFF_MS = 1_000;
export const MAX_BACKOFF_MS = 30_000;
/** Objects per list page: a 5000-pod relist never holds one 100 MB response. */
export const LIST_PAGE_SIZE = 500;

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

/** A failure and the verb the API server refused it for. */
class VerbError extends Error {
  readonly verb: 'list' | 'watch';
  readonly original: unknown;
  constructor(verb: 'list' | 'watch', original: unknown) {
    super(original instanceof Error ? original.message : String(original));
    this.verb = verb;
    this.original = original;
  }
}

const isDenied = (code: number | undefined): boolean => code === 403 || code === 401;

/** Read through a call: TypeScript narrows `signal.aborted` inside the loop otherwise. */
const isAborted = (signal: AbortSignal): boolean => signal.aborted;

/** Applies one watch event; returns the new resourceVersion, if the event carries one. */
function applyEvent<T>(
  type: string,
  object: T,
  resourceVersionOf: (object: T) => string | undefined,
  handlers: ReflectorHandlers<T>,
): string | undefined {
  if (type === 'ERROR') throw new GoneError('watch error event');
  if (type === 'DELETED') handlers.remove(object);
  else if (type !== 'BOOKMARK') handlers.upsert(object);
  return resourceVersionOf(object);
}

const defaultResourceVersion = (object: unknown): string | undefined =>
  (object as { metadata?: { resourceVersion?: string } } | undefined)?.metadata?.resourceVersion;

export interface ReflectorDeps<T> {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly signal: AbortSignal;
  /** Jitter source (injected for tests). */
  readonly random?: () => number;
  /** Where a (transformed) object keeps its resourceVersion; default `metadata.resourceVersion`. */
  readonly resourceVersionOf?: (object: T) => string | undefined;
  readonly pageSize?: number;
}

/**
 * Every page of one list. A 410 on a continue token (it expired mid-list) rejects like any 410:
 * the loop then lists again from the first page.
 */
async function listAll<T>(
  api: ListWatch<T>,
  signal: AbortSignal,
  pageSize: number,
): Promise<{ items: T[]; resourceVersion: string }> {
  const items: T[] = [];
  let page: ListPage<T> | undefined;
  do {
    page = await api.list(signal, { limit: pageSize, continue: page?.continue });
    for (const item of page.items) items.push(item);
  } while (page.continue !== undefined && page.continue !== '');
  return { items, resourceVersion: page.resourceVersion };
}

/** A feed with a reflector of its own over `api`. */
export function reflectorFeed<T>(
  api: ListWatch<T>,
  deps: Omit<ReflectorDeps<T>, 'signal'>,
): WatchFeed<T> {
  return {
    run: (handlers, signal) => runReflector(api, handlers, { ...deps, signal }),
  };
}

/** Runs until `signal` aborts. */
export async function runReflector<T>(
  api: ListWatch<T>,
  handlers: ReflectorHandlers<T>,
  deps: ReflectorDeps<T>,
): Promise<void> {
  const { clock, logger, signal } = deps;
  const random = deps.random ?? Math.random;
  const state: LoopState = {
    backoff: INITIAL_BACKOFF_MS,
    wasForbidden: false,
    resourceVersion: undefined,
  };
  while (!signal.aborted) {
    try {
      await listAndWatch(api, handlers, deps, state);
    } catch (err: unknown) {
      if (isAborted(signal)) return;
      const { original, verb } = unwrap(err);
      const code = errorCode(original);
      if (code === 410 || isDenied(code)) state.resourceVersion = undefined;
      if (code === 410) {
        logger.info({ verb }, 'watch expired (410 Gone), relisting');
        handlers.restarted?.('expired');
        continue;
      }
      handlers.restarted?.(isDenied(code) ? 'forbidden' : 'error');
      await backOff(original, verb, code, { state, handlers, logger, clock, signal, random });
    }
  }
}

interface LoopState {
  backoff: number;
  wasForbidden: boolean;
  /** Where the next watch resumes; undefined: list first. */
  resourceVersion: string | undefined;
}

function unwrap(err: unknown): { original: unknown; verb: 'list' | 'watch' } {
  return err instanceof VerbError
    ? { original: err.original, verb: err.verb }
    : { original: err, verb: 'watch' };
}

/** One round: a list when there is no version to resume from, then one watch until it ends. */
async function listAndWatch<T>(
  api: ListWatch<T>,
  handlers: ReflectorHandlers<T>,
  deps: ReflectorDeps<T>,
  state: LoopState,
): Promise<void> {
  const { signal } = deps;
  const versionOf = deps.resourceVersionOf ?? defaultResourceVersion;
  if (state.resourceVersion === undefined) {
    const listed = await listAll(api, signal, deps.pageSize ?? LIST_PAGE_SIZE).catch(
      (err: unknown) => {
        throw new VerbError('list', err);
      },
    );
    handlers.replace(listed.items);
    state.resourceVersion = listed.resourceVersion;
    state.wasForbidden = false;
  }
  const progress = { events: 0 };
  await api
    .watch(
      state.resourceVersion,
      (type, object) => {
        progress.events++;
        state.resourceVersion =
          applyEvent(type, object, versionOf, handlers) ?? state.resourceVersion;
      },
      signal,
    )
    .catch((err: unknown) => {
      throw err instanceof GoneError ? err : new VerbError('watch', err);
    });
  if (progress.events > 0) state.backoff = INITIAL_BACKOFF_MS;
  // A normal end (the server's timeoutSeconds): re-watch from the last version at once.
  if (!isAborted(signal)) handlers.restarted?.('timeout');
}

interface BackOffContext<T> {
  readonly state: { backoff: number; wasForbidden: boolean };
  readonly handlers: ReflectorHandlers<T>;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly signal: AbortSignal;
  readonly random: () => number;
}

/** Reports the failure (a denial once per episode) and sleeps with jitter. */
async function backOff<T>(
  err: unknown,
  verb: 'list' | 'watch',
  code: number | undefined,
  ctx: BackOffContext<T>,
): Promise<void> {
  const { state } = ctx;
  const denied = isDenied(code);
  if (denied && !state.wasForbidden) ctx.handlers.forbidden(err, verb);
  if (!denied) {
    ctx.handlers.failed?.(err, verb);
    if (code === 404 && state.backoff < MAX_BACKOFF_MS) {
      // Not served (any more): a removed CRD or version. Its owner hears of it through `failed`
      // and decides (the state source stops the watch after asking discovery); not an error
      // until the backoff has reached its longest, when it is reported as any failure.
      ctx.logger.info({ err, verb, backoffMs: state.backoff }, 'watch target not found (404)');
    } else {
      ctx.logger.warn({ err, verb, backoffMs: state.backoff }, 'watch failed');
    }
  }
  state.wasForbidden = denied;
  // Denied: relist only after the longest backoff, never in a loop.
  if (denied) state.backoff = MAX_BACKOFF_MS;
  const jittered = state.backoff * (0.8 + 0.4 * ctx.random());
  await ctx.clock.sleep(jittered, ctx.signal).catch(() => undefined);
  state.backoff = Math.min(MAX_BACKOFF_MS, state.backoff * 2);
}
