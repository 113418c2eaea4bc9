// The State view: what the agent's cluster state watch reported, by resource and namespace with
// live (and deleted) counts, the objects of a selection with their last change, an object's
// sanitized JSON on click, and the newest changes as they arrive.
import { Fragment } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { KindCount, ObjectDetail, ObjectRow, StateChange } from '../../../cluster-types.js';
import { fetchClusterObject, fetchClusterObjects, fetchClusterSummary } from '../cluster-api.js';
import { age, clock } from '../format.js';
import type { ViewProps } from '../views.js';

const POLL_MS = 1000;

interface Selection {
  readonly resource: string;
  readonly namespace: string;
}

const label = (ns: string): string => (ns === '' ? '(cluster)' : ns);

function TypeBadge({ type }: { type: string }) {
  return <span class={`badge change change-${type.toLowerCase()}`}>{type}</span>;
}

/** Resources with their namespaces under them; a click selects one. */
function ResourceTree(props: {
  counts: readonly KindCount[];
  selected: Selection | undefined;
  select: (selection: Selection) => void;
}) {
  const byResource = useMemo(() => {
    const groups = new Map<string, KindCount[]>();
    for (const c of props.counts) groups.set(c.resource, [...(groups.get(c.resource) ?? []), c]);
    return [...groups.entries()];
  }, [props.counts]);
  if (byResource.length === 0)
    return <div class="empty">No state events yet: the agent sends them as it watches.</div>;
  return (
    <table class="grid small state-kinds">
      <thead>
        <tr>
          <th>kind / namespace</th>
          <th>live</th>
          <th>deleted</th>
        </tr>
      </thead>
      <tbody>
        {byResource.map(([resource, rows]) => (
          <Fragment key={resource}>
            <tr class="state-kind-row" data-resource={resource}>
              <td class="strong">
                {rows[0]?.kind ?? resource} <span class="muted small">{resource}</span>
              </td>
              <td class="live-count">{rows.reduce((n, r) => n + r.live, 0)}</td>
              <td class="deleted-count">{rows.reduce((n, r) => n + r.deleted, 0)}</td>
            </tr>
            {rows.map((r) => {
              const active =
                props.selected?.resource === r.resource && props.selected.namespace === r.namespace;
              return (
                <tr
                  key={`${resource}/${r.namespace}`}
                  class={`state-ns-row clickable${active ? ' selected' : ''}`}
                  data-resource={resource}
                  data-namespace={r.namespace}
                  onClick={() => {
                    props.select({ resource: r.resource, namespace: r.namespace });
                  }}
                >
                  <td class="indent">{label(r.namespace)}</td>
                  <td class="live-count">{r.live}</td>
                  <td class="deleted-count">{r.deleted}</td>
                </tr>
              );
            })}
          </Fragment>
        ))}
      </tbody>
    </table>
  );
}

function ObjectList(props: {
  objects: readonly ObjectRow[];
  now: number;
  open: (row: ObjectRow) => void;
  opened: ObjectDetail | undefined;
}) {
  return (
    <table class="grid small state-objects">
      <thead>
        <tr>
          <th>name</th>
          <th>last change</th>
          <th>changes</th>
          <th>age</th>
        </tr>
      </thead>
      <tbody>
        {props.objects.map((o) => (
          <tr
            key={`${o.namespace}/${o.name}`}
            class={`state-object clickable${o.lastType === 'DELETED' ? ' is-deleted' : ''}${
              props.opened?.name === o.name && props.opened.namespace === o.namespace
                ? ' selected'
                : ''
            }`}
            data-name={o.name}
            onClick={() => {
              props.open(o);
            }}
          >
            <td class="mono object-name">{o.name}</td>
            <td>
              <TypeBadge type={o.lastType} />
            </td>
            <td>{o.changes}</td>
            <td class="muted">{age(props.now - o.updatedAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function pretty(json: string): string {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

function Changes({ changes }: { changes: readonly StateChange[] }) {
  return (
    <ul class="state-changes small">
      {changes.map((c) => (
        <li key={c.seq} class="state-change">
          <span class="muted mono">{clock(c.at)}</span> <TypeBadge type={c.type} />{' '}
          <span class="mono">
            {c.resource} {c.namespace === '' ? '' : `${c.namespace}/`}
            {c.name}
          </span>
        </li>
      ))}
    </ul>
  );
}

export function StateView({ reachable }: ViewProps) {
  const [counts, setCounts] = useState<readonly KindCount[]>([]);
  const [changes, setChanges] = useState<readonly StateChange[]>([]);
  const [selected, setSelected] = useState<Selection | undefined>(undefined);
  const [objects, setObjects] = useState<readonly ObjectRow[]>([]);
  const [opened, setOpened] = useState<ObjectDetail | undefined>(undefined);
  const [now, setNow] = useState(Date.now());
  const [error, setError] = useState('');

  useEffect(() => {
    let alive = true;
    const poll = (): void => {
      Promise.all([
        fetchClusterSummary(),
        selected === undefined ? Promise.resolve(undefined) : fetchClusterObjects(selected),
      ]).then(
        ([summary, rows]) => {
          if (!alive) return;
          setCounts(summary.counts);
          setChanges(summary.changes);
          if (rows !== undefined) setObjects(rows);
          setNow(Date.now());
          setError('');
        },
        (err: unknown) => {
          if (alive) setError(err instanceof Error ? err.message : String(err));
        },
      );
    };
    poll();
    const timer = setInterval(poll, POLL_MS);
    return () => {
      alive = false;
      clearInterval(timer);
    };
  }, [selected]);

  const open = (row: ObjectRow): void => {
    fetchClusterObject(row).then(setOpened, (err: unknown) => {
      setError(err instanceof Error ? err.message : String(err));
    });
  };
  const live = counts.reduce((n, c) => n + c.live, 0);
  const deleted = counts.reduce((n, c) => n + c.deleted, 0);

  return (
    <section class={`view state-view${reachable ? '' : ' stale-data'}`}>
      <div class="view-header">
        <h1>State</h1>
        <span class="stat">
          <strong class="state-live-total">{live}</strong> live objects
        </span>
        <span class="stat muted">
          <strong class="state-deleted-total">{deleted}</strong> deleted
        </span>
        <span class="spacer" />
        {error === '' ? null : <span class="error-text">{error}</span>}
      </div>
      <div class="state-layout">
        <div class="panel state-tree">
          <h2>Resources</h2>
          <ResourceTree
            counts={counts}
            selected={selected}
            select={(s) => {
              setSelected(s);
              setObjects([]);
              setOpened(undefined);
            }}
          />
        </div>
        <div class="panel state-list">
          <h2>
            {selected === undefined
              ? 'Objects'
              : `${selected.resource} in ${label(selected.namespace)}`}
          </h2>
          {selected === undefined ? (
            <div class="empty">Pick a kind and namespace.</div>
          ) : (
            <ObjectList objects={objects} now={now} open={open} opened={opened} />
          )}
          <h2 class="changes-title">Latest changes</h2>
          <Changes changes={changes} />
        </div>
        <div class="panel state-detail">
          <h2>
            {opened === undefined ? (
              'Object'
            ) : (
              <>
                {opened.kind} {opened.namespace === '' ? '' : `${opened.namespace}/`}
                {opened.name} <TypeBadge type={opened.lastType} />
              </>
            )}
          </h2>
          {opened === undefined ? (
            <div class="empty">Click an object to see it as the agent sent it (sanitized).</div>
          ) : (
            <pre class="state-json mono">{pretty(opened.object)}</pre>
          )}
        </div>
      </div>
    </section>
  );
}
