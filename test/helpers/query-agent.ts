// A collector's live-query path, end to end: a real demo gateway sends ResourceQuery messages on
// the stream to a real gateway session, whose handler is the collector's live query built from
// a query.* config, reading the real API server (through a proxy the test controls).
import { randomUUID } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { createLiveQuery } from '../../collector/query/query-service.js';
import {
  QueryVerb,
  QueryView,
  ResourceQuery,
  type ResourceQueryResult,
} from '../../proto/index.js';
import { load } from '../../shared/config/load-for-test.js';
import { captureLogs, startHarness, type Harness } from './gateway-harness.js';

export interface QueryAgent extends AsyncDisposable {
  readonly harness: Harness;
  readonly registry: Registry;
  readonly sessionId: string;
  /** Sends one query from the demo gateway and resolves with the agent's answer. */
  ask(query: Partial<ResourceQuery>): Promise<ResourceQueryResult>;
}

/** `yaml` is a whole agent config (its query and collect sections matter here). */
export async function startQueryAgent(kube: KubeConfig, yaml: string): Promise<QueryAgent> {
  const { config } = load(yaml);
  const registry = new Registry();
  const live = createLiveQuery(config.query, {
    kube,
    logger: captureLogs().logger,
    registry,
    // As collector.ts wires it.
    secretsMetadataOnly: config.security.profile === 'strict',
  });
  const agent = await startHarness({ deps: { queryHandler: live.handler } });
  const session = await agent.gateway.waitForSession();
  return {
    harness: agent,
    registry,
    sessionId: session.sessionId,
    ask: (query) =>
      agent.gateway.query(
        session.sessionId,
        ResourceQuery.fromPartial({ queryId: randomUUID(), ...query }),
      ),
    [Symbol.asyncDispose]: async () => {
      await agent[Symbol.asyncDispose]();
      await live.service.close();
    },
  };
}

/** The payload as JSON (the test's own parse: numbers are compared as text elsewhere). */
export function payloadJson(result: ResourceQueryResult): unknown {
  return JSON.parse(Buffer.from(result.payload).toString('utf8'));
}

export const LIST = QueryVerb.QUERY_VERB_LIST;
export const GET = QueryVerb.QUERY_VERB_GET;
export const TABLE = QueryView.QUERY_VIEW_TABLE;
export const FULL = QueryView.QUERY_VIEW_FULL;
