// Which resources the API server serves, per group/version (`/api/v1`, `/apis/g/v`): whether a
// resource exists (a CRD may arrive or leave at any time), is namespaced, its kind, and its
// verbs. Asked again on every refresh; a group/version the server does not know is "missing",
// not an error.
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
  resources?: { name?: string; kind?: string; namespaced?: boolean; verbs?: string[] }[];
}

export type Resolution =
  | { readonly state: 'available'; readonly resource: ResolvedResource }
  | { readonly state: 'missing'; readonly reason: string }
  | { readonly state: 'failed'; readonly reason: string };

export const refKey = (ref: ResourceRef): string =>
  `${ref.group === '' ? '' : `${ref.group}/`}${ref.version}/${ref.resource}`;

/** Resolves resource refs against discovery; one request per group/version per `snapshot()`. */
export class Discovery {
  readonly #http: Pick<KubeHttp, 'getJson'>;

  constructor(http: Pick<KubeHttp, 'getJson'>) {
    this.#http = http;
  }

  /** A resolver whose answers are cached until the next snapshot. */
  snapshot(signal: AbortSignal): (ref: ResourceRef) => Promise<Resolution> {
    const lists = new Map<string, Promise<ApiResourceList | undefined>>();
    return async (ref) => {
      const groupVersion = ref.group === '' ? ref.version : `${ref.group}/${ref.version}`;
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
      const found = body.resources?.find((r) => r.name === ref.resource);
      if (found === undefined) {
        return {
          state: 'missing',
          reason: `${groupVersion} has no resource "${ref.resource}"`,
        };
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
    };
  }
}
