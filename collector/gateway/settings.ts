import type { ConfigSnapshot } from '../../proto/index.js';

/** What the gateway may change on a running stream, without a restart. */
export interface StreamSettings {
  heartbeatIntervalMs: number;
  /** Items taken from the buffer per drain round; the ack window is twice this. */
  batchSize: number;
  /** How often in-flight items are swept for the redelivery timeout. */
  flushIntervalMs: number;
}

/** Fields that changed, as applied: for the log line and for tests. */
export type SettingsChange = Partial<StreamSettings>;

/**
 * Applies a ConfigSnapshot as a PATCH: proto3 scalars cannot be absent, so 0 means "unchanged"
 * (a zero interval or batch would be meaningless anyway). Mutates `settings` and returns what
 * changed.
 */
export function applySettingsPatch(
  settings: StreamSettings,
  snapshot: ConfigSnapshot | undefined,
): SettingsChange {
  const change: SettingsChange = {};
  if (!snapshot) return change;
  const heartbeatMs = snapshot.heartbeatIntervalSec * 1000;
  if (heartbeatMs > 0 && heartbeatMs !== settings.heartbeatIntervalMs) {
    change.heartbeatIntervalMs = settings.heartbeatIntervalMs = heartbeatMs;
  }
  if (snapshot.batchSize > 0 && snapshot.batchSize !== settings.batchSize) {
    change.batchSize = settings.batchSize = snapshot.batchSize;
  }
  if (snapshot.flushIntervalMs > 0 && snapshot.flushIntervalMs !== settings.flushIntervalMs) {
    change.flushIntervalMs = settings.flushIntervalMs = snapshot.flushIntervalMs;
  }
  return change;
}
