// The capability catalog: every 5 minutes the API server's resources are discovered; when the
// set changed (its fingerprint), or an hour passed since the last sweep, every resource is
// probed (may the collector list and watch it: SelfSubjectAccessReviews) and given the query
// policy's coarse verdict, and the snapshot is published through the buffer. The executor's
// side is asked every round and a change there publishes too. The gateway receives a full
// snapshot each time, never a delta.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import {
  AgentMessage,
  ExecutorCatalog,
  type ResourceCapability,
  type ResourceCatalog,
} from '../../proto/index.js';
import type { Clock } from '../../shared/clock.js';
import { getErrorMessage } from '../../shared/errors.js';
import type { Service } from '../../shared/lifecycle/service.js';
import type { ExecutorClient } from '../executor-client/executor-client.js';
import type { KubeRest } from '../query/kube-rest.js';
import type { QueryPolicy } from '../query/policy.js';
import type { Sink } from '../sources/source.js';
import { probeAccess } from './access-probe.js';
import { discoverResources, type Discovery } from './discovery.js';
import { askExecutor } from './executor-side.js';

export const DISCOVERY_INTERVAL_MS = 5 * 60_000;
export const SWEEP_MAX_AGE_MS = 60 * 60_000;

export interface CatalogOptions {
  readonly clusterId: string;
  readonly agentId: string;
  readonly intervalMs?: number;
  readonly sweepMaxAgeMs?: number;
}

export interface CatalogDeps {
  readonly rest: KubeRest;
  readonly policy: QueryPolicy;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Absent: no executor in this Pod. */
  readonly executor?: ExecutorClient;
}

export interface CapabilityCatalog extends Service {
  /** The last catalog published, for tests and /readyz-style inspection. */
  last(): ResourceCatalog | undefined;
  /** Catalogs published since start. */
  published(): number;
  /** One round now (discovery, sweep if due, publish if changed); resolves when done. */
  refresh(signal: AbortSignal): Promise<void>;
}

function sameExecutor(a: ExecutorCatalog | undefined, b: ExecutorCatalog): boolean {
  if (a === undefined) return false;
  return Buffer.from(ExecutorCatalog.encode(a).finish()).equals(
    Buffer.from(ExecutorCatalog.encode(b).finish()),
  );
}

export function createCapabilityCatalog(
  options: CatalogOptions,
  deps: CatalogDeps,
): CapabilityCatalog {
  const logger = deps.logger.child({ component: 'catalog' });
  const intervalMs = options.intervalMs ?? DISCOVERY_INTERVAL_MS;
  const maxAgeMs = options.sweepMaxAgeMs ?? SWEEP_MAX_AGE_MS;
  let last: ResourceCatalog | undefined;
  let lastSweepAt = 0;
  let count = 0;
  let round: Promise<void> = Promise.resolve();
  const stop = new AbortController();
  let loop: Promise<void> | undefined;

  const sweep = async (discovery: Discovery, signal: AbortSignal) => {
    const verdicts = await probeAccess(deps.rest, discovery.resources, signal);
    return discovery.resources.map((resource, index): ResourceCapability => {
      const verdict = verdicts[index] ?? { canList: false, canWatch: false, probeFailed: true };
      return {
        ...resource,
        ...verdict,
        policyList: deps.policy.allowsAny(resource, 'list'),
        policyGet: deps.policy.allowsAny(resource, 'get'),
      };
    });
  };

  const publish = (catalog: ResourceCatalog): void => {
    const now = deps.clock.now();
    const message: AgentMessage = {
      messageId: randomUUID(),
      meta: {
        tenantId: '',
        clusterId: options.clusterId,
        agentId: options.agentId,
        sessionId: '',
        timestamp: String(now),
      },
      payload: { $case: 'catalog', value: catalog },
    };
    // 'state': the kind the buffer drops last; a catalog is small and replaces the one before.
    deps.sink.enqueue({
      id: message.messageId,
      kind: 'state',
      payload: AgentMessage.encode(message).finish(),
    });
    last = catalog;
    count++;
  };

  /** What changed since the last catalog published; undefined when nothing did. */
  const changes = (discovery: Discovery, executor: ExecutorCatalog, now: number) => {
    if (last === undefined) return { sweep: true };
    const sweepDue = last.fingerprint !== discovery.fingerprint || now - lastSweepAt >= maxAgeMs;
    const groupsChanged = last.failedGroups.join('\n') !== discovery.failedGroups.join('\n');
    if (sweepDue || groupsChanged || !sameExecutor(last.executor, executor)) {
      return { sweep: sweepDue };
    }
    return undefined;
  };

  const once = async (signal: AbortSignal): Promise<void> => {
    let discovery: Discovery;
    try {
      discovery = await discoverResources(deps.rest, signal);
    } catch (err: unknown) {
      if (!signal.aborted) {
        logger.warn({ err: getErrorMessage(err) }, 'resource discovery failed; catalog unchanged');
      }
      return;
    }
    const executor = await askExecutor(deps.executor, signal);
    const now = deps.clock.now();
    const change = changes(discovery, executor, now);
    if (change === undefined) return;
    const entries =
      change.sweep || last === undefined ? await sweep(discovery, signal) : last.entries;
    if (signal.aborted) return;
    if (change.sweep) lastSweepAt = now;
    publish({
      fingerprint: discovery.fingerprint,
      collectedAt: String(now),
      entries,
      failedGroups: [...discovery.failedGroups],
      executor,
    });
    logger.info(
      {
        fingerprint: discovery.fingerprint,
        resources: entries.length,
        failedGroups: discovery.failedGroups,
        executor: executor.state,
      },
      'capability catalog published',
    );
  };

  /** One round that never rejects: a stop mid-round is the normal end, anything else is logged. */
  const safeOnce = async (signal: AbortSignal): Promise<void> => {
    try {
      await once(signal);
    } catch (err: unknown) {
      if (!signal.aborted) logger.warn({ err: getErrorMessage(err) }, 'catalog round failed');
    }
  };

  const refresh = (signal: AbortSignal): Promise<void> => {
    // Rounds never overlap: a refresh waits for the one running.
    round = round.then(() => safeOnce(AbortSignal.any([signal, stop.signal])));
    return round;
  };

  return {
    name: 'capability-catalog',
    last: () => last,
    published: () => count,
    refresh,
    start(signal) {
      const both = AbortSignal.any([signal, stop.signal]);
      loop = (async () => {
        while (!both.aborted) {
          await refresh(both);
          try {
            await deps.clock.sleep(intervalMs, both);
          } catch {
            return;
          }
        }
      })();
      return Promise.resolve();
    },
    async close() {
      stop.abort();
      await loop?.catch(() => undefined);
      await round;
    },
  };
}
