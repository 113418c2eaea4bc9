// Which resources the API server serves, the way client-go's ServerPreferredResources sees them:
// every group version of every group, a resource kept once per group (from the group's preferred
// version when it has it there), only resources that can be listed and are not subresources. A
// group version that fails discovery (an aggregated API whose service is down) is reported in
// failedGroups and the rest is kept; failing to read the group list itself fails the discovery.
import { createHash } from 'node:crypto';
import type { KubeRest } from '../query/kube-rest.js';
import { mapLimit } from './map-limit.js';

export interface DiscoveredResource {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

export interface Discovery {
  readonly resources: readonly DiscoveredResource[];
  /** "group/version" (core: "v1"), sorted. */
  readonly failedGroups: readonly string[];
  readonly fingerprint: string;
}

const MAX_DISCOVERY_BYTES = 8 * 1024 * 1024;
const PARALLEL_GROUP_VERSIONS = 8;

interface ApiResource {
  name?: string;
  kind?: string;
  namespaced?: boolean;
  verbs?: string[];
}

async function getJson(rest: KubeRest, path: string, signal: AbortSignal): Promise<unknown> {
  const response = await rest.request({
    method: 'GET',
    path,
    maxBodyBytes: MAX_DISCOVERY_BYTES,
    signal,
  });
  if (response.status !== 200) {
    const text = response.body.toString('utf8', 0, Math.min(response.body.length, 300));
    throw new Error(`GET ${path}: HTTP ${response.status} ${text}`);
  }
  return JSON.parse(response.body.toString('utf8')) as unknown;
}

/** sha256 over the sorted "group/version/resource" keys, each followed by a NUL byte. */
export function fingerprintOf(resources: readonly DiscoveredResource[]): string {
  const hash = createHash('sha256');
  const keys = resources.map((r) => `${r.group}/${r.version}/${r.resource}`).sort();
  for (const key of keys) hash.update(`${key}\u0000`);
  return `sha256:${hash.digest('hex')}`;
}

interface GroupVersion {
  readonly group: string;
  readonly version: string;
}

function pathOf(gv: GroupVersion): string {
  return gv.group === '' ? `/api/${gv.version}` : `/apis/${gv.group}/${gv.version}`;
}

/** Every served group version, each group's preferred version first. */
async function groupVersions(rest: KubeRest, signal: AbortSignal): Promise<GroupVersion[]> {
  const core = (await getJson(rest, '/api', signal)) as { versions?: string[] };
  const list = (await getJson(rest, '/apis', signal)) as {
    groups?: {
      name?: string;
      versions?: { version?: string }[];
      preferredVersion?: { version?: string };
    }[];
  };
  const out: GroupVersion[] = (core.versions ?? []).map((version) => ({ group: '', version }));
  for (const group of list.groups ?? []) {
    const name = group.name ?? '';
    const preferred = group.preferredVersion?.version;
    const versions = (group.versions ?? []).map((v) => v.version ?? '').filter((v) => v !== '');
    const ordered =
      preferred !== undefined && versions.includes(preferred)
        ? [preferred, ...versions.filter((v) => v !== preferred)]
        : versions;
    for (const version of ordered) out.push({ group: name, version });
  }
  return out;
}

export async function discoverResources(rest: KubeRest, signal: AbortSignal): Promise<Discovery> {
  const versions = await groupVersions(rest, signal);
  const answers = await mapLimit(versions, PARALLEL_GROUP_VERSIONS, async (gv) => {
    try {
      const list = (await getJson(rest, pathOf(gv), signal)) as { resources?: ApiResource[] };
      return { gv, resources: list.resources ?? [] };
    } catch (err: unknown) {
      signal.throwIfAborted();
      return { gv, resources: undefined, error: err };
    }
  });
  const failedGroups: string[] = [];
  const seen = new Set<string>();
  const resources: DiscoveredResource[] = [];
  for (const { gv, resources: listed } of answers) {
    if (listed === undefined) {
      failedGroups.push(gv.group === '' ? gv.version : `${gv.group}/${gv.version}`);
      continue;
    }
    for (const r of listed) {
      const name = r.name ?? '';
      if (name === '' || name.includes('/') || !(r.verbs ?? []).includes('list')) continue;
      const key = `${gv.group}/${name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      resources.push({
        group: gv.group,
        version: gv.version,
        resource: name,
        kind: r.kind ?? '',
        namespaced: r.namespaced === true,
      });
    }
  }
  failedGroups.sort();
  return { resources, failedGroups, fingerprint: fingerprintOf(resources) };
}
