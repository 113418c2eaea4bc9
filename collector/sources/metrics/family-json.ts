// One parsed family as the JSON the gateway already reads from the Go agent's
// PrometheusMetricsEvent.metric_family_json:
//   {"name","help","type":"METRIC_TYPE_…","metrics":[{"Labels":{…},"Value":n,"Timestamp":ms}]}
// (the metric keys are capitalised: the Go agent marshals a struct without json tags). A
// histogram or summary is one metric per series whose Value is the sum, as there; we add
// "Count" and "Buckets" / "Quantiles", keys a Go decoder skips, so nothing is lost for a gateway
// that reads them. JSON has no NaN or ±Inf: such a value is left out (the series is dropped when
// its Value is one) and counted, where the Go agent failed the whole family.
import type { Family, Sample } from './exposition.js';

type WireType =
  | 'METRIC_TYPE_UNSPECIFIED'
  | 'METRIC_TYPE_GAUGE'
  | 'METRIC_TYPE_COUNTER'
  | 'METRIC_TYPE_HISTOGRAM'
  | 'METRIC_TYPE_SUMMARY';

const WIRE_TYPES: Readonly<Record<Family['type'], WireType>> = {
  counter: 'METRIC_TYPE_COUNTER',
  gauge: 'METRIC_TYPE_GAUGE',
  histogram: 'METRIC_TYPE_HISTOGRAM',
  gaugehistogram: 'METRIC_TYPE_HISTOGRAM',
  summary: 'METRIC_TYPE_SUMMARY',
  // OpenMetrics info and stateset samples are gauges of value 1 / 0.
  info: 'METRIC_TYPE_GAUGE',
  stateset: 'METRIC_TYPE_GAUGE',
  untyped: 'METRIC_TYPE_UNSPECIFIED',
  unknown: 'METRIC_TYPE_UNSPECIFIED',
};

export interface WireMetric {
  Labels: Record<string, string>;
  Value: number;
  Timestamp: number;
  Count?: number;
  Buckets?: Record<string, number>;
  Quantiles?: Record<string, number>;
}

export interface WireFamily {
  name: string;
  help: string;
  type: WireType;
  metrics: WireMetric[];
}

export interface FamilyConversion {
  readonly family: WireFamily;
  /** Samples left out because JSON cannot carry their value (NaN, ±Inf). */
  readonly nonFinite: number;
}

/** Allow and deny lists of anchored regular expressions over family names. */
export interface FamilyFilter {
  readonly allow: readonly RegExp[];
  readonly deny: readonly RegExp[];
}

/** Deny first, then the allow list (an empty allow list allows everything), as the Go agent. */
export function keepFamily(name: string, filter: FamilyFilter): boolean {
  if (filter.deny.some((re) => re.test(name))) return false;
  return filter.allow.length === 0 || filter.allow.some((re) => re.test(name));
}

/** Compiles config patterns to anchored expressions (a pattern matches the whole name). */
export function compileFilter(allow: readonly string[], deny: readonly string[]): FamilyFilter {
  const anchored = (pattern: string) => new RegExp(`^(?:${pattern})$`, 'u');
  return { allow: allow.map(anchored), deny: deny.map(anchored) };
}

/** Samples a histogram or summary series is made of, keyed by their role. */
interface Series {
  labels: Record<string, string>;
  value?: number;
  timestamp: number;
  count?: number;
  buckets?: Record<string, number>;
  quantiles?: Record<string, number>;
}

const ROLE_FIELDS: Readonly<Record<string, 'value' | 'count'>> = {
  _sum: 'value',
  _gsum: 'value',
  _count: 'count',
  _gcount: 'count',
};

const GROUPED = new Set<Family['type']>(['histogram', 'gaugehistogram', 'summary']);

/** Collects a family's samples into series (labels minus `le` / `quantile`, extra labels merged). */
class SeriesBuilder {
  readonly #series = new Map<string, Series>();
  readonly #extraLabels: Readonly<Record<string, string>>;
  nonFinite = 0;

  constructor(extraLabels: Readonly<Record<string, string>>) {
    this.#extraLabels = extraLabels;
  }

  get(sample: Sample, dropLabel?: string): Series {
    const labels: Record<string, string> = {};
    for (const key of Object.keys(sample.labels).sort()) {
      if (key !== dropLabel) labels[key] = sample.labels[key] ?? '';
    }
    // extra_labels win over scraped labels.
    Object.assign(labels, this.#extraLabels);
    const key = JSON.stringify(labels);
    let entry = this.#series.get(key);
    if (entry === undefined) {
      entry = { labels, timestamp: 0 };
      this.#series.set(key, entry);
    }
    if (sample.timestampMs !== undefined && entry.timestamp === 0) {
      entry.timestamp = sample.timestampMs;
    }
    return entry;
  }

  /** False (and counted) for a value JSON cannot carry. */
  finite(value: number): boolean {
    if (Number.isFinite(value)) return true;
    this.nonFinite++;
    return false;
  }

  plain(sample: Sample): void {
    if (!this.finite(sample.value)) return;
    // A repeated series (same labels) keeps its first sample.
    this.get(sample).value ??= sample.value;
  }

  grouped(sample: Sample, role: string, type: Family['type']): void {
    const field = ROLE_FIELDS[role];
    if (field !== undefined) {
      const entry = this.get(sample);
      if (this.finite(sample.value)) entry[field] = sample.value;
    } else if (role === '_bucket') {
      this.#keyed(sample, 'le', 'buckets');
    } else if (type === 'summary' && 'quantile' in sample.labels) {
      this.#keyed(sample, 'quantile', 'quantiles');
    }
  }

  #keyed(sample: Sample, label: string, field: 'buckets' | 'quantiles'): void {
    const entry = this.get(sample, label);
    if (this.finite(sample.value)) (entry[field] ??= {})[sample.labels[label] ?? ''] = sample.value;
  }

  metrics(grouped: boolean): WireMetric[] {
    const out: WireMetric[] = [];
    for (const entry of this.#series.values()) {
      if (entry.value === undefined && !grouped) continue;
      const metric: WireMetric = {
        Labels: entry.labels,
        Value: entry.value ?? 0,
        Timestamp: entry.timestamp,
      };
      if (entry.count !== undefined) metric.Count = entry.count;
      if (entry.buckets !== undefined) metric.Buckets = entry.buckets;
      if (entry.quantiles !== undefined) metric.Quantiles = entry.quantiles;
      out.push(metric);
    }
    return out;
  }
}

export function toWireFamily(
  family: Family,
  extraLabels: Readonly<Record<string, string>>,
): FamilyConversion {
  const builder = new SeriesBuilder(extraLabels);
  const grouped = GROUPED.has(family.type);
  for (const sample of family.samples) {
    const role = sample.name.startsWith(family.name) ? sample.name.slice(family.name.length) : '';
    if (role === '_created') continue; // creation times are not values
    if (grouped) builder.grouped(sample, role, family.type);
    else builder.plain(sample);
  }
  return {
    family: {
      name: family.name,
      help: family.help,
      type: WIRE_TYPES[family.type],
      metrics: builder.metrics(grouped),
    },
    nonFinite: builder.nonFinite,
  };
}
