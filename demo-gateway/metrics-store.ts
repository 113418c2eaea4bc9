// What the Metrics view shows, kept in memory with bounded retention: per node and per pod CPU
// and memory series (MetricsEvent), the newest sample of each scraped Prometheus family
// (PrometheusMetricsEvent) and the newest profiles with their raw pprof bytes (ProfileEvent).
// A demo store: old points, families and profiles are dropped first, never the process.
import {
  KubeMetricsResourceType,
  type MetricsEvent,
  type ProfileEvent,
  type PrometheusMetricsEvent,
} from '../proto/index.js';
import type { FamilyRow, MetricSeries, MetricsSnapshot, ProfileRow } from './api-types.js';

export interface MetricsRetention {
  /** Points kept per series (the oldest go first). */
  readonly pointsPerSeries: number;
  /** Series kept per kind (node, pod); the least recently updated go first. */
  readonly seriesPerKind: number;
  /** Families kept (target and name); the least recently scraped go first. */
  readonly families: number;
  /** Profiles kept, and their bytes in all; the oldest go first. */
  readonly profiles: number;
  readonly profileBytes: number;
}

export const DEFAULT_RETENTION: MetricsRetention = {
  pointsPerSeries: 240,
  seriesPerKind: 100,
  families: 1000,
  profiles: 60,
  profileBytes: 64 * 1024 * 1024,
};

/** Series shown in one family row as an example. */
const EXAMPLE_SERIES = 3;

interface StoredProfile extends ProfileRow {
  readonly pprof: Uint8Array;
}

interface FamilyJson {
  name?: string;
  help?: string;
  type?: string;
  metrics?: { Labels?: Record<string, string>; Value?: number }[];
}

/** A Map used as an LRU: touching a key moves it to the end; the first key is the oldest. */
function touch<K, V>(map: Map<K, V>, key: K, value: V, limit: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > limit) {
    const oldest = map.keys().next();
    if (oldest.done === true) break;
    map.delete(oldest.value);
  }
}

export class MetricsStore {
  readonly #retention: MetricsRetention;
  readonly #nodes = new Map<string, MetricSeries>();
  readonly #pods = new Map<string, MetricSeries>();
  readonly #families = new Map<string, FamilyRow>();
  #profiles: StoredProfile[] = [];
  #profileBytes = 0;
  #nextProfile = 1;
  /** Families whose JSON did not parse (counted, not shown). */
  malformedFamilies = 0;

  constructor(retention: Partial<MetricsRetention> = {}) {
    this.#retention = { ...DEFAULT_RETENTION, ...retention };
  }

  addKubeMetrics(event: MetricsEvent): void {
    const isNode = event.resourceType === KubeMetricsResourceType.KUBE_METRICS_RESOURCE_TYPE_NODE;
    const map = isNode ? this.#nodes : this.#pods;
    const key = isNode ? event.name : `${event.namespace}/${event.name}`;
    const series = map.get(key) ?? {
      key,
      namespace: event.namespace,
      name: event.name,
      points: [],
    };
    const at = Number(event.timestamp);
    const point: [number, number, number] = [
      at,
      Number(event.cpuNanocores) / 1e9,
      Number(event.memoryBytes),
    ];
    // metrics-server answers the same window until its next resolution: one point per window.
    const lastAt = series.points.at(-1)?.[0];
    if (lastAt === at) series.points[series.points.length - 1] = point;
    else if (lastAt === undefined || lastAt < at) series.points.push(point);
    if (series.points.length > this.#retention.pointsPerSeries) {
      series.points.splice(0, series.points.length - this.#retention.pointsPerSeries);
    }
    touch(map, key, series, this.#retention.seriesPerKind);
  }

  addPrometheusFamily(event: PrometheusMetricsEvent): void {
    let family: FamilyJson;
    try {
      family = JSON.parse(event.metricFamilyJson) as FamilyJson;
    } catch {
      this.malformedFamilies++;
      return;
    }
    const name = family.name ?? '';
    const metrics = family.metrics ?? [];
    const row: FamilyRow = {
      targetUrl: event.targetUrl,
      name,
      type: (family.type ?? '').replace(/^METRIC_TYPE_/, '').toLowerCase(),
      help: family.help ?? '',
      series: metrics.length,
      examples: metrics.slice(0, EXAMPLE_SERIES).map((m) => ({
        labels: m.Labels ?? {},
        value: typeof m.Value === 'number' ? m.Value : null,
      })),
      scrapedAt: Number(event.scrapedAt),
    };
    touch(this.#families, `${event.targetUrl}\n${name}`, row, this.#retention.families);
  }

  addProfile(event: ProfileEvent): void {
    const stored: StoredProfile = {
      id: String(this.#nextProfile++),
      namespace: event.namespace,
      pod: event.pod,
      container: event.container,
      workload: event.workload,
      type: event.profileType,
      durationMs: Number(event.durationMs),
      timestamp: Number(event.timestamp),
      targetUrl: event.targetUrl,
      bytes: event.pprof.length,
      pprof: event.pprof,
    };
    this.#profiles.push(stored);
    this.#profileBytes += stored.bytes;
    while (
      this.#profiles.length > this.#retention.profiles ||
      (this.#profileBytes > this.#retention.profileBytes && this.#profiles.length > 1)
    ) {
      const dropped = this.#profiles.shift();
      this.#profileBytes -= dropped?.bytes ?? 0;
    }
  }

  snapshot(): MetricsSnapshot {
    const copy = (map: Map<string, MetricSeries>) =>
      [...map.values()]
        .map((s) => ({ ...s, points: s.points.slice() }))
        .sort((a, b) => a.key.localeCompare(b.key));
    return { nodes: copy(this.#nodes), pods: copy(this.#pods) };
  }

  families(): FamilyRow[] {
    return [...this.#families.values()].sort(
      (a, b) => a.targetUrl.localeCompare(b.targetUrl) || a.name.localeCompare(b.name),
    );
  }

  /** Newest first, without their bytes. */
  profiles(): ProfileRow[] {
    return this.#profiles.map((stored) => this.#row(stored)).reverse();
  }

  profile(id: string): { row: ProfileRow; pprof: Uint8Array } | undefined {
    const found = this.#profiles.find((p) => p.id === id);
    if (found === undefined) return undefined;
    return { row: this.#row(found), pprof: found.pprof };
  }

  #row(stored: StoredProfile): ProfileRow {
    const row: { pprof?: Uint8Array } & ProfileRow = { ...stored };
    delete row.pprof;
    return row;
  }
}
