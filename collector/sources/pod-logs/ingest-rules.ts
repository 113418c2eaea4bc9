// Maps the gateway's IngestRules (a ConfigUpdate) onto the log source's limits. The update is a
// PATCH: an absent message changes nothing, and a 0 field means "not pushed", so that one limit
// keeps its current value.
import type { IngestRules } from '../../../proto/index.js';
import type { IngestLimits } from './container-log.js';

/** int64 fields arrive as decimal strings (ts-proto forceLong=string). */
function pushed(value: string): number | undefined {
  const parsed = Number(value);
  return Number.isFinite(parsed) && parsed > 0 ? parsed : undefined;
}

export function applyIngestRules(
  current: IngestLimits,
  rules: IngestRules | undefined,
): IngestLimits {
  if (rules === undefined) return current;
  return {
    maxLineBytes: pushed(rules.maxLineBytes) ?? current.maxLineBytes,
    maxSampleAgeMs: pushed(rules.maxSampleAgeMs) ?? current.maxSampleAgeMs,
    maxFutureSkewMs: pushed(rules.maxFutureSkewMs) ?? current.maxFutureSkewMs,
    rate: {
      ratePerSecond: pushed(rules.perStreamRateBytes) ?? current.rate.ratePerSecond,
      burst: pushed(rules.perStreamBurstBytes) ?? current.rate.burst,
    },
  };
}
