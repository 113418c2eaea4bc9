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
 * The range a gateway ConfigUpdate may set each setting to. A value outside it is clamped, not
 * refused: the gateway's intent (faster, slower, bigger) is kept, but a heartbeat can never be
 * written every millisecond (Node turns a timer above 2^31-1 ms into 1 ms), nor a batch grow
 * without bound. The heartbeat's floor is 1 s, the smallest interval the wire can express
 * (`heartbeat_interval_sec`): the Go agent honours 1 s, and a gateway that asks for it declares
 * an agent dead after a few missed seconds, so it must get what it asked for.
 */
export const SETTINGS_BOUNDS: Readonly<Record<keyof StreamSettings, { min: number; max: number }>> =
  {
    heartbeatIntervalMs: { min: 1_000, max: 3_600_000 },
    batchSize: { min: 1, max: 10_000 },
    flushIntervalMs: { min: 100, max: 3_600_000 },
  };

/** A value the gateway asked for that was outside SETTINGS_BOUNDS, and what was used instead. */
export interface ClampedSetting {
  readonly setting: keyof StreamSettings;
  readonly requested: number;
  readonly applied: number;
}

export interface SettingsPatchResult {
  readonly changed: SettingsChange;
  readonly clamped: readonly ClampedSetting[];
}

/**
 * Applies a ConfigSnapshot as a PATCH: proto3 scalars cannot be absent, so 0 means "unchanged"
 * (a zero interval or batch would be meaningless anyway). Values are clamped to SETTINGS_BOUNDS
 * first. Mutates `settings` and returns what changed and what was clamped (for the log).
 */
export function applySettingsPatch(
  settings: StreamSettings,
  snapshot: ConfigSnapshot | undefined,
): SettingsPatchResult {
  const changed: SettingsChange = {};
  const clamped: ClampedSetting[] = [];
  if (!snapshot) return { changed, clamped };
  const apply = (setting: keyof StreamSettings, requested: number): void => {
    if (!(requested > 0)) return; // 0 (unset), and anything not a positive number
    const { min, max } = SETTINGS_BOUNDS[setting];
    const applied = Math.min(max, Math.max(min, requested));
    if (applied !== requested) clamped.push({ setting, requested, applied });
    if (applied !== settings[setting]) changed[setting] = settings[setting] = applied;
  };
  apply('heartbeatIntervalMs', snapshot.heartbeatIntervalSec * 1000);
  apply('batchSize', snapshot.batchSize);
  apply('flushIntervalMs', snapshot.flushIntervalMs);
  return { changed, clamped };
}
