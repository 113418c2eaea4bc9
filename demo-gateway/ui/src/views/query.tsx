// The Query view: the agent's capability catalog (the collector's RBAC and the cluster owner's
// policy side by side, and the executor's gates), and live queries sent to the agent on its
// stream, answered as a table (TABLE view) or JSON (FULL view), refusals with code and reason.
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { ViewProps } from '../views.js';

interface CatalogEntry {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly canList: boolean;
  readonly canWatch: boolean;
  readonly probeFailed: boolean;
  readonly policyList: boolean;
  readonly policyGet: boolean;
}

interface Capability {
  readonly name: string;
  readonly enabled: boolean;
  readonly rbacAllowed: boolean;
  readonly checks: readonly {
    resource: string;
    subresource: string;
    verb: string;
    allowed: boolean;
    failed: boolean;
    reason: string;
  }[];
}

interface Catalog {
  readonly sessionId: string;
  readonly fingerprint: string;
  readonly collectedAt: number;
  readonly failedGroups: readonly string[];
  readonly entries: readonly CatalogEntry[];
  readonly executor: {
    state: string;
    version: string;
    error: string;
    capabilities: readonly Capability[];
  };
}

interface Answer {
  readonly error?: { code: string; message: string };
  readonly payload: string;
  readonly continueToken: string;
  readonly remaining: number;
  readonly truncated: boolean;
  readonly bytes: number;
  readonly ms: number;
}

interface Table {
  readonly columnDefinitions: readonly { name: string; priority?: number }[];
  readonly rows: readonly { cells: readonly unknown[] }[];
}

const keyOf = (e: CatalogEntry) => `${e.group}/${e.version}/${e.resource}`;
const label = (e: CatalogEntry) =>
  e.group === '' ? `${e.version}/${e.resource}` : `${e.group}/${e.version}/${e.resource}`;

function Verdict({ ok, failed, text }: { ok: boolean; failed?: boolean; text: string }) {
  if (failed === true)
    return (
      <span class="badge badge-stale" title="the access review failed">
        {text} ?
      </span>
    );
  return (
    <span class={`badge ${ok ? 'badge-ok' : 'badge-closed'} verdict-${ok ? 'yes' : 'no'}`}>
      {text} {ok ? '✓' : '✗'}
    </span>
  );
}

async function loadCatalog(): Promise<Catalog> {
  const response = await fetch('/api/query/catalog', { signal: AbortSignal.timeout(4000) });
  const body = (await response.json()) as Catalog & { error?: string };
  if (!response.ok) throw new Error(body.error ?? `HTTP ${response.status}`);
  return body;
}

async function runQuery(body: Record<string, unknown>): Promise<Answer> {
  const response = await fetch('/api/query', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  const answer = (await response.json()) as Answer & { error?: unknown };
  if (!response.ok) {
    const message = typeof answer.error === 'string' ? answer.error : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return answer;
}

function ExecutorPanel({ executor }: { executor: Catalog['executor'] }) {
  return (
    <div class="panel executor-side">
      <h2>Executor</h2>
      <div class="small">
        state <strong class="executor-state">{executor.state}</strong>
        {executor.version !== '' && <span class="muted"> · {executor.version}</span>}
        {executor.error !== '' && <span class="error-text"> · {executor.error}</span>}
      </div>
      <table class="grid small">
        <thead>
          <tr>
            <th>capability</th>
            <th>gate</th>
            <th>executor RBAC</th>
            <th>reviews</th>
          </tr>
        </thead>
        <tbody>
          {executor.capabilities.map((c) => (
            <tr key={c.name} class={`capability capability-${c.name}`}>
              <td class="mono">{c.name}</td>
              <td>
                {c.enabled ? (
                  <span class="badge badge-ok">on</span>
                ) : (
                  <span class="badge badge-closed gate-off">off</span>
                )}
              </td>
              <td>
                {c.enabled ? (
                  <Verdict ok={c.rbacAllowed} text="allowed" />
                ) : (
                  <span class="muted">—</span>
                )}
              </td>
              <td class="mono small">
                {c.checks
                  .map(
                    (k) =>
                      `${k.verb} ${k.resource}${k.subresource === '' ? '' : `/${k.subresource}`} ${k.failed ? '?' : k.allowed ? '✓' : '✗'}`,
                  )
                  .join(' · ')}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Result({ answer, view }: { answer: Answer; view: 'table' | 'full' }) {
  if (answer.error !== undefined) {
    return (
      <div class="panel refusal">
        <strong class="refusal-code">{answer.error.code}</strong>{' '}
        <span class="refusal-reason">{answer.error.message}</span>
      </div>
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.payload);
  } catch {
    parsed = undefined;
  }
  const table =
    view === 'table' && (parsed as { kind?: string } | undefined)?.kind === 'Table'
      ? (parsed as Table)
      : undefined;
  return (
    <div class="panel result">
      <div class="small muted">
        {answer.bytes} bytes in {answer.ms} ms{answer.truncated ? ' · truncated at 8 MiB' : ''}
        {answer.remaining > 0 ? ` · about ${answer.remaining} more` : ''}
      </div>
      {table === undefined ? (
        <pre class="mono result-json">{JSON.stringify(parsed, null, 2)}</pre>
      ) : (
        <table class="grid result-table">
          <thead>
            <tr>
              {table.columnDefinitions
                .filter((c) => (c.priority ?? 0) === 0)
                .map((c) => (
                  <th key={c.name}>{c.name}</th>
                ))}
            </tr>
          </thead>
          <tbody>
            {table.rows.map((row, i) => (
              <tr key={i}>
                {row.cells
                  .filter((_, j) => (table.columnDefinitions[j]?.priority ?? 0) === 0)
                  .map((cell, j) => (
                    <td key={j} class="mono">
                      {String(cell)}
                    </td>
                  ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function QueryHeader({ catalog, reachable }: { catalog: Catalog | undefined; reachable: boolean }) {
  return (
    <header class="view-header">
      <h1>Query</h1>
      <span class="spacer" />
      {catalog !== undefined && (
        <span class="small muted catalog-meta" title={catalog.fingerprint}>
          {catalog.entries.length} resources · {catalog.fingerprint.slice(0, 19)}…
          {catalog.failedGroups.length > 0 && (
            <span class="error-text failed-groups">
              {' '}
              · discovery failed: {catalog.failedGroups.join(', ')}
            </span>
          )}
        </span>
      )}
      {!reachable && <span class="stale-data">gateway unreachable</span>}
    </header>
  );
}

export function QueryView({ reachable }: ViewProps) {
  const [catalog, setCatalog] = useState<Catalog | undefined>(undefined);
  const [catalogError, setCatalogError] = useState('');
  const [filter, setFilter] = useState('');
  const [selected, setSelected] = useState('/v1/pods');
  const [namespace, setNamespace] = useState('');
  const [name, setName] = useState('');
  const [selector, setSelector] = useState('');
  const [view, setView] = useState<'table' | 'full'>('table');
  const [limit, setLimit] = useState('50');
  const [answer, setAnswer] = useState<Answer | undefined>(undefined);
  const [answerView, setAnswerView] = useState<'table' | 'full'>('table');
  const [running, setRunning] = useState(false);
  const [failure, setFailure] = useState('');

  useEffect(() => {
    let alive = true;
    const poll = () => {
      loadCatalog().then(
        (c) => {
          if (!alive) return;
          setCatalog(c);
          setCatalogError('');
        },
        (err: unknown) => {
          if (alive) setCatalogError(err instanceof Error ? err.message : String(err));
        },
      );
    };
    poll();
    const timer = setInterval(poll, 5000);
    return () => {
      alive = false;
      clearInterval(timer);
    };
  }, []);

  const entries = useMemo(() => {
    const text = filter.trim().toLowerCase();
    return (catalog?.entries ?? [])
      .filter((e) => text === '' || label(e).includes(text) || e.kind.toLowerCase().includes(text))
      .slice()
      .sort((a, b) => label(a).localeCompare(label(b)));
  }, [catalog, filter]);
  const chosen = catalog?.entries.find((e) => keyOf(e) === selected);

  const ask = (continueToken = '') => {
    if (chosen === undefined) return;
    setRunning(true);
    setFailure('');
    runQuery({
      sessionId: catalog?.sessionId,
      group: chosen.group,
      version: chosen.version,
      resource: chosen.resource,
      namespace,
      name,
      labelSelector: selector,
      view,
      limit: Number(limit) || 0,
      continueToken,
    }).then(
      (a) => {
        setAnswer(a);
        setAnswerView(view);
        setRunning(false);
      },
      (err: unknown) => {
        setFailure(err instanceof Error ? err.message : String(err));
        setRunning(false);
      },
    );
  };

  return (
    <section class="view query-view">
      <QueryHeader catalog={catalog} reachable={reachable} />
      {catalog === undefined ? (
        <div class="empty">
          {catalogError === '' ? 'Waiting for the agent’s capability catalog…' : catalogError}
        </div>
      ) : (
        <div class="query-layout">
          <div class="panel catalog">
            <h2>Resources</h2>
            <input
              class="catalog-filter"
              placeholder="filter (pods, apps, Deployment…)"
              value={filter}
              onInput={(e) => {
                setFilter((e.target as HTMLInputElement).value);
              }}
            />
            <div class="catalog-scroll">
              <table class="grid small catalog-table">
                <thead>
                  <tr>
                    <th>resource</th>
                    <th>kind</th>
                    <th title="The collector's ServiceAccount (SelfSubjectAccessReview)">RBAC</th>
                    <th title="The cluster owner's query.* policy">policy</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.map((e) => (
                    <tr
                      key={keyOf(e)}
                      class={`catalog-row ${keyOf(e) === selected ? 'selected' : ''}`}
                      data-resource={label(e)}
                      onClick={() => {
                        setSelected(keyOf(e));
                      }}
                    >
                      <td class="mono">{label(e)}</td>
                      <td>
                        {e.kind}
                        {e.namespaced ? '' : <span class="muted"> (cluster)</span>}
                      </td>
                      <td class="rbac-verdict">
                        <Verdict ok={e.canList} failed={e.probeFailed} text="list" />{' '}
                        <Verdict ok={e.canWatch} failed={e.probeFailed} text="watch" />
                      </td>
                      <td class="policy-verdict">
                        <Verdict ok={e.policyList} text="list" />{' '}
                        <Verdict ok={e.policyGet} text="get" />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </div>
          <div class="query-side">
            <div class="panel query-form">
              <h2>
                Ask{' '}
                {chosen === undefined ? (
                  '…'
                ) : (
                  <span class="mono chosen-resource">{label(chosen)}</span>
                )}
              </h2>
              <label>
                namespace{' '}
                <input
                  class="q-namespace"
                  value={namespace}
                  placeholder="all"
                  onInput={(e) => {
                    setNamespace((e.target as HTMLInputElement).value);
                  }}
                />
              </label>
              <label>
                name{' '}
                <input
                  class="q-name"
                  value={name}
                  placeholder="(list)"
                  onInput={(e) => {
                    setName((e.target as HTMLInputElement).value);
                  }}
                />
              </label>
              <label>
                label selector{' '}
                <input
                  class="q-selector"
                  value={selector}
                  placeholder="app=web"
                  onInput={(e) => {
                    setSelector((e.target as HTMLInputElement).value);
                  }}
                />
              </label>
              <label>
                page size{' '}
                <input
                  class="q-limit"
                  type="number"
                  min="1"
                  value={limit}
                  onInput={(e) => {
                    setLimit((e.target as HTMLInputElement).value);
                  }}
                />
              </label>
              <label>
                view{' '}
                <select
                  class="q-view"
                  value={view}
                  onChange={(e) => {
                    setView((e.target as HTMLSelectElement).value as 'table' | 'full');
                  }}
                >
                  <option value="table">table</option>
                  <option value="full">full (JSON)</option>
                </select>
              </label>
              <button
                class="btn q-run"
                disabled={running || chosen === undefined}
                onClick={() => {
                  ask();
                }}
              >
                {running ? 'asking…' : name.trim() === '' ? 'List' : 'Get'}
              </button>
              {answer !== undefined && answer.continueToken !== '' && (
                <button
                  class="btn btn-plain q-next"
                  disabled={running}
                  onClick={() => {
                    ask(answer.continueToken);
                  }}
                >
                  Next page
                </button>
              )}
              {failure !== '' && <div class="error-text">{failure}</div>}
            </div>
            {answer !== undefined && <Result answer={answer} view={answerView} />}
            <ExecutorPanel executor={catalog.executor} />
          </div>
        </div>
      )}
    </section>
  );
}
