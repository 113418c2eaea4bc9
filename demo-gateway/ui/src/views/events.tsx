// The Events view: Kubernetes Events and pod lifecycle events as they arrive, newest first,
// with the object, its workload, the series count and the age; lifecycle events (OOMKilled,
// CrashLoopBackOff, Evicted, image pull failures...) highlighted by severity; a filter box.
import { useEffect, useState } from 'preact/hooks';
import type { EventRow } from '../../../cluster-types.js';
import { fetchEvents } from '../cluster-api.js';
import { age } from '../format.js';
import type { ViewProps } from '../views.js';

const POLL_MS = 1000;

function SourceBadge({ source }: { source: EventRow['source'] }) {
  return (
    <span class={`badge event-source source-${source}`}>
      {source === 'lifecycle' ? 'pod lifecycle' : 'kube event'}
    </span>
  );
}

export function EventsView({ reachable }: ViewProps) {
  const [filter, setFilter] = useState('');
  const [events, setEvents] = useState<readonly EventRow[]>([]);
  const [now, setNow] = useState(Date.now());
  const [error, setError] = useState('');

  useEffect(() => {
    let alive = true;
    const poll = (): void => {
      fetchEvents(filter.trim()).then(
        (page) => {
          if (!alive) return;
          setEvents(page.events);
          setNow(page.now);
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
  }, [filter]);

  const warnings = events.filter((e) => e.severity !== 'info').length;
  return (
    <section class={`view events-view${reachable ? '' : ' stale-data'}`}>
      <div class="view-header">
        <h1>Events</h1>
        <span class="stat">
          <strong class="events-total">{events.length}</strong> shown
        </span>
        <span class="stat">
          <strong class="events-warnings">{warnings}</strong> warnings and errors
        </span>
        <span class="spacer" />
        {error === '' ? null : <span class="error-text">{error}</span>}
        <input
          class="events-filter"
          placeholder="filter: reason, pod, workload, namespace, message"
          value={filter}
          onInput={(e) => {
            setFilter((e.target as HTMLInputElement).value);
          }}
        />
      </div>
      {events.length === 0 ? (
        <div class="empty">
          {filter === ''
            ? 'No events yet: Kubernetes Events and pod lifecycle events appear here as they happen.'
            : `No event matches “${filter}”.`}
        </div>
      ) : (
        <div class="events-scroll">
          <table class="grid small events-table">
            <thead>
              <tr>
                <th>reason</th>
                <th>object</th>
                <th>workload</th>
                <th>count</th>
                <th>age</th>
                <th>message</th>
              </tr>
            </thead>
            <tbody>
              {events.map((e) => (
                <tr
                  key={e.seq}
                  class={`event-row severity-${e.severity} from-${e.source}`}
                  data-reason={e.reason}
                  data-object={e.object}
                >
                  <td class="event-reason strong">
                    {e.reason} <SourceBadge source={e.source} />
                  </td>
                  <td class="mono event-object">
                    <span class="muted">{e.namespace === '' ? '' : `${e.namespace}/`}</span>
                    {e.object}
                  </td>
                  <td class="mono event-workload">{e.workload}</td>
                  <td class="event-count">{e.count}</td>
                  <td class="muted event-age">{age(now - e.lastAt)}</td>
                  <td class="event-message">{e.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
