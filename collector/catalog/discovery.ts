// Which resources the API server serves, the way client-go's ServerPreferredResources sees them:
// every group version of every group, a resource kept once per group (from the group's preferred
// version when it has it there), only resources that can be listed and are not subresources. A
// group version that fails discovery (an aggregated API whose service is down) is reported in
// failedGroups and the rest is kept; failing to read the group list itself fails the discovery.
//
// Aggregated discovery first, as client-go and kubectl ask for it (API servers: beta and on since
// 1.27, GA in 1.30): `/api` and `/apis` asked for an APIGroupDiscoveryList hold every group
// version's resources, so a round is two requests instead of one per group version (about 25 on a
// small cluster, on up to 8 connections, each a TLS handshake at start), and a group version the
// aggregator marks Stale is a failed one, as client-go counts it. A server that answers the plain
// APIGroupList (older, or a proxy that drops the parameters) gets the per-group-version reads, and
// so does one whose aggregated answer fails (a strict proxy's 406, a document over the cap): that
// path is asked again for the plain list.
import { createHash } from 'node:crypto';
import type { KubeRest } from '../query/kube-rest.js';
import {
  AGGREGATED_DISCOVERY_ACCEPT,
  fromAggregated,
  isAggregated,
  type ApiResource,
  type GroupVersion,
  type GroupVersionAnswer,
} from '../watch/aggregated-discovery.js';
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

async function getJson(
  rest: KubeRest,
  path: string,
  signal: AbortSignal,
  accept?: string,
): Promise<unknown> {
  const response = await rest.request({
    method: 'GET',
    path,
    ...(accept === undefined ? {} : { accept }),
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

function pathOf(gv: GroupVersion): string {
  return gv.group === '' ? `/api/${gv.version}` : `/apis/${gv.group}/${gv.version}`;
}

/** A plain APIGroupList's group versions, each group's preferred version first. */
function legacyGroupVersions(list: unknown): GroupVersion[] {
  const groups =
    (
      list as {
        groups?: {
          name?: string;
          versions?: { version?: string }[];
          preferredVersion?: { version?: string };
        }[];
      }
    ).groups ?? [];
  const out: GroupVersion[] = [];
  for (const group of groups) {
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

/** A group version's answer, or one still to be read from its own path (the plain lists). */
type Planned = GroupVersionAnswer | GroupVersion;

function plan(document: unknown, legacy: (document: unknown) => GroupVersion[]): Planned[] {
  return isAggregated(document) ? fromAggregated(document) : legacy(document);
}

/** A plain APIVersions (`/api`): the core group's versions. */
function legacyCoreVersions(document: unknown): GroupVersion[] {
  const versions = (document as { versions?: string[] }).versions ?? [];
  return versions.map((version) => ({ group: '', version }));
}

/** Reads what is still to be read, 8 at a time, in order; a failed read is a failed group. */
function answerAll(
  rest: KubeRest,
  planned: readonly Planned[],
  signal: AbortSignal,
): Promise<GroupVersionAnswer[]> {
  return mapLimit(planned, PARALLEL_GROUP_VERSIONS, async (item) => {
    if ('gv' in item) return item;
    try {
      const list = (await getJson(rest, pathOf(item), signal)) as { resources?: ApiResource[] };
      return { gv: item, resources: list.resources ?? [] };
    } catch {
      signal.throwIfAborted();
      return { gv: item, resources: undefined };
    }
  });
}

/** The aggregated document, or the plain list when asking for it failed. */
async function groupList(rest: KubeRest, path: string, signal: AbortSignal): Promise<unknown> {
  try {
    return await getJson(rest, path, signal, AGGREGATED_DISCOVERY_ACCEPT);
  } catch {
    signal.throwIfAborted();
    return getJson(rest, path, signal, 'application/json');
  }
}

export async function discoverResources(rest: KubeRest, signal: AbortSignal): Promise<Discovery> {
  const [core, groups] = await Promise.all([
    groupList(rest, '/api', signal),
    groupList(rest, '/apis', signal),
  ]);
  const answers = await answerAll(
    rest,
    [...plan(core, legacyCoreVersions), ...plan(groups, legacyGroupVersions)],
    signal,
  );
  return assemble(answers);
}

/** The resources kept (once per group, listable, no subresources) and the failed group versions. */
function assemble(answers: readonly GroupVersionAnswer[]): Discovery {
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
