import { useEffect, useState } from 'preact/hooks';
import type { Overview } from '../../api-types.js';
import { fetchOverview } from './api.js';
import { clock } from './format.js';
import { DEFAULT_VIEW, VIEWS, type ViewDefinition } from './views.js';

const POLL_MS = 1000;

function currentViewId(): string {
  // A view may carry its own query after '?' (the Nodes view links to #/consoles?node=NAME).
  const id = location.hash.replace(/^#\/?/, '').split('?')[0] ?? '';
  return VIEWS.some((v) => v.id === id) ? id : DEFAULT_VIEW;
}

interface Connection {
  readonly overview: Overview | undefined;
  readonly reachable: boolean;
  /** When the last poll succeeded (browser clock). */
  readonly lastOkAt: number | undefined;
  /** When the gateway stopped answering. */
  readonly downSince: number | undefined;
  readonly error: string | undefined;
  readonly polls: number;
}

/** Polls the overview every second; a failed or slow poll turns the banner red. */
function useConnection(): Connection {
  const [connection, setConnection] = useState<Connection>({
    overview: undefined,
    reachable: true,
    lastOkAt: undefined,
    downSince: undefined,
    error: undefined,
    polls: 0,
  });
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async (): Promise<void> => {
      try {
        const overview = await fetchOverview();
        if (stopped) return;
        setConnection((c) => ({
          overview,
          reachable: true,
          lastOkAt: Date.now(),
          downSince: undefined,
          error: undefined,
          polls: c.polls + 1,
        }));
      } catch (err: unknown) {
        if (stopped) return;
        setConnection((c) => ({
          ...c,
          reachable: false,
          downSince: c.downSince ?? Date.now(),
          error: err instanceof Error ? err.message : String(err),
          polls: c.polls + 1,
        }));
      }
      timer = setTimeout(() => void poll(), POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  return connection;
}

function DownBanner({ connection }: { connection: Connection }) {
  const lastOk = connection.lastOkAt === undefined ? 'never' : clock(connection.lastOkAt);
  return (
    <div id="connection" class="banner banner-down" data-state="unreachable" role="alert">
      <span class="dot" />
      <strong>Gateway unreachable</strong>
      <span>
        since {clock(connection.downSince ?? Date.now())} ({connection.error ?? 'no answer'}); the
        data below is from {lastOk} and may be stale. Retrying every second.
      </span>
    </div>
  );
}

function Banner({ connection }: { connection: Connection }) {
  const { overview } = connection;
  if (!connection.reachable) return <DownBanner connection={connection} />;
  if (!overview) {
    return (
      <div id="connection" class="banner banner-wait" data-state="connecting">
        <span class="dot" />
        <strong>Connecting to the gateway…</strong>
      </div>
    );
  }
  const connected = overview.sessions.filter((s) => s.state === 'connected').length;
  return (
    <div
      id="connection"
      class="banner banner-up"
      data-state="connected"
      data-polls={connection.polls}
    >
      <span class="dot" />
      <strong>Gateway connected</strong>
      <span>
        {connected} agent{connected === 1 ? '' : 's'} connected · {overview.logs.linesPerSecond}{' '}
        lines/s · {overview.totals.stored} messages stored · updated{' '}
        {clock(connection.lastOkAt ?? overview.now)}
      </span>
    </div>
  );
}

function NavItem({
  view,
  active,
  count,
}: {
  view: ViewDefinition;
  active: boolean;
  count: number;
}) {
  return (
    <a
      href={`#/${view.id}`}
      class={`nav-item${active ? ' active' : ''}${view.component ? '' : ' planned'}`}
      data-view={view.id}
      title={view.component ? view.title : `${view.title}: coming with its issue`}
    >
      <span class="nav-icon">{view.icon}</span>
      <span class="nav-title">{view.title}</span>
      {count > 0 && <span class="nav-count">{count}</span>}
      {!view.component && <span class="nav-soon">soon</span>}
    </a>
  );
}

function Placeholder({ view }: { view: ViewDefinition }) {
  return (
    <section class="view placeholder" data-view-body={view.id}>
      <h1>{view.title}</h1>
      <p>{view.planned}</p>
      <p class="muted">
        This view is registered in the navigation (demo-gateway/ui/src/views.ts) and gets its
        component with the feature that sends this data.
      </p>
    </section>
  );
}

function countOf(view: ViewDefinition, overview: Overview | undefined): number {
  if (!overview) return 0;
  if (view.count) return view.count(overview);
  return view.kinds.reduce((n, kind) => n + (overview.totals.byKind[kind] ?? 0), 0);
}

export function App() {
  const connection = useConnection();
  const [viewId, setViewId] = useState(currentViewId);
  useEffect(() => {
    const onHash = (): void => {
      setViewId(currentViewId());
    };
    window.addEventListener('hashchange', onHash);
    return () => {
      window.removeEventListener('hashchange', onHash);
    };
  }, []);
  const view = VIEWS.find((v) => v.id === viewId) ?? VIEWS[0];
  const Component = view?.component;
  return (
    <div class="frame">
      <nav class="sidebar">
        <div class="brand">
          <span class="brand-mark">K</span>
          <div>
            <div class="brand-name">Kubexa</div>
            <div class="brand-sub">demo gateway</div>
          </div>
        </div>
        {VIEWS.map((v) => (
          <NavItem
            key={v.id}
            view={v}
            active={v.id === view?.id}
            count={countOf(v, connection.overview)}
          />
        ))}
      </nav>
      <div class="content" data-current-view={view?.id}>
        <Banner connection={connection} />
        {Component ? (
          <Component overview={connection.overview} reachable={connection.reachable} />
        ) : (
          view && <Placeholder view={view} />
        )}
      </div>
    </div>
  );
}
