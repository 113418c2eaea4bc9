// The gateway's demand watchers (ConfigUpdate.watchers, reference 9.3): the union of every
// watcher's resources. Undefined when the update carries no watchers (an update with only ingest
// rules leaves the watchers alone); one watcher with no resources means "none". Opt-in watchers
// (ids under kubexa.io/) are not demand watchers.
import type { ConfigUpdate } from '../../../proto/index.js';
import type { ResourceRef } from '../../watch/discovery.js';

/** Watcher ids under this prefix are opt-ins (events-source.ts), not resources to watch. */
export const RESERVED_WATCHER_PREFIX = 'kubexa.io/';

export function demandRefs(update: ConfigUpdate): ResourceRef[] | undefined {
  const watchers = (update.config?.watchers ?? []).filter(
    (watcher) => !watcher.id.startsWith(RESERVED_WATCHER_PREFIX),
  );
  if (watchers.length === 0) return undefined;
  const refs: ResourceRef[] = [];
  for (const watcher of watchers) {
    for (const ref of watcher.resources) {
      const version = ref.version.trim();
      const resource = ref.resource.trim();
      // Blank or unparsable references are skipped, as the Go agent does.
      if (version === '' || resource === '' || /[\s/*]/.test(version + resource)) continue;
      refs.push({ group: ref.group.trim(), version, resource });
    }
  }
  return refs;
}
