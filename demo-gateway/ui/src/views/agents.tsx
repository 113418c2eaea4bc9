import { Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { ControlEvent, SessionInfo } from '../../../api-types.js';
import { fetchTimeline, sendBackpressure, sendHeartbeatInterval, sendShutdown } from '../api.js';
import { age, clock, dateTimeMs } from '../format.js';
import type { ViewProps } from '../views.js';

const THROTTLE_DELAY_MS = 2000;
/** Without a configured interval, the agent's default heartbeat (30 s). */
const DEFAULT_HEARTBEAT_MS = 30_000;
/** A heartbeat is late after this many intervals. */
const STALE_AFTER_INTERVALS = 2.5;

/** Stale: connected, but the heartbeats stopped (or never came) for 2.5 intervals. */
export function isStale(session: SessionInfo, now: number): boolean {
  if (session.state !== 'connected') return false;
  const interval = session.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_MS;
  const last = session.lastHeartbeat?.at ?? session.connectedAt;
  return now - last > interval * STALE_AFTER_INTERVALS;
}

function StateBadge({ session, stale }: { session: SessionInfo; stale: boolean }) {
  if (session.state === 'closed') {
    return (
      <span class="badge badge-closed state-closed" title={session.closeReason ?? ''}>
        closed
      </span>
    );
  }
  if (stale) {
    return (
      <span
        class="badge badge-stale state-stale"
        title="Connected, but no heartbeat for 2.5 heartbeat intervals: the agent may be stuck"
      >
        stale
      </span>
    );
  }
  return <span class="badge badge-ok state-connected">connected</span>;
}

function Health({ session, now }: { session: SessionInfo; now: number }) {
  const hb = session.lastHeartbeat;
  if (!hb) return <span class="muted">no heartbeat yet</span>;
  return (
    <span
      class={`status status-${hb.status || 'unknown'}`}
      title={`last heartbeat ${dateTimeMs(hb.at)}`}
    >
      {hb.status || '?'} · queue {hb.queueDepth} · dropped {hb.droppedMessages} · truncated{' '}
      {hb.truncatedLines} · rate-limited {hb.droppedRateLimited}
      {hb.metricsApi === 'unavailable' ? (
        <span
          class="metrics-api-unavailable"
          title="metrics.k8s.io is not served: no pod or node metrics until metrics-server is back"
        >
          {' '}
          · Metrics API unavailable
        </span>
      ) : null}
      <span class="muted"> · {age(now - hb.at)} ago</span>
    </span>
  );
}

type Pending = 'throttle' | 'unthrottle' | 'config' | 'shutdown' | undefined;
type Run = (what: Pending, action: () => Promise<{ sent: boolean; error?: string }>) => void;

/** Throttle or Unthrottle, whichever changes the session's state. */
function ThrottleButton(props: {
  session: SessionInfo;
  busy: boolean;
  pending: Pending;
  run: Run;
}) {
  const { session, busy, pending, run } = props;
  if (session.throttle) {
    return (
      <button
        type="button"
        class="btn btn-active"
        disabled={busy}
        title="Sends BackpressureSignal{throttle: false}: the agent sends at full speed again"
        onClick={() => {
          run('unthrottle', () => sendBackpressure(session.sessionId, false, 0));
        }}
      >
        {pending === 'unthrottle' ? 'Sending…' : 'Unthrottle'}
      </button>
    );
  }
  return (
    <button
      type="button"
      class="btn"
      disabled={busy}
      title={`Sends BackpressureSignal{throttle: true, delay_ms: ${THROTTLE_DELAY_MS}}: the agent waits ${THROTTLE_DELAY_MS} ms between sends and reports itself degraded`}
      onClick={() => {
        run('throttle', () => sendBackpressure(session.sessionId, true, THROTTLE_DELAY_MS));
      }}
    >
      {pending === 'throttle' ? 'Sending…' : 'Throttle'}
    </button>
  );
}

function Actions({ session }: { session: SessionInfo }) {
  const [pending, setPending] = useState<Pending>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const closed = session.state === 'closed';
  const run: Run = (what, action) => {
    setPending(what);
    setError(undefined);
    action()
      .then((r) => {
        if (!r.sent) setError(r.error ?? 'not sent: the session is closed');
      })
      .catch((err: unknown) => {
        setError(err instanceof Error ? err.message : String(err));
      })
      .finally(() => {
        setPending(undefined);
      });
  };
  const busy = closed || pending !== undefined;
  return (
    <div class="actions">
      <ThrottleButton session={session} busy={busy} pending={pending} run={run} />
      <button
        type="button"
        class="btn"
        disabled={busy}
        title="Sends ConfigUpdate{heartbeat_interval_sec: 5}: the agent heartbeats every 5 s"
        onClick={() => {
          run('config', () => sendHeartbeatInterval(session.sessionId, 5));
        }}
      >
        {pending === 'config' ? 'Sending…' : 'Heartbeat 5 s'}
      </button>
      <button
        type="button"
        class="btn btn-danger"
        disabled={busy}
        title="Sends Shutdown: the agent ends this session and reconnects after its backoff"
        onClick={() => {
          if (confirm(`Send Shutdown to agent ${session.agentId || session.sessionId}?`)) {
            run('shutdown', () => sendShutdown(session.sessionId, 'requested from the demo UI'));
          }
        }}
      >
        {pending === 'shutdown' ? 'Sending…' : 'Shutdown'}
      </button>
      {session.throttle && (
        <span class="throttle-state" data-field="throttle">
          throttled since {clock(session.throttle.since)}, {session.throttle.delayMs} ms between
          sends
        </span>
      )}
      {error && <span class="error-text">{error}</span>}
    </div>
  );
}

function Timeline({ sessionId, version }: { sessionId: string; version: number }) {
  const [events, setEvents] = useState<ControlEvent[]>([]);
  useEffect(() => {
    let stopped = false;
    fetchTimeline(sessionId)
      .then((e) => {
        if (!stopped) setEvents(e);
      })
      .catch(() => undefined);
    return () => {
      stopped = true;
    };
  }, [sessionId, version]);
  if (events.length === 0) return <p class="muted">No control messages yet.</p>;
  return (
    <ol class="timeline" data-session-id={sessionId}>
      {events.map((e) => (
        <li key={e.seq} class={`timeline-item kind-${e.kind}`} data-kind={e.kind}>
          <span class="mono muted">{clock(e.at)}</span>
          <span
            class={`direction ${e.outbound ? 'out' : 'in'}`}
            title={e.outbound ? 'gateway → agent' : 'agent → gateway'}
          >
            {e.outbound ? '→ agent' : '← agent'}
          </span>
          <span class="timeline-kind">{e.kind}</span>
          <span>{e.detail}</span>
        </li>
      ))}
    </ol>
  );
}

export function AgentsView({ overview, reachable }: ViewProps) {
  const sessions = overview?.sessions ?? [];
  const now = overview?.now ?? Date.now();
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const current = sessions.find((s) => s.sessionId === selected) ?? sessions[0];
  return (
    <section class={`view agents${reachable ? '' : ' stale-data'}`} data-view-body="agents">
      <header class="view-header">
        <h1>Agents</h1>
        <span class="muted">
          Sessions of collectors connected to this gateway. A session is stale when its heartbeats
          stop.
        </span>
      </header>
      {sessions.length === 0 ? (
        <div class="empty">
          No agent has connected yet. <code>npm run demo</code> starts a collector against a local
          cluster; a collector configured with this gateway&apos;s gRPC address connects here.
        </div>
      ) : (
        <table class="grid" id="sessions">
          <thead>
            <tr>
              <th>State</th>
              <th>Agent</th>
              <th>Cluster</th>
              <th>Started</th>
              <th>Health (last heartbeat)</th>
              <th title="messages received / acked / duplicates">Messages</th>
              <th>Acks</th>
            </tr>
          </thead>
          <tbody>
            {sessions.map((s) => {
              const stale = isStale(s, now) || !reachable;
              return (
                <Fragment key={s.sessionId}>
                  <tr
                    data-session-id={s.sessionId}
                    class={`session-row${s.sessionId === current?.sessionId ? ' selected' : ''}${stale ? ' stale' : ''}`}
                    onClick={() => {
                      setSelected(s.sessionId);
                    }}
                  >
                    <td>
                      <StateBadge session={s} stale={isStale(s, now)} />
                    </td>
                    <td>
                      <div class="strong">{s.agentId || '(no id)'}</div>
                      <div class="mono muted small" title="session id">
                        session {s.sessionId}
                      </div>
                      <div class="muted small">
                        {s.agentVersion} · proto {s.protoVersion} · {s.peer}
                      </div>
                    </td>
                    <td class="mono small">{s.clusterId}</td>
                    <td class="mono" title={dateTimeMs(s.connectedAt)}>
                      {clock(s.connectedAt)}
                      <div class="muted small">{age(now - s.connectedAt)} ago</div>
                    </td>
                    <td>
                      <Health session={s} now={now} />
                    </td>
                    <td class="mono">
                      {s.received} / {s.acked} / {s.duplicates}
                    </td>
                    <td data-field="acks">{s.deliveryAcks ? 'on' : 'off'}</td>
                  </tr>
                  <tr class="actions-row" data-actions-for={s.sessionId}>
                    <td colSpan={7}>
                      <Actions session={s} />
                    </td>
                  </tr>
                </Fragment>
              );
            })}
          </tbody>
        </table>
      )}
      {current && (
        <div class="panel">
          <h2>
            Timeline of <span class="mono">{current.agentId || current.sessionId}</span>
          </h2>
          <Timeline sessionId={current.sessionId} version={overview?.now ?? 0} />
        </div>
      )}
    </section>
  );
}
