// Typed calls to the demo gateway's JSON endpoints (demo-gateway/web-ui.ts).
import type {
  ControlEvent,
  ControlResult,
  LogFacets,
  LogFilter,
  LogPage,
  Overview,
} from '../../api-types.js';

/** A poll that takes longer than this counts as the gateway being unreachable. */
const REQUEST_TIMEOUT_MS = 4000;

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as { error?: string };
    throw new Error(body.error ?? `${path}: HTTP ${response.status}`);
  }
  return (await response.json()) as T;
}

async function postJson(path: string, body: unknown): Promise<ControlResult> {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  return (await response.json()) as ControlResult;
}

export const fetchOverview = (): Promise<Overview> => getJson<Overview>('/api/overview');

export const fetchFacets = (): Promise<LogFacets> => getJson<LogFacets>('/api/logs/facets');

export function fetchLogs(
  filter: LogFilter,
  page: { limit?: number; before?: number; after?: number },
): Promise<LogPage> {
  const params = new URLSearchParams();
  const entries: [string, string | undefined][] = [
    ['namespace', filter.namespace],
    ['workload', filter.workload],
    ['pod', filter.pod],
    ['container', filter.container],
    ['level', filter.level],
    ['q', filter.text],
  ];
  for (const [key, value] of entries) if (value) params.set(key, value);
  if (page.limit !== undefined) params.set('limit', String(page.limit));
  if (page.before !== undefined) params.set('before', String(page.before));
  if (page.after !== undefined) params.set('after', String(page.after));
  return getJson<LogPage>(`/api/logs?${params.toString()}`);
}

export const fetchTimeline = (sessionId: string): Promise<ControlEvent[]> =>
  getJson<ControlEvent[]>(`/api/sessions/${encodeURIComponent(sessionId)}/timeline`);

export const sendBackpressure = (
  sessionId: string,
  throttle: boolean,
  delayMs: number,
): Promise<ControlResult> =>
  postJson(`/api/sessions/${encodeURIComponent(sessionId)}/backpressure`, { throttle, delayMs });

export const sendHeartbeatInterval = (
  sessionId: string,
  heartbeatIntervalSec: number,
): Promise<ControlResult> =>
  postJson(`/api/sessions/${encodeURIComponent(sessionId)}/config`, { heartbeatIntervalSec });

export const sendShutdown = (sessionId: string, reason: string): Promise<ControlResult> =>
  postJson(`/api/sessions/${encodeURIComponent(sessionId)}/shutdown`, { reason });
