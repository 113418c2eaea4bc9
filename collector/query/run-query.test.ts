// The runner's decisions on recorded answers: an answer that is not a Table (no real API server
// gives one), a single object over 8 MiB just over and just under the cap (also proven against
// the real API server in test/integration/live-query.test.ts), the clamps of the request it
// sends. The API server here is a recording stand-in; everything else is real.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { QueryErrorCode, QueryVerb, QueryView, ResourceQuery } from '../../proto/index.js';
import { load } from '../../shared/config/load-for-test.js';
import type { KubeRest, RestRequest, RestResponse } from './kube-rest.js';
import { compileQueryPolicy } from './policy.js';
import { clampTimeoutMs, createQueryRunner, MAX_PAYLOAD_BYTES } from './run-query.js';

function runnerWith(
  answer: (request: RestRequest) => RestResponse | Promise<RestResponse>,
  queryYaml = 'query: {rules: [{resources: ["*"]}]}',
  secretsMetadataOnly = false,
) {
  const requests: RestRequest[] = [];
  const rest: KubeRest = {
    request: (request) => {
      requests.push(request);
      return Promise.resolve(answer(request));
    },
    close: () => undefined,
  };
  const policy = compileQueryPolicy(load(queryYaml).config.query);
  const run = createQueryRunner({
    rest,
    policy,
    logger: pino({ level: 'silent' }),
    secretsMetadataOnly,
  });
  const ask = (query: Partial<ResourceQuery>) =>
    run(
      ResourceQuery.fromPartial({
        queryId: 'q',
        ref: { group: '', version: 'v1', resource: 'configmaps' },
        namespace: 'a',
        ...query,
      }),
      new AbortController().signal,
    );
  return { ask, requests };
}

const ok = (body: string): RestResponse => ({
  status: 200,
  contentType: 'application/json',
  body: Buffer.from(body),
});

describe('query runner', () => {
  it('under strict, passes on no Secret answered in full by a server that ignored the metadata Accept', async () => {
    const full = '{"kind":"Secret","metadata":{"name":"s"},"data":{"k":"Y2FuYXJ5"}}';
    const fullList = `{"kind":"SecretList","metadata":{},"items":[${full}]}`;
    const { ask, requests } = runnerWith(
      (request) => ok(request.path.endsWith('/s') ? full : fullList),
      'query: {redact_secrets: false, rules: [{resources: ["*"]}]}',
      true,
    );
    const secrets = { ref: { group: '', version: 'v1', resource: 'secrets' } };
    for (const verb of [QueryVerb.QUERY_VERB_GET, QueryVerb.QUERY_VERB_LIST]) {
      const result = await ask({
        ...secrets,
        verb,
        name: verb === QueryVerb.QUERY_VERB_GET ? 's' : '',
      });
      expect(result.error?.code).toBe(QueryErrorCode.QUERY_ERROR_INTERNAL);
      expect(result.error?.message).toMatch(
        /metadata only, and the API server answered with Secret/,
      );
      expect(result.payload.length).toBe(0);
    }
    expect(requests.map((request) => request.accept)).toEqual([
      'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io',
      'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io',
    ]);
  });

  it('refuses a TABLE request answered with something other than a Table', async () => {
    const { ask, requests } = runnerWith(() => ok('{"kind":"ConfigMapList","items":[]}'));
    const result = await ask({ view: QueryView.QUERY_VIEW_TABLE });
    expect(result.error?.code).toBe(QueryErrorCode.QUERY_ERROR_INTERNAL);
    expect(result.error?.message).toContain('does not support server-side printing');
    expect(requests[0]?.accept).toBe('application/json;as=Table;v=v1;g=meta.k8s.io');
    expect(requests[0]?.path).toContain('includeObject=Metadata');
  });

  it('answers TOO_LARGE for one object over 8 MiB after sanitizing, and keeps one just under', async () => {
    const object = (size: number) =>
      JSON.stringify({ kind: 'ConfigMap', metadata: { name: 'x' }, data: { v: 'x'.repeat(size) } });
    const overhead = object(0).length;
    const big = runnerWith(() => ok(object(MAX_PAYLOAD_BYTES - overhead + 1)));
    const refused = await big.ask({ verb: QueryVerb.QUERY_VERB_GET, name: 'x' });
    expect(refused.error?.code).toBe(QueryErrorCode.QUERY_ERROR_TOO_LARGE);
    expect(refused.error?.message).toContain(`over the ${MAX_PAYLOAD_BYTES} byte limit`);
    const fits = runnerWith(() => ok(object(MAX_PAYLOAD_BYTES - overhead)));
    const answered = await fits.ask({ verb: QueryVerb.QUERY_VERB_GET, name: 'x' });
    expect(answered.error).toBeUndefined();
    expect(answered.payload.length).toBe(MAX_PAYLOAD_BYTES);
  });

  it('clamps the page size and answers a get without a name without a request', async () => {
    const { ask, requests } = runnerWith(() => ok('{"kind":"ConfigMapList","items":[]}'));
    await ask({ limit: 0 });
    await ask({ limit: 9000 });
    await ask({ limit: 7 });
    expect(requests.map((r) => new URL(`https://x${r.path}`).searchParams.get('limit'))).toEqual([
      '500',
      '5000',
      '7',
    ]);
    const nameless = await ask({ verb: QueryVerb.QUERY_VERB_GET });
    expect(nameless.error).toEqual({
      code: QueryErrorCode.QUERY_ERROR_INTERNAL,
      message: 'get requires a name',
    });
    expect(requests).toHaveLength(3);
  });

  it('clamps the deadline (0 is 10 s, under 1 s is 1 s, over 30 s is 30 s) and runs under it', async () => {
    expect([0, -5, 1, 999, 1000, 5000, 30_000, 60_000].map(clampTimeoutMs)).toEqual([
      10_000, 10_000, 1000, 1000, 1000, 5000, 30_000, 30_000,
    ]);
    // An API server that never answers: the query asked for 1 ms and is given the 1 s floor.
    const { ask } = runnerWith(
      (request) =>
        new Promise<RestResponse>((_, reject) => {
          request.signal.addEventListener(
            'abort',
            () => {
              reject(new Error('aborted'));
            },
            { once: true },
          );
        }),
    );
    expect((await ask({ timeoutMs: 1 })).error).toEqual({
      code: QueryErrorCode.QUERY_ERROR_TIMEOUT,
      message: 'no answer from the API server within 1000 ms',
    });
  });

  it('maps API statuses to codes with the API server message', async () => {
    const statuses: [number, string, QueryErrorCode][] = [
      [403, 'Forbidden', QueryErrorCode.QUERY_ERROR_RBAC_DENIED],
      [401, 'Unauthorized', QueryErrorCode.QUERY_ERROR_RBAC_DENIED],
      [404, 'NotFound', QueryErrorCode.QUERY_ERROR_NOT_FOUND],
      [410, 'Expired', QueryErrorCode.QUERY_ERROR_EXPIRED],
      [504, 'Timeout', QueryErrorCode.QUERY_ERROR_TIMEOUT],
      [429, 'TooManyRequests', QueryErrorCode.QUERY_ERROR_RESOURCE_EXHAUSTED],
      [500, 'InternalError', QueryErrorCode.QUERY_ERROR_INTERNAL],
    ];
    for (const [status, reason, code] of statuses) {
      const { ask } = runnerWith(() => ({
        status,
        contentType: 'application/json',
        body: Buffer.from(JSON.stringify({ kind: 'Status', reason, message: `m-${reason}` })),
      }));
      expect((await ask({})).error, reason).toEqual({ code, message: `m-${reason}` });
    }
  });

  it('sends nothing to the API server for a refusal: disabled, another namespace, a bad reference', async () => {
    const answer = () => ok('{"kind":"ConfigMapList","items":[]}');
    const disabled = runnerWith(answer, 'query: {enabled: false, rules: [{resources: ["*"]}]}');
    expect((await disabled.ask({})).error?.code).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    const scoped = runnerWith(
      answer,
      'query: {rules: [{namespace: team-a, resources: [configmaps]}]}',
    );
    expect((await scoped.ask({ namespace: 'team-b' })).error?.code).toBe(
      QueryErrorCode.QUERY_ERROR_POLICY_DENIED,
    );
    expect(
      (
        await scoped.ask({
          namespace: 'team-a',
          ref: { group: '', version: 'v1', resource: './secrets' },
        })
      ).error?.code,
    ).toBe(QueryErrorCode.QUERY_ERROR_POLICY_DENIED);
    expect([...disabled.requests, ...scoped.requests]).toEqual([]);
    // The same runner reading what its rule allows does send: the count is live.
    await scoped.ask({ namespace: 'team-a' });
    expect(scoped.requests).toHaveLength(1);
  });
});
