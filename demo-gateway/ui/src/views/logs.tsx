import { Fragment } from 'preact';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { FollowedContainer, LogFacets, LogFilter, LogLine } from '../../../api-types.js';
import { fetchFacets, fetchLogs } from '../api.js';
import { age, clockMs, dateTimeMs, LEVELS } from '../format.js';
import type { ViewProps } from '../views.js';

const PAGE = 200;
const FOLLOW_BATCH = 500;
/** Rows kept on the page while following; older ones are a "Load older" away. */
const MAX_ROWS = 2000;
/** New lines held while paused; beyond this the resume reloads the newest page. */
const MAX_PENDING = 5000;
const POLL_MS = 1000;
const FACETS_MS = 5000;
const TEXT_DEBOUNCE_MS = 300;
/** Pixels from the bottom that still count as "at the bottom". */
const BOTTOM_SLACK = 24;

const EMPTY_FILTER: Required<LogFilter> = {
  namespace: '',
  workload: '',
  pod: '',
  container: '',
  level: '',
  text: '',
};

type Mode = 'follow' | 'paused';

const LEVEL_OPTIONS: readonly [string, string][] = [
  ['', 'Any level'],
  ['error', 'error'],
  ['warn,error', 'warn + error'],
  ['warn', 'warn'],
  ['info', 'info'],
  ['debug', 'debug'],
  ['unknown', 'no level'],
];

/** True while the reader has text selected inside the log table: rows must not move. */
function selectionInside(table: HTMLElement | null): boolean {
  const selection = window.getSelection();
  if (!table || !selection || selection.isCollapsed) return false;
  return table.contains(selection.anchorNode) || table.contains(selection.focusNode);
}

function Select(props: {
  label: string;
  name: keyof LogFilter;
  value: string;
  options: readonly string[];
  onChange: (value: string) => void;
}) {
  const values =
    props.value && !props.options.includes(props.value)
      ? [props.value, ...props.options]
      : props.options;
  return (
    <label class="filter">
      <span>{props.label}</span>
      <select
        name={props.name}
        data-filter={props.name}
        value={props.value}
        onChange={(e) => {
          props.onChange(e.currentTarget.value);
        }}
      >
        <option value="">all</option>
        {values.map((v) => (
          <option key={v} value={v}>
            {v}
          </option>
        ))}
      </select>
    </label>
  );
}

function FilterLink(props: { value: string; title: string; onPick: () => void }) {
  if (props.value === '') return <span class="muted">–</span>;
  return (
    <button
      type="button"
      class="cell-link"
      title={props.title}
      onClick={(e) => {
        e.stopPropagation();
        props.onPick();
      }}
    >
      {props.value}
    </button>
  );
}

function LogRow(props: {
  line: LogLine;
  expanded: boolean;
  onToggle: () => void;
  onFilter: (patch: Partial<LogFilter>) => void;
}) {
  const { line } = props;
  const level = LEVELS[line.level];
  if (line.kind === 'rate-limited') {
    return (
      <tr class="log-row marker" data-seq={line.seq} data-kind="rate-limited">
        <td />
        <td class="mono time">{clockMs(line.timeMs)}</td>
        <td>
          <span class="level level-warn">gap</span>
        </td>
        <td
          colSpan={5}
          class="marker-text"
          title="The agent's heartbeat counted lines dropped by its per-stream rate limit"
        >
          ⚠ {line.message}
        </td>
      </tr>
    );
  }
  const more = line.lineCount - 1;
  return (
    <tr
      class={`log-row level-row-${level}${props.expanded ? ' expanded' : ''}`}
      data-seq={line.seq}
      data-level={level}
      data-namespace={line.namespace}
      data-lines={line.lineCount}
    >
      <td class="toggle-cell">
        <button
          type="button"
          class="toggle"
          aria-expanded={props.expanded}
          title={props.expanded ? 'Collapse' : 'Show the whole record and its details'}
          onClick={props.onToggle}
        >
          {props.expanded ? '▾' : '▸'}
        </button>
      </td>
      <td
        class="mono time"
        title={`${dateTimeMs(line.timeMs)} (log time); received ${dateTimeMs(line.receivedAt)}`}
      >
        {clockMs(line.timeMs)}
      </td>
      <td>
        <span class={`level level-${level}`}>{level === 'unknown' ? '—' : level}</span>
      </td>
      <td class="ellipsis">
        <FilterLink
          value={line.namespace}
          title="Show only this namespace"
          onPick={() => {
            props.onFilter({ namespace: line.namespace });
          }}
        />
      </td>
      <td class="ellipsis">
        <FilterLink
          value={line.workload}
          title={`${line.workloadKind || 'workload'}: show only this workload`}
          onPick={() => {
            props.onFilter({ workload: line.workload });
          }}
        />
      </td>
      <td class="ellipsis">
        <FilterLink
          value={line.pod}
          title="Show only this pod"
          onPick={() => {
            props.onFilter({ pod: line.pod });
          }}
        />
      </td>
      <td class="ellipsis">
        <FilterLink
          value={line.container}
          title="Show only this container"
          onPick={() => {
            props.onFilter({ container: line.container });
          }}
        />
      </td>
      <td class="message mono">
        <span class="message-text">{line.message}</span>
        {more > 0 && (
          <button
            type="button"
            class="chip chip-lines"
            title="A multi-line record (a stack trace): show every line"
            onClick={props.onToggle}
          >
            +{more} line{more === 1 ? '' : 's'}
          </button>
        )}
        {line.truncated && (
          <span class="chip chip-truncated" title="The agent cut this line at its max_line_bytes">
            truncated
          </span>
        )}
      </td>
    </tr>
  );
}

function Details({ line }: { line: LogLine }) {
  return (
    <tr class="log-details" data-details-for={line.seq}>
      <td />
      <td colSpan={7}>
        <pre class="raw">{line.raw}</pre>
        <dl class="facts">
          <dt>log time</dt>
          <dd>{dateTimeMs(line.timeMs)}</dd>
          <dt>received</dt>
          <dd>{dateTimeMs(line.receivedAt)}</dd>
          <dt>node</dt>
          <dd>{line.node || '–'}</dd>
          <dt>workload</dt>
          <dd>{line.workload ? `${line.workloadKind} ${line.workload}` : '–'}</dd>
          <dt>lines</dt>
          <dd>{line.lineCount}</dd>
          <dt>seq</dt>
          <dd>{line.seq}</dd>
        </dl>
      </td>
    </tr>
  );
}

function Followed({ containers, now }: { containers: FollowedContainer[]; now: number }) {
  const [open, setOpen] = useState(false);
  return (
    <div class="followed">
      <button
        type="button"
        class="btn btn-plain"
        data-field="followed"
        title="Containers whose lines reached this gateway in the last 5 minutes. A container the collector follows but that wrote nothing since is not listed: the heartbeat does not carry the collector's list."
        onClick={() => {
          setOpen(!open);
        }}
      >
        {containers.length} container{containers.length === 1 ? '' : 's'} with lines in the last 5
        min {open ? '▴' : '▾'}
      </button>
      {open && (
        <ul class="followed-list">
          {containers.map((c) => (
            <li key={`${c.namespace}/${c.pod}/${c.container}`}>
              <span class="mono">
                {c.namespace}/{c.pod}/{c.container}
              </span>
              <span class="muted">
                {' '}
                {c.lines} lines · last {age(now - c.lastLineAt)} ago
              </span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Facet values for the filter dropdowns, refreshed every few seconds. */
function useFacets(): LogFacets {
  const [facets, setFacets] = useState<LogFacets>({
    namespaces: [],
    workloads: [],
    pods: [],
    containers: [],
  });
  useEffect(() => {
    let stopped = false;
    const load = (): void => {
      fetchFacets()
        .then((f) => {
          if (!stopped) setFacets(f);
        })
        .catch(() => undefined);
    };
    load();
    const timer = setInterval(load, FACETS_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  return facets;
}

const capRows = (rows: LogLine[]): LogLine[] =>
  rows.length > MAX_ROWS ? rows.slice(rows.length - MAX_ROWS) : rows;

interface Feed {
  readonly rows: LogLine[];
  readonly hasOlder: boolean;
  readonly loaded: boolean;
  readonly error: string | undefined;
  readonly mode: Mode;
  readonly pending: LogLine[];
  readonly setMode: (mode: Mode) => void;
  readonly resume: () => void;
  readonly loadOlder: (keepPosition: () => void) => void;
}

/**
 * The rows of one filter: the newest page, then every second the lines after the newest seen,
 * appended while following and held (rows unchanged) while paused or while the reader has text
 * selected in the table.
 */
function useLogFeed(
  filter: Required<LogFilter>,
  table: { current: HTMLTableElement | null },
): Feed {
  const [rows, setRows] = useState<LogLine[]>([]);
  const [hasOlder, setHasOlder] = useState(false);
  const [mode, setMode] = useState<Mode>('follow');
  const [pending, setPending] = useState<LogLine[]>([]);
  const [error, setError] = useState<string | undefined>(undefined);
  const [loaded, setLoaded] = useState(false);
  const [reload, setReload] = useState(0);
  const cursor = useRef(0);
  const modeRef = useRef<Mode>('follow');
  modeRef.current = mode;
  /** Bumped by every filter change: answers to an older filter are dropped. */
  const generation = useRef(0);

  useEffect(() => {
    const mine = ++generation.current;
    setLoaded(false);
    fetchLogs(filter, { limit: PAGE })
      .then((page) => {
        if (mine !== generation.current) return;
        cursor.current = page.newestSeq;
        setRows(page.lines);
        setHasOlder(page.hasOlder);
        setPending([]);
        setMode('follow');
        setError(undefined);
        setLoaded(true);
      })
      .catch((err: unknown) => {
        if (mine === generation.current) setError(err instanceof Error ? err.message : String(err));
      });
  }, [filter, reload]);

  useEffect(() => {
    if (!loaded) return undefined;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const take = (lines: LogLine[]): void => {
      if (lines.length === 0) return;
      if (modeRef.current === 'follow' && !selectionInside(table.current)) {
        setRows((r) => capRows([...r, ...lines]));
      } else {
        setPending((p) => [...p, ...lines].slice(-MAX_PENDING));
      }
    };
    const poll = async (): Promise<void> => {
      const mine = generation.current;
      try {
        const page = await fetchLogs(filter, { limit: FOLLOW_BATCH, after: cursor.current });
        if (stopped || mine !== generation.current) return;
        cursor.current = Math.max(cursor.current, page.newestSeq);
        take(page.lines);
      } catch {
        // The banner reports an unreachable gateway; the rows stay as they are.
      }
      if (!stopped) timer = setTimeout(() => void poll(), POLL_MS);
    };
    timer = setTimeout(() => void poll(), POLL_MS);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [filter, loaded, table]);

  const resume = (): void => {
    if (pending.length >= MAX_PENDING) {
      // Too much arrived while paused: start again from the newest page.
      setReload((n) => n + 1);
      return;
    }
    setRows((r) => capRows([...r, ...pending]));
    setPending([]);
    setMode('follow');
  };

  const loadOlder = (keepPosition: () => void): void => {
    const first = rows[0];
    if (!first) return;
    const mine = generation.current;
    fetchLogs(filter, { limit: PAGE, before: first.seq })
      .then((page) => {
        if (mine !== generation.current) return;
        setMode('paused');
        setRows((r) => [...page.lines, ...r]);
        setHasOlder(page.hasOlder);
        requestAnimationFrame(keepPosition);
      })
      .catch(() => undefined);
  };

  return { rows, hasOlder, loaded, error, mode, pending, setMode, resume, loadOlder };
}

/** The free-text box waits for the typing to pause before it filters. */
function useDebounced(text: string, apply: (text: string) => void): void {
  useEffect(() => {
    const timer = setTimeout(() => {
      apply(text);
    }, TEXT_DEBOUNCE_MS);
    return () => {
      clearTimeout(timer);
    };
  }, [text, apply]);
}

/** Follow keeps the newest row in view; scrolling up (scroll lock) pauses. */
function useScrollLock(feed: Feed, scroller: { current: HTMLDivElement | null }) {
  const programmaticScroll = useRef(false);
  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el || feed.mode !== 'follow') return;
    if (el.scrollHeight - el.scrollTop - el.clientHeight > 1) {
      programmaticScroll.current = true;
      el.scrollTop = el.scrollHeight;
    }
  }, [feed.rows, feed.mode, scroller]);
  const onScroll = (): void => {
    const el = scroller.current;
    if (!el) return;
    if (programmaticScroll.current) {
      programmaticScroll.current = false;
      return;
    }
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight <= BOTTOM_SLACK;
    if (!atBottom && feed.mode === 'follow') feed.setMode('paused');
  };
  const loadOlder = (): void => {
    const el = scroller.current;
    const heightBefore = el?.scrollHeight ?? 0;
    feed.loadOlder(() => {
      if (!el) return;
      // The rows the reader was looking at stay where they were.
      programmaticScroll.current = true;
      el.scrollTop += el.scrollHeight - heightBefore;
    });
  };
  return { onScroll, loadOlder };
}

function FollowButton({ feed }: { feed: Feed }) {
  if (feed.mode === 'follow') {
    return (
      <button
        type="button"
        id="follow-toggle"
        class="btn btn-live"
        data-mode="follow"
        title="Following: new lines appear at the bottom. Pause (or scroll up) to read without rows moving."
        onClick={() => {
          feed.setMode('paused');
        }}
      >
        <span class="pulse" /> Following · Pause
      </button>
    );
  }
  const count = feed.pending.length;
  return (
    <button
      type="button"
      id="follow-toggle"
      class="btn btn-paused"
      data-mode="paused"
      data-pending={count}
      title="Paused: rows stay still. Resume to add the new lines and follow again."
      onClick={feed.resume}
    >
      ❚❚ Paused · Resume{count > 0 ? ` (${count} new)` : ''}
    </button>
  );
}

function LogsHeader({ overview, feed }: { overview: ViewProps['overview']; feed: Feed }) {
  const stats = overview?.logs;
  return (
    <header class="view-header">
      <h1>Logs</h1>
      <span class="stat" data-field="rate" title="Lines received per second over the last 10 s">
        <strong>{stats?.linesPerSecond ?? 0}</strong> lines/s
      </span>
      <span class="stat" title="Log records stored by this gateway">
        <strong>{stats?.totalLines ?? 0}</strong> stored
      </span>
      <Followed containers={stats?.containers ?? []} now={overview?.now ?? Date.now()} />
      <span class="spacer" />
      <FollowButton feed={feed} />
    </header>
  );
}

function Filters(props: {
  filter: Required<LogFilter>;
  text: string;
  facets: LogFacets;
  onText: (text: string) => void;
  onPatch: (patch: Partial<LogFilter>) => void;
  onClear: () => void;
}) {
  const { filter, text, facets } = props;
  const patchFilter = props.onPatch;
  const setText = props.onText;
  const filtered = Object.values(filter).some((v) => v !== '') || text !== '';
  return (
    <div class="filters">
      <Select
        label="Namespace"
        name="namespace"
        value={filter.namespace}
        options={facets.namespaces}
        onChange={(v) => {
          patchFilter({ namespace: v });
        }}
      />
      <Select
        label="Workload"
        name="workload"
        value={filter.workload}
        options={facets.workloads}
        onChange={(v) => {
          patchFilter({ workload: v });
        }}
      />
      <Select
        label="Pod"
        name="pod"
        value={filter.pod}
        options={facets.pods}
        onChange={(v) => {
          patchFilter({ pod: v });
        }}
      />
      <Select
        label="Container"
        name="container"
        value={filter.container}
        options={facets.containers}
        onChange={(v) => {
          patchFilter({ container: v });
        }}
      />
      <label class="filter">
        <span>Level</span>
        <select
          name="level"
          data-filter="level"
          value={filter.level}
          onChange={(e) => {
            patchFilter({ level: e.currentTarget.value });
          }}
        >
          {LEVEL_OPTIONS.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
      </label>
      <label class="filter filter-text">
        <span>Text</span>
        <input
          type="search"
          data-filter="text"
          placeholder="search every line of a record"
          value={text}
          onInput={(e) => {
            setText(e.currentTarget.value);
          }}
        />
      </label>
      {filtered && (
        <button
          type="button"
          class="btn btn-plain"
          title="Clear every filter"
          onClick={props.onClear}
        >
          Clear
        </button>
      )}
    </div>
  );
}

function Empty({ filtered }: { filtered: boolean }) {
  return (
    <div class="empty">
      {filtered
        ? 'No line matches these filters yet; new matching lines appear here as they arrive.'
        : 'No log lines yet. Pods that write logs in the cluster appear here within seconds.'}
    </div>
  );
}

export function LogsView({ overview, reachable }: ViewProps) {
  const [filter, setFilter] = useState<Required<LogFilter>>(EMPTY_FILTER);
  const [text, setText] = useState('');
  const [expanded, setExpanded] = useState<ReadonlySet<number>>(new Set());
  const facets = useFacets();
  const scroller = useRef<HTMLDivElement>(null);
  const table = useRef<HTMLTableElement>(null);
  const feed = useLogFeed(filter, table);
  const { onScroll, loadOlder } = useScrollLock(feed, scroller);
  const applyText = useCallback((value: string) => {
    setFilter((f) => (f.text === value ? f : { ...f, text: value }));
  }, []);
  useDebounced(text, applyText);

  const patchFilter = useCallback((patch: Partial<LogFilter>) => {
    setFilter((f) => ({ ...f, ...patch }));
    if (patch.text !== undefined) setText(patch.text);
  }, []);

  const toggle = (seq: number): void => {
    setExpanded((e) => {
      const next = new Set(e);
      if (next.has(seq)) next.delete(seq);
      else next.add(seq);
      return next;
    });
  };
  const { rows, hasOlder, loaded } = feed;
  const filtered = Object.values(filter).some((v) => v !== '');
  return (
    <section class={`view logs${reachable ? '' : ' stale-data'}`} data-view-body="logs">
      <LogsHeader overview={overview} feed={feed} />
      <Filters
        filter={filter}
        text={text}
        facets={facets}
        onText={setText}
        onPatch={patchFilter}
        onClear={() => {
          setText('');
          setFilter(EMPTY_FILTER);
        }}
      />
      {feed.error && <div class="error-text">{feed.error}</div>}
      <div class="log-scroller" ref={scroller} onScroll={onScroll}>
        {hasOlder && (
          <button type="button" class="btn btn-plain load-older" onClick={loadOlder}>
            Load older lines
          </button>
        )}
        <table class="log-table" id="log-table" ref={table} data-rows={rows.length}>
          <colgroup>
            <col class="c-toggle" />
            <col class="c-time" />
            <col class="c-level" />
            <col class="c-ns" />
            <col class="c-workload" />
            <col class="c-pod" />
            <col class="c-container" />
            <col />
          </colgroup>
          <thead>
            <tr>
              <th />
              <th>Time</th>
              <th>Level</th>
              <th>Namespace</th>
              <th>Workload</th>
              <th>Pod</th>
              <th>Container</th>
              <th>Message</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((line) => (
              <Fragment key={line.seq}>
                <LogRow
                  line={line}
                  expanded={expanded.has(line.seq)}
                  onToggle={() => {
                    toggle(line.seq);
                  }}
                  onFilter={patchFilter}
                />
                {expanded.has(line.seq) && <Details line={line} />}
              </Fragment>
            ))}
          </tbody>
        </table>
        {loaded && rows.length === 0 && <Empty filtered={filtered} />}
      </div>
    </section>
  );
}
