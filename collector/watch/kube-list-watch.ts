// The real ListWatch for any resource (core, apps, CRDs): paged lists and watches over
// KubeHttp, with the rule's selectors, optionally metadata only, and an idle watchdog. Every
// object passes the caller's transform before anyone holds it, so a cache keeps only what its
// users need.
import {
  ACCEPT_JSON,
  ACCEPT_METADATA,
  ACCEPT_METADATA_LIST,
  KubeRequestError,
  parseJson,
  type KubeHttp,
} from './kube-http.js';
import type { ListWatch, WatchEventType } from './list-watch.js';

/** A raw object as the API server sends it. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** What one watch covers. */
export interface WatchTarget {
  /** '' is the core group. */
  readonly group: string;
  readonly version: string;
  /** Plural, e.g. `deployments`. */
  readonly resource: string;
  readonly namespaced: boolean;
  /** '' is every namespace (or a cluster-scoped resource). */
  readonly namespace: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** PartialObjectMetadata only: the object's body (a Secret's data) never reaches us. */
  readonly metadataOnly?: boolean;
}

/** `v1` or `group/version`. */
export const apiVersionOf = (target: Pick<WatchTarget, 'group' | 'version'>): string =>
  target.group === '' ? target.version : `${target.group}/${target.version}`;

export function resourcePath(target: WatchTarget): string {
  const base = target.group === '' ? `/api/${target.version}` : `/apis/${apiVersionOf(target)}`;
  const scope =
    target.namespaced && target.namespace !== ''
      ? `/namespaces/${encodeURIComponent(target.namespace)}`
      : '';
  return `${base}${scope}/${target.resource}`;
}

/** The server ends each watch after about this long (jittered up to 1.5x). */
export const WATCH_TIMEOUT_SECONDS = 300;

export interface KubeListWatchOptions {
  /** No event or bookmark for this long ends the watch (it is then started again). */
  readonly idleMs?: number;
  readonly random?: () => number;
}

export function kubeListWatch<T>(
  http: Pick<KubeHttp, 'getJson' | 'stream'>,
  target: WatchTarget,
  transform: (object: KubeObject) => T,
  options: KubeListWatchOptions = {},
): ListWatch<T> {
  const path = resourcePath(target);
  const metadataOnly = target.metadataOnly === true;
  const listAccept = metadataOnly ? ACCEPT_METADATA_LIST : ACCEPT_JSON;
  const watchAccept = metadataOnly ? ACCEPT_METADATA : ACCEPT_JSON;
  const selectors = {
    labelSelector: nonEmpty(target.labelSelector),
    fieldSelector: nonEmpty(target.fieldSelector),
  };
  const random = options.random ?? Math.random;
  return {
    async list(signal, page) {
      const body = (await http.getJson(
        {
          path,
          accept: listAccept,
          query: {
            ...selectors,
            limit: page?.limit === undefined ? undefined : String(page.limit),
            continue: page?.continue,
          },
        },
        signal,
      )) as {
        kind?: string;
        metadata?: { resourceVersion?: string; continue?: string };
        items?: KubeObject[];
      };
      // List items carry no apiVersion/kind; the list's own kind names them.
      const kind = body.kind?.endsWith('List') === true ? body.kind.slice(0, -4) : undefined;
      const apiVersion = target.metadataOnly === true ? 'meta.k8s.io/v1' : apiVersionOf(target);
      const items = (body.items ?? []).map((item) => {
        item.apiVersion ??= apiVersion;
        if (kind !== undefined) item.kind ??= kind;
        return transform(item);
      });
      return {
        items,
        resourceVersion: body.metadata?.resourceVersion ?? '',
        continue: nonEmpty(body.metadata?.continue),
      };
    },
    async watch(resourceVersion, onEvent, signal) {
      const timeoutSeconds = Math.round(WATCH_TIMEOUT_SECONDS * (1 + random() / 2));
      const idleMs = options.idleMs ?? (timeoutSeconds + 60) * 1000;
      const watchdog = new AbortController();
      const stop = (): void => {
        watchdog.abort();
      };
      signal.addEventListener('abort', stop, { once: true });
      let idle = setTimeout(stop, idleMs);
      let failure: unknown;
      try {
        await http.stream(
          {
            path,
            accept: watchAccept,
            query: {
              ...selectors,
              watch: '1',
              resourceVersion,
              allowWatchBookmarks: 'true',
              timeoutSeconds: String(timeoutSeconds),
            },
          },
          watchdog.signal,
          (line) => {
            if (failure !== undefined) return;
            clearTimeout(idle);
            idle = setTimeout(stop, idleMs);
            const event = parseJson(line, path) as { type?: WatchEventType; object?: KubeObject };
            if (event.type === 'ERROR') {
              const status = event.object as { code?: number; message?: string } | undefined;
              failure = new KubeRequestError(status?.code ?? 500, status?.message ?? 'watch error');
              watchdog.abort();
              return;
            }
            if (event.type === undefined || event.object === undefined) return;
            try {
              onEvent(event.type, transform(event.object));
            } catch (err: unknown) {
              failure = err;
              watchdog.abort();
            }
          },
        );
      } finally {
        clearTimeout(idle);
        signal.removeEventListener('abort', stop);
      }
      if (failure !== undefined && !signal.aborted) {
        throw failure instanceof Error ? failure : new Error('watch event handler failed');
      }
    },
  };
}

function nonEmpty(text: string | undefined): string | undefined {
  return text === undefined || text === '' ? undefined : text;
}
