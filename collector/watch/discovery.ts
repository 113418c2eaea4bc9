// Which resources the API server serves: whether a resource exists (a CRD may arrive or leave at
// any time), is namespaced, its kind, and its verbs. Asked again on every refresh; a group/version
// the server does not know is "missing", not an error.
//
// The aggregated documents first (`/api`, `/apis`: every group version in one document each,
// aggregated-discovery.ts), asked again with the ETag of the last answer: while nothing was
// installed or removed, a refresh is one or two requests answered 304, with no body to read or
// parse. Before, a refresh read the list of every group version the watches name (`/api/v1`,
// `/apis/apps/v1`: about 5 ms of an idle collector's CPU every 30 s). A server that answers the
// plain lists (older, or a proxy that drops the parameters), or whose aggregated answer fails, gets
// the read per group version, as before. A group version the aggregator marks Stale (its
// APIService is not answering) resolves as failed: its watch, if running, is left as it is.
import {
  AGGREGATED_DISCOVERY_ACCEPT,
  fromAggregated,
  isAggregated,
  type ApiResource,
} from './aggregated-discovery.js';
import type { KubeHttp } from './kube-http.js';
import { errorCode } from './reflector.js';

export interface ResourceRef {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
}

export interface ResolvedResource extends ResourceRef {
  readonly kind: string;
  readonly namespaced: boolean;
  readonly verbs: readonly string[];
}

interface ApiResourceList {
  resources?: ApiResource[];
}

/** An aggregated root's group versions ("v1", "apps/v1") -> resources; undefined: Stale. */
type GroupVersionIndex = ReadonlyMap<string, readonly ApiResource[] | undefined>;

/** The discovery roots: the core group's and every other group's. */
type Root = '/api' | '/apis';

export type Resolution =
  | { readonly state: 'available'; readonly resource: ResolvedResource }
  | { readonly state: 'missing'; readonly reason: string }
  | { readonly state: 'failed'; readonly reason: string };

export const refKey = (ref: ResourceRef): string =>
  `${ref.group === '' ? '' : `${ref.group}/`}${ref.version}/${ref.resource}`;

/**
 * Resolves resource refs against discovery: per `snapshot()`, one conditional request per root
 * the refs need (or, on a server without aggregated discovery, one per group version).
 */
export class Discovery {
  readonly #http: Pick<KubeHttp, 'getJson' | 'getJsonIfChanged'>;
  /** The last aggregated answer per root and its ETag, for the next refresh's If-None-Match. */
  readonly #aggregated = new Map<
    Root,
    { readonly etag: string; readonly index: GroupVersionIndex }
  >();

  constructor(http: Pick<KubeHttp, 'getJson' | 'getJsonIfChanged'>) {
    this.#http = http;
  }

  /** A resolver whose answers are cached until the next snapshot. */
  snapshot(signal: AbortSignal): (ref: ResourceRef) => Promise<Resolution> {
    const roots = new Map<Root, Promise<GroupVersionIndex | undefined>>();
    const lists = new Map<string, Promise<ApiResourceList | undefined>>();
    return async (ref) => {
      const groupVersion = ref.group === '' ? ref.version : `${ref.group}/${ref.version}`;
      const root: Root = ref.group === '' ? '/api' : '/apis';
      let aggregated = roots.get(root);
      if (aggregated === undefined) {
        // Not aggregated, or asking for it failed: the per-group-version read below decides.
        aggregated = this.#readRoot(root, signal).catch(() => undefined);
        roots.set(root, aggregated);
      }
      const index = await aggregated;
      if (index !== undefined) {
        if (!index.has(groupVersion)) {
          return { state: 'missing', reason: `the API server does not serve ${groupVersion}` };
        }
        const resources = index.get(groupVersion);
        if (resources === undefined) {
          return {
            state: 'failed',
            reason: `${groupVersion} is stale in aggregated discovery: the API service behind it is not answering`,
          };
        }
        return resolveIn(ref, groupVersion, resources);
      }
      return this.#readGroupVersion(lists, ref, groupVersion, signal);
    };
  }

  /** The plain list of one group version, read once per snapshot. */
  async #readGroupVersion(
    lists: Map<string, Promise<ApiResourceList | undefined>>,
    ref: ResourceRef,
    groupVersion: string,
    signal: AbortSignal,
  ): Promise<Resolution> {
    let list = lists.get(groupVersion);
    if (list === undefined) {
      const path = ref.group === '' ? `/api/${ref.version}` : `/apis/${groupVersion}`;
      list = this.#http.getJson({ path }, signal).then(
        (body) => body as ApiResourceList,
        (err: unknown) => {
          if (errorCode(err) === 404) return undefined;
          throw err;
        },
      );
      lists.set(groupVersion, list);
    }
    let body: ApiResourceList | undefined;
    try {
      body = await list;
    } catch (err: unknown) {
      return { state: 'failed', reason: err instanceof Error ? err.message : String(err) };
    }
    if (body === undefined) {
      return { state: 'missing', reason: `the API server does not serve ${groupVersion}` };
    }
    return resolveIn(ref, groupVersion, body.resources ?? []);
  }

  /** The root's aggregated index (unchanged: the last one), or undefined when not aggregated. */
  async #readRoot(root: Root, signal: AbortSignal): Promise<GroupVersionIndex | undefined> {
    const last = this.#aggregated.get(root);
    const answer = await this.#http.getJsonIfChanged(
      { path: root, accept: AGGREGATED_DISCOVERY_ACCEPT },
      last?.etag,
      signal,
    );
    if (!answer.changed) return last?.index;
    this.#aggregated.delete(root);
    if (!isAggregated(answer.body)) return undefined;
    const index = new Map<string, readonly ApiResource[] | undefined>();
    for (const { gv, resources } of fromAggregated(answer.body)) {
      const key = gv.group === '' ? gv.version : `${gv.group}/${gv.version}`;
      // A group version listed twice keeps its first answer.
      if (!index.has(key)) index.set(key, resources);
    }
    if (answer.etag !== undefined) this.#aggregated.set(root, { etag: answer.etag, index });
    return index;
  }
}

function resolveIn(
  ref: ResourceRef,
  groupVersion: string,
  resources: readonly ApiResource[],
): Resolution {
  const found = resources.find((r) => r.name === ref.resource);
  if (found === undefined) {
    return { state: 'missing', reason: `${groupVersion} has no resource "${ref.resource}"` };
  }
  return {
    state: 'available',
    resource: {
      ...ref,
      kind: found.kind ?? '',
      namespaced: found.namespaced === true,
      verbs: found.verbs ?? [],
    },
  };
}
