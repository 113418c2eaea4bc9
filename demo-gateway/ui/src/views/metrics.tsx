// The Metrics view: node and pod CPU and memory from metrics.k8s.io as live line charts (uPlot,
// bundled with the page), the families the custom Prometheus endpoints served, and the cluster
// profiles received, each downloadable as the raw pprof file the agent shipped.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './metrics.css';
import type { FamilyRow, MetricSeries, MetricsSnapshot, ProfileRow } from '../../../api-types.js';
import { clock, dateTimeMs } from '../format.js';
import type { ViewProps } from '../views.js';

const POLL_MS = 3000;
/** Pods drawn per chart: the busiest by their latest CPU (the rest are listed as a count). */
const MAX_PODS_CHARTED = 8;
const CHART_HEIGHT = 220;
const PALETTE = [
  '#3b6ef5',
  '#1f9d55',
  '#d12f3c',
  '#c77c02',
  '#8e44ad',
  '#16a2b8',
  '#e8590c',
  '#5c6f82',
];

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path, { signal: AbortSignal.timeout(4000) });
  if (!response.ok) throw new Error(`${path}: HTTP ${String(response.status)}`);
  return (await response.json()) as T;
}

interface Loaded {
  readonly series: MetricsSnapshot;
  readonly families: FamilyRow[];
  readonly profiles: ProfileRow[];
}

function usePolled(): { data: Loaded | undefined; error: string } {
  const [data, setData] = useState<Loaded | undefined>();
  const [error, setError] = useState('');
  useEffect(() => {
    let stopped = false;
    const load = async () => {
      try {
        const [series, families, profiles] = await Promise.all([
          getJson<MetricsSnapshot>('/api/metrics/series'),
          getJson<FamilyRow[]>('/api/metrics/families'),
          getJson<ProfileRow[]>('/api/metrics/profiles'),
        ]);
        if (!stopped) {
          setData({ series, families, profiles });
          setError('');
        }
      } catch (err: unknown) {
        if (!stopped) setError(err instanceof Error ? err.message : String(err));
      }
    };
    void load();
    const timer = setInterval(() => void load(), POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  return { data, error };
}

type Measure = 'cpu' | 'memory';

/** uPlot's aligned data: shared x (unix seconds), one y array per series (null = no sample). */
function align(series: readonly MetricSeries[], measure: Measure): uPlot.AlignedData {
  const column = measure === 'cpu' ? 1 : 2;
  const times = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort(
    (a, b) => a - b,
  );
  const index = new Map(times.map((t, i) => [t, i]));
  const ys = series.map((s) => {
    const y: (number | null)[] = times.map(() => null);
    for (const point of s.points) {
      const at = index.get(point[0]);
      // CPU in millicores, memory in MiB: the units people read these in.
      if (at !== undefined)
        y[at] = measure === 'cpu' ? point[column] * 1000 : point[column] / 1048576;
    }
    return y;
  });
  return [times.map((t) => t / 1000), ...ys];
}

const unitOf = (measure: Measure) => (measure === 'cpu' ? 'm' : ' MiB');

function Chart({
  id,
  title,
  series,
  measure,
}: {
  id: string;
  title: string;
  series: readonly MetricSeries[];
  measure: Measure;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const labels = series.map((s) => s.key).join('\n');
  const data = useMemo(() => align(series, measure), [series, measure]);
  const points = series.reduce((sum, s) => sum + s.points.length, 0);

  // A new set of series needs a new plot; new points only new data.
  useEffect(() => {
    const element = box.current;
    if (element === null || series.length === 0) return undefined;
    const unit = unitOf(measure);
    const chart = new uPlot(
      {
        width: Math.max(320, element.clientWidth),
        height: CHART_HEIGHT,
        scales: {
          x: { time: true },
          y: { range: (_u, min, max) => [0, Math.max(max, min, 1) * 1.25] },
        },
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.key,
            stroke: PALETTE[i % PALETTE.length] ?? '#3b6ef5',
            width: 2,
            spanGaps: true,
            points: { show: true, size: 4 },
            value: (_u: uPlot, v: number | null) =>
              v === null ? '—' : `${v.toFixed(measure === 'cpu' ? 0 : 1)}${unit}`,
          })),
        ],
        axes: [
          {},
          {
            size: 64,
            values: (_u, ticks) => ticks.map((t) => `${String(Math.round(t))}${unit}`),
          },
        ],
        legend: { live: false },
      },
      data,
      element,
    );
    plot.current = chart;
    const resize = new ResizeObserver(() => {
      chart.setSize({ width: Math.max(320, element.clientWidth), height: CHART_HEIGHT });
    });
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = undefined;
    };
    // Rebuilt when the labels change; data changes go through setData below.
  }, [labels, measure]);

  useEffect(() => {
    const chart = plot.current;
    if (chart === undefined) return;
    chart.setData(data);
    // What uPlot holds now (sample times drawn), for tests and curious readers of the DOM.
    if (box.current !== null) box.current.dataset['plotted'] = String(chart.data[0].length);
  }, [data]);

  return (
    <div class="panel metrics-chart-panel">
      <h2>{title}</h2>
      {series.length === 0 ? (
        <div class="empty small">no samples yet</div>
      ) : (
        <div
          ref={box}
          class={`metrics-chart chart-${id}`}
          data-series={series.length}
          data-points={points}
        />
      )}
    </div>
  );
}

/** The busiest pods by their latest CPU sample. */
function busiest(pods: readonly MetricSeries[]): MetricSeries[] {
  const latest = (s: MetricSeries) => s.points.at(-1)?.[1] ?? 0;
  return [...pods]
    .sort((a, b) => latest(b) - latest(a) || a.key.localeCompare(b.key))
    .slice(0, MAX_PODS_CHARTED)
    .sort((a, b) => a.key.localeCompare(b.key));
}

function formatValue(value: number | null): string {
  if (value === null) return 'NaN/±Inf';
  if (Number.isInteger(value)) return String(value);
  return value.toPrecision(6).replace(/\.?0+$/, '');
}

function labelText(labels: Record<string, string>): string {
  const entries = Object.entries(labels);
  return entries.length === 0 ? '' : `{${entries.map(([k, v]) => `${k}="${v}"`).join(', ')}}`;
}

function FamiliesPanel({ families }: { families: readonly FamilyRow[] }) {
  const [filter, setFilter] = useState('');
  const shown = families.filter(
    (f) => filter === '' || f.name.includes(filter) || f.targetUrl.includes(filter),
  );
  return (
    <div class="panel metrics-families">
      <h2>
        Prometheus families <span class="muted small">{families.length}</span>
      </h2>
      <input
        class="families-filter"
        placeholder="filter by family or target"
        value={filter}
        onInput={(e) => {
          setFilter(e.currentTarget.value);
        }}
      />
      {families.length === 0 ? (
        <div class="empty small">
          No family scraped yet: add <code>collect.metrics.custom_endpoints</code> or annotate pods
          with <code>prometheus.io/scrape</code>.
        </div>
      ) : (
        <div class="families-scroll">
          <table class="grid small families-table">
            <thead>
              <tr>
                <th>target</th>
                <th>family</th>
                <th>type</th>
                <th>series</th>
                <th>first series</th>
                <th>scraped</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((f) => (
                <tr
                  key={`${f.targetUrl}\n${f.name}`}
                  class="family-row"
                  data-family={f.name}
                  title={f.help}
                >
                  <td class="mono ellipsis">{f.targetUrl}</td>
                  <td class="mono">{f.name}</td>
                  <td>{f.type}</td>
                  <td>{f.series}</td>
                  <td class="mono ellipsis">
                    {f.examples[0] === undefined
                      ? ''
                      : `${labelText(f.examples[0].labels)} ${formatValue(f.examples[0].value)}`}
                  </td>
                  <td>{clock(f.scrapedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function size(bytes: number): string {
  return bytes < 10240 ? `${String(bytes)} B` : `${(bytes / 1024).toFixed(0)} KiB`;
}

function ProfilesPanel({ profiles }: { profiles: readonly ProfileRow[] }) {
  return (
    <div class="panel metrics-profiles">
      <h2>
        Profiles <span class="muted small">{profiles.length}</span>
      </h2>
      {profiles.length === 0 ? (
        <div class="empty small">
          No profile yet: turn on <code>collect.metrics.profiles</code> with a pprof target or
          annotate pods with <code>kubexa.io/pprof-port</code>.
        </div>
      ) : (
        <table class="grid small profiles-table">
          <thead>
            <tr>
              <th>taken</th>
              <th>type</th>
              <th>pod</th>
              <th>workload</th>
              <th>duration</th>
              <th>size</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {profiles.map((p) => (
              <tr key={p.id} class={`profile-row profile-${p.type}`} title={p.targetUrl}>
                <td>{dateTimeMs(p.timestamp)}</td>
                <td>{p.type}</td>
                <td class="mono">
                  {p.pod === '' ? p.targetUrl : `${p.namespace}/${p.pod}`}
                  {p.container !== '' && <span class="muted"> · {p.container}</span>}
                </td>
                <td class="mono">{p.workload}</td>
                <td>{p.durationMs > 0 ? `${String(p.durationMs / 1000)} s` : '—'}</td>
                <td>{size(p.bytes)}</td>
                <td>
                  <a
                    class="profile-download"
                    href={`/api/metrics/profiles/${encodeURIComponent(p.id)}/pprof`}
                    download
                  >
                    download .pb.gz
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function Header({
  data,
  error,
  reachable,
}: {
  data: Loaded | undefined;
  error: string;
  reachable: boolean;
}) {
  const counts =
    data === undefined
      ? ''
      : `${String(data.series.nodes.length)} nodes · ${String(data.series.pods.length)} pods · ${String(data.families.length)} families · ${String(data.profiles.length)} profiles`;
  const problem = error !== '' ? error : reachable ? '' : 'gateway unreachable';
  return (
    <header class="view-header">
      <h1>Metrics</h1>
      <span class="spacer" />
      <span class="small muted metrics-counts">{counts}</span>
      {problem !== '' && <span class="stale-data">{problem}</span>}
    </header>
  );
}

const NO_SERIES: MetricsSnapshot = { nodes: [], pods: [] };

export function MetricsView({ reachable }: ViewProps) {
  const { data, error } = usePolled();
  const { nodes, pods: allPods } = data?.series ?? NO_SERIES;
  const pods = useMemo(() => busiest(allPods), [allPods]);
  const podNote =
    allPods.length > pods.length ? ` (${String(pods.length)} of ${String(allPods.length)})` : '';
  const waiting = data !== undefined && nodes.length === 0 && allPods.length === 0;
  return (
    <section class="view metrics-view">
      <Header data={data} error={error} reachable={reachable} />
      {waiting && (
        <div class="empty small">
          No metrics.k8s.io sample yet: the collector scrapes at each rule's interval (after a
          random jitter) once <code>collect.metrics.rules</code> is set and metrics-server answers.
        </div>
      )}
      <div class="metrics-charts">
        <Chart id="node-cpu" title="Node CPU (millicores)" series={nodes} measure="cpu" />
        <Chart id="node-memory" title="Node memory (MiB)" series={nodes} measure="memory" />
        <Chart id="pod-cpu" title={`Pod CPU (millicores)${podNote}`} series={pods} measure="cpu" />
        <Chart
          id="pod-memory"
          title={`Pod memory (MiB)${podNote}`}
          series={pods}
          measure="memory"
        />
      </div>
      <FamiliesPanel families={data?.families ?? []} />
      <ProfilesPanel profiles={data?.profiles ?? []} />
    </section>
  );
}
