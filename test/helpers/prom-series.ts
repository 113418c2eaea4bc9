// Reading one series out of a real prom-client registry, for tests that assert on the metrics a
// component exports rather than on what it handed a recorder.
import type { Registry } from 'prom-client';

/**
 * The value of the first series named `name` whose labels include `labels`; a histogram's
 * `_bucket`, `_sum` and `_count` series by their full names. Undefined when there is none.
 */
export async function seriesValue(
  registry: Registry,
  name: string,
  labels: Readonly<Record<string, string | number>>,
): Promise<number | undefined> {
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values) {
      const valueName = 'metricName' in value ? value.metricName : metric.name;
      if (valueName !== name) continue;
      const have = value.labels as Record<string, string | number | undefined>;
      if (Object.entries(labels).every(([k, v]) => have[k] === v)) return value.value;
    }
  }
  return undefined;
}
