// The aggregated discovery documents (apidiscovery.k8s.io APIGroupDiscoveryList, API servers:
// beta and on since 1.27, GA in 1.30): `/api` and `/apis`, asked for with this Accept, hold every
// group version's resources in one document each, with an ETag. Read here for the two users of
// discovery: the state and events watches (watch/discovery.ts) and the capability catalog
// (catalog/discovery.ts).

/**
 * The aggregated document first (v2, then v2beta1 for 1.27-1.29), else the plain lists. Both
 * aggregated versions carry the fields read here the same way.
 */
export const AGGREGATED_DISCOVERY_ACCEPT = [
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
  'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList',
  'application/json',
].join(',');

/** One resource as a plain APIResourceList lists it (the fields read here). */
export interface ApiResource {
  name?: string;
  kind?: string;
  namespaced?: boolean;
  verbs?: string[];
}

/** apidiscovery.k8s.io APIGroupDiscoveryList, the fields read here. */
interface GroupDiscoveryList {
  kind: 'APIGroupDiscoveryList';
  items?: {
    metadata?: { name?: string };
    versions?: {
      version?: string;
      freshness?: string;
      resources?: {
        resource?: string;
        responseKind?: { kind?: string };
        scope?: string;
        verbs?: string[];
      }[];
    }[];
  }[];
}

export interface GroupVersion {
  readonly group: string;
  readonly version: string;
}

export interface GroupVersionAnswer {
  readonly gv: GroupVersion;
  /** undefined: this group version failed discovery (the aggregator marks it Stale). */
  readonly resources: readonly ApiResource[] | undefined;
}

export function isAggregated(document: unknown): document is GroupDiscoveryList {
  return (
    typeof document === 'object' &&
    document !== null &&
    (document as { kind?: unknown }).kind === 'APIGroupDiscoveryList'
  );
}

/** An aggregated document's group versions, each group's preferred (first listed) first. */
export function fromAggregated(list: GroupDiscoveryList): GroupVersionAnswer[] {
  const out: GroupVersionAnswer[] = [];
  for (const group of list.items ?? []) {
    const name = group.metadata?.name ?? '';
    for (const entry of group.versions ?? []) {
      const version = entry.version ?? '';
      if (version === '') continue;
      const gv = { group: name, version };
      if (entry.freshness === 'Stale') {
        out.push({ gv, resources: undefined });
        continue;
      }
      const resources = (entry.resources ?? []).map((r): ApiResource => ({
        ...(r.resource === undefined ? {} : { name: r.resource }),
        ...(r.responseKind?.kind === undefined ? {} : { kind: r.responseKind.kind }),
        namespaced: r.scope === 'Namespaced',
        ...(r.verbs === undefined ? {} : { verbs: r.verbs }),
      }));
      out.push({ gv, resources });
    }
  }
  return out;
}
