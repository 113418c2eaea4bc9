// Typed calls to the State and Events views' endpoints (demo-gateway/cluster-routes.ts).
import type {
  EventRow,
  KindCount,
  ObjectDetail,
  ObjectRow,
  StateChange,
} from '../../cluster-types.js';

const REQUEST_TIMEOUT_MS = 4000;

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as { error?: string };
    throw new Error(body.error ?? `${path}: HTTP ${response.status}`);
  }
  return (await response.json()) as T;
}

const query = (params: Record<string, string>): string => new URLSearchParams(params).toString();

export const fetchClusterSummary = (): Promise<{
  counts: KindCount[];
  changes: StateChange[];
}> => getJson('/api/cluster/summary');

export const fetchClusterObjects = (s: { resource: string; namespace: string }) =>
  getJson<ObjectRow[]>(`/api/cluster/objects?${query(s)}`);

export const fetchClusterObject = (o: { resource: string; namespace: string; name: string }) =>
  getJson<ObjectDetail>(
    `/api/cluster/object?${query({ resource: o.resource, namespace: o.namespace, name: o.name })}`,
  );

export const fetchEvents = (text: string) =>
  getJson<{ now: number; events: EventRow[] }>(`/api/events?${query({ q: text })}`);
