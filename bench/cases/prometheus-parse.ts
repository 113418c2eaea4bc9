// Parse throughput of a 10 MB Prometheus exposition (samples/s), beside a bare line split of the
// same body measured in the same run: how far the real parser is from the cheapest possible
// pass over the text. No target: the issue asks for the figure.
import { parseExposition } from '../../collector/sources/metrics/exposition.js';
import { toWireFamily } from '../../collector/sources/metrics/family-json.js';
import { median, rate, type BenchCase } from '../types.js';

const TARGET_BYTES = 10 * 1024 * 1024;
const ROUNDS = 5;

/** A realistic page: counters with labels, histograms, gauges, escapes, until 10 MB. */
function exposition(): { body: string; samples: number } {
  const lines: string[] = [];
  let bytes = 0;
  let samples = 0;
  const push = (line: string) => {
    lines.push(line);
    bytes += line.length + 1;
    if (!line.startsWith('#')) samples++;
  };
  for (let family = 0; bytes < TARGET_BYTES; family++) {
    push(`# HELP app_requests_${String(family)}_total Requests by route and code.`);
    push(`# TYPE app_requests_${String(family)}_total counter`);
    for (let i = 0; i < 50; i++) {
      push(
        `app_requests_${String(family)}_total{route="/api/v1/items/${String(i)}",code="${String(200 + (i % 5))}",pod="web-7d9f8c6b5-${String(i % 7)}"} ${String(i * 1234.5)}`,
      );
    }
    push(`# TYPE app_latency_${String(family)}_seconds histogram`);
    for (const le of ['0.005', '0.01', '0.05', '0.1', '0.5', '1', '+Inf']) {
      push(
        `app_latency_${String(family)}_seconds_bucket{route="/api",le="${le}"} ${String(family)}`,
      );
    }
    push(`app_latency_${String(family)}_seconds_sum{route="/api"} 12.5`);
    push(`app_latency_${String(family)}_seconds_count{route="/api"} 99`);
  }
  return { body: `${lines.join('\n')}\n`, samples };
}

export const prometheusParseBench: BenchCase = {
  name: 'prometheus-parse',
  run({ log }) {
    const { body, samples } = exposition();
    log(`exposition: ${String(body.length)} bytes, ${String(samples)} samples`);
    const parseRates: number[] = [];
    const splitRates: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      let started = performance.now();
      let counted = 0;
      for (const line of body.split('\n')) if (line !== '' && !line.startsWith('#')) counted++;
      splitRates.push(rate(counted, performance.now() - started));
      started = performance.now();
      let series = 0;
      for (const family of parseExposition(body))
        series += toWireFamily(family, {}).family.metrics.length;
      const ms = performance.now() - started;
      parseRates.push(rate(samples, ms));
      log(
        `round ${String(round + 1)}: parse + JSON shape ${ms.toFixed(0)} ms (${String(series)} series)`,
      );
    }
    return Promise.resolve([
      {
        name: 'parse 10 MB exposition (samples/s)',
        itemsPerSecond: median(parseRates),
        baselineName: 'bare line split of the same body',
        baselineItemsPerSecond: median(splitRates),
        unit: 'samples/s',
      },
    ]);
  },
};
