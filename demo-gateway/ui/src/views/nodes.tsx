// The Nodes view: the cluster's nodes (read through the agent) with their conditions, cordon
// state and pods; cordon, uncordon and drain (dry run, force, delete emptyDir data, grace period,
// timeout) sent signed to the agent's executor, with the per-pod progress live, cancel, the final
// result, refusals with their code and reason, and the audit records.
import { useEffect, useState } from 'preact/hooks';
import type { ViewProps } from '../views.js';
import { nodeConsoleHref, useNodeConsolesAvailable } from './node-console-picker.js';

interface PodView {
  readonly namespace: string;
  readonly name: string;
  readonly phase: string;
  readonly owner: string;
  readonly terminating: boolean;
}

interface NodeView {
  readonly name: string;
  readonly unschedulable: boolean;
  readonly conditions: readonly { type: string; status: string; reason: string }[];
  readonly taints: readonly string[];
  readonly pods: readonly PodView[];
}

interface NodesAnswer {
  readonly sessionId: string;
  readonly nodeJobs: boolean;
  readonly nodes: readonly NodeView[];
  readonly error?: string;
}

interface JobPod {
  readonly namespace: string;
  readonly name: string;
  readonly phase: string;
  readonly reason: string;
  readonly pdb: string;
  readonly message: string;
}

interface Job {
  readonly id: string;
  readonly spec: {
    readonly node: string;
    readonly verb: string;
    readonly dryRun: boolean;
    readonly force: boolean;
    readonly deleteEmptydirData: boolean;
  };
  readonly state: 'sent' | 'running' | 'done' | 'not_sent';
  readonly started?: { principal: string; timeoutSeconds: number };
  readonly pods: readonly JobPod[];
  readonly done?: {
    outcome: string;
    refusalCode: string;
    message: string;
    cordoned: boolean;
    pending: string[];
    evictedCount: number;
    skippedCount: number;
    refusedCount: number;
  };
}

interface Audit {
  readonly requestId: string;
  readonly principal: string;
  readonly target: string;
  readonly verb: string;
  readonly outcome: string;
  readonly refusalCode: string;
  readonly refusalReason: string;
  readonly dryRun: boolean;
  readonly startUnixMs: string;
}

interface DrainOptions {
  dryRun: boolean;
  force: boolean;
  deleteEmptydirData: boolean;
  /** '' is each pod's own grace period. */
  gracePeriod: string;
  /** '' or 0 is the agent's maximum. */
  timeout: string;
}

const NODES_POLL_MS = 2000;
const JOB_POLL_MS = 300;

async function json<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(path, init);
  const body = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new Error(body.error ?? `${path}: HTTP ${response.status}`);
  return body;
}

const post = <T,>(path: string, body: unknown) =>
  json<T>(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

function ready(node: NodeView): string {
  const condition = node.conditions.find((c) => c.type === 'Ready');
  if (condition === undefined) return 'unknown';
  return condition.status === 'True' ? 'Ready' : 'NotReady';
}

function NodeRow(props: {
  node: NodeView;
  enabled: boolean;
  /** A connected agent offers node consoles: the row links to one. */
  consoles: boolean;
  onJob: (node: string, verb: 'cordon' | 'uncordon') => void;
  onDrain: (node: string) => void;
}) {
  const { node } = props;
  const troubled = node.conditions.filter((c) => c.type !== 'Ready' && c.status === 'True');
  return (
    <tr class="node-row" data-node={node.name}>
      <td class="node-name">{node.name}</td>
      <td class={`node-ready ready-${ready(node)}`}>{ready(node)}</td>
      <td class={`node-cordon ${node.unschedulable ? 'cordoned' : 'schedulable'}`}>
        {node.unschedulable ? 'cordoned' : 'schedulable'}
      </td>
      <td class="node-conditions">
        {node.conditions.map((c) => (
          <span
            key={c.type}
            class={`condition condition-${c.status}`}
            title={c.reason}
          >{`${c.type}=${c.status}`}</span>
        ))}
        {troubled.length > 0 ? <strong class="node-pressure"> pressure</strong> : null}
      </td>
      <td class="node-taints">{node.taints.join(', ')}</td>
      <td class="node-pods">
        <details>
          <summary>{node.pods.length} pods</summary>
          <ul>
            {node.pods.map((p) => (
              <li key={`${p.namespace}/${p.name}`} class="node-pod">
                {p.namespace}/{p.name} <em>{p.terminating ? 'Terminating' : p.phase}</em>
                {p.owner ? ` (${p.owner})` : ' (bare)'}
              </li>
            ))}
          </ul>
        </details>
      </td>
      <td class="node-actions">
        <button
          type="button"
          class="node-cordon-btn"
          disabled={!props.enabled || node.unschedulable}
          onClick={() => {
            props.onJob(node.name, 'cordon');
          }}
        >
          Cordon
        </button>
        <button
          type="button"
          class="node-uncordon-btn"
          disabled={!props.enabled || !node.unschedulable}
          onClick={() => {
            props.onJob(node.name, 'uncordon');
          }}
        >
          Uncordon
        </button>
        <button
          type="button"
          class="node-drain-btn"
          disabled={!props.enabled}
          onClick={() => {
            props.onDrain(node.name);
          }}
        >
          Drain…
        </button>
        {props.consoles ? (
          <a
            class="node-console-link"
            href={nodeConsoleHref(node.name)}
            title="Opens the Consoles view for a root shell on this node (the executor's privileged helper Pod, entered with nsenter)"
          >
            Console…
          </a>
        ) : null}
      </td>
    </tr>
  );
}

function DrainForm(props: {
  node: string;
  options: DrainOptions;
  onChange: (options: DrainOptions) => void;
  onRun: () => void;
  onClose: () => void;
}) {
  const { options } = props;
  const flag = (key: 'dryRun' | 'force' | 'deleteEmptydirData', label: string, cls: string) => (
    <label>
      <input
        type="checkbox"
        class={cls}
        checked={options[key]}
        onChange={(e) => {
          props.onChange({ ...options, [key]: (e.target as HTMLInputElement).checked });
        }}
      />{' '}
      {label}
    </label>
  );
  return (
    <div class="drain-form" data-node={props.node}>
      <h3>Drain {props.node}</h3>
      {flag('dryRun', 'dry run (every write with dryRun=All)', 'drain-dry-run')}
      {flag('force', 'force (pods without a controller)', 'drain-force')}
      {flag('deleteEmptydirData', 'delete emptyDir data', 'drain-emptydir')}
      <label>
        grace period (s){' '}
        <input
          class="drain-grace"
          type="number"
          min="0"
          placeholder="pod's own"
          value={options.gracePeriod}
          onInput={(e) => {
            props.onChange({ ...options, gracePeriod: (e.target as HTMLInputElement).value });
          }}
        />
      </label>
      <label>
        timeout (s){' '}
        <input
          class="drain-timeout"
          type="number"
          min="0"
          placeholder="agent's maximum"
          value={options.timeout}
          onInput={(e) => {
            props.onChange({ ...options, timeout: (e.target as HTMLInputElement).value });
          }}
        />
      </label>
      <button type="button" class="drain-run" onClick={props.onRun}>
        Drain
      </button>
      <button type="button" class="drain-close" onClick={props.onClose}>
        Close
      </button>
    </div>
  );
}

function JobResult({ done }: { done: NonNullable<Job['done']> }) {
  if (done.refusalCode !== '') {
    return (
      <p class="job-refusal" role="alert">
        refused <code class="refusal-code">{done.refusalCode}</code>: {done.message}
      </p>
    );
  }
  return (
    <p class={`job-result outcome-${done.outcome}`}>
      <strong class="job-outcome">{done.outcome}</strong>: {done.evictedCount} evicted,{' '}
      {done.skippedCount} skipped, {done.refusedCount} refused; node{' '}
      {done.cordoned ? 'cordoned' : 'schedulable'}
      {done.pending.length > 0 ? `; pending: ${done.pending.join(', ')}` : ''}
      {done.message ? ` (${done.message})` : ''}
    </p>
  );
}

function JobPanel({ job, onCancel }: { job: Job; onCancel: () => void }) {
  const done = job.done;
  return (
    <section class={`node-job job-${job.state}`} data-job-id={job.id}>
      <h3>
        {job.spec.verb} {job.spec.node}
        {job.spec.dryRun ? ' (dry run)' : ''}: <span class="job-state">{job.state}</span>
      </h3>
      {job.started ? (
        <p class="job-started">
          by {job.started.principal}, timeout {job.started.timeoutSeconds} s
        </p>
      ) : null}
      {job.state === 'running' || job.state === 'sent' ? (
        <button type="button" class="job-cancel" onClick={onCancel}>
          Cancel
        </button>
      ) : null}
      {job.pods.length > 0 ? (
        <table class="job-pods">
          <thead>
            <tr>
              <th>pod</th>
              <th>step</th>
              <th>detail</th>
            </tr>
          </thead>
          <tbody>
            {job.pods.map((p, i) => (
              <tr key={i} class={`job-pod phase-${p.phase}`} data-pod={`${p.namespace}/${p.name}`}>
                <td>
                  {p.namespace}/{p.name}
                </td>
                <td class="job-pod-phase">{p.phase}</td>
                <td>
                  {[p.reason, p.pdb ? `PDB ${p.pdb}` : '', p.message].filter(Boolean).join(' · ')}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {done !== undefined ? <JobResult done={done} /> : null}
    </section>
  );
}

function AuditTable({ audits }: { audits: readonly Audit[] }) {
  if (audits.length === 0) return null;
  return (
    <>
      <h3>Audit records</h3>
      <table class="node-audits">
        <thead>
          <tr>
            <th>time</th>
            <th>principal</th>
            <th>verb</th>
            <th>target</th>
            <th>outcome</th>
          </tr>
        </thead>
        <tbody>
          {audits.map((a) => (
            <tr key={a.requestId} class="node-audit">
              <td>{new Date(Number(a.startUnixMs)).toLocaleTimeString()}</td>
              <td>{a.principal || '?'}</td>
              <td>
                {a.verb}
                {a.dryRun ? ' (dry run)' : ''}
              </td>
              <td>{a.target}</td>
              <td>{a.refusalCode ? `${a.refusalCode}: ${a.refusalReason}` : a.outcome}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Notices({ answer, error }: { answer: NodesAnswer | undefined; error: string }) {
  return (
    <>
      {answer?.error ? <p class="nodes-error">{answer.error}</p> : null}
      {answer !== undefined && !answer.nodeJobs ? (
        <p class="nodes-off">
          Node jobs are off for this agent: its executor needs <code>mutate.node.enabled</code>{' '}
          (chart: <code>rbac.nodeOps</code>). The nodes are shown read-only.
        </p>
      ) : null}
      {error ? (
        <p class="nodes-request-error" role="alert">
          {error}
        </p>
      ) : null}
    </>
  );
}

const NO_DRAIN: DrainOptions = {
  dryRun: true,
  force: false,
  deleteEmptydirData: false,
  gracePeriod: '',
  timeout: '',
};

export function NodesView({ reachable }: ViewProps) {
  const [answer, setAnswer] = useState<NodesAnswer | undefined>(undefined);
  const [jobs, setJobs] = useState<readonly Job[]>([]);
  const [audits, setAudits] = useState<readonly Audit[]>([]);
  const [current, setCurrent] = useState<string | undefined>(undefined);
  const [drainNode, setDrainNode] = useState<string | undefined>(undefined);
  const [drain, setDrain] = useState<DrainOptions>(NO_DRAIN);
  const [error, setError] = useState('');
  const consoles = useNodeConsolesAvailable();

  useEffect(() => {
    let stopped = false;
    const refresh = async () => {
      try {
        const next = await json<NodesAnswer>('/api/nodes');
        if (!stopped) setAnswer(next);
      } catch {
        // shown as stale by the frame
      }
    };
    void refresh();
    const timer = setInterval(() => void refresh(), NODES_POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  useEffect(() => {
    let stopped = false;
    const refresh = async () => {
      try {
        const next = await json<{ jobs: Job[]; audits: Audit[] }>('/api/nodes/jobs');
        if (stopped) return;
        setJobs(next.jobs);
        setAudits(next.audits);
      } catch {
        // shown as stale by the frame
      }
    };
    void refresh();
    const timer = setInterval(() => void refresh(), JOB_POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  const start = async (body: Record<string, unknown>) => {
    setError('');
    try {
      const { id } = await post<{ id: string }>('/api/nodes/jobs', body);
      setCurrent(id);
    } catch (err: unknown) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };

  const runDrain = () => {
    if (drainNode === undefined) return;
    const grace = drain.gracePeriod.trim();
    void start({
      node: drainNode,
      verb: 'drain',
      dryRun: drain.dryRun,
      force: drain.force,
      deleteEmptydirData: drain.deleteEmptydirData,
      gracePeriodSeconds: grace === '' ? null : Number(grace),
      timeoutSeconds: Number(drain.timeout || 0),
    });
  };

  const enabled = answer?.nodeJobs === true;
  const job = jobs.find((j) => j.id === current) ?? jobs[0];
  return (
    <div class={`nodes-view ${reachable ? '' : 'stale'}`}>
      <h2>Nodes</h2>
      <Notices answer={answer} error={error} />
      <table class="nodes-table">
        <thead>
          <tr>
            <th>node</th>
            <th>ready</th>
            <th>scheduling</th>
            <th>conditions</th>
            <th>taints</th>
            <th>pods</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(answer?.nodes ?? []).map((node) => (
            <NodeRow
              key={node.name}
              node={node}
              enabled={enabled}
              consoles={consoles}
              onJob={(name, verb) => void start({ node: name, verb })}
              onDrain={(name) => {
                setDrainNode(name);
              }}
            />
          ))}
        </tbody>
      </table>
      {drainNode !== undefined ? (
        <DrainForm
          node={drainNode}
          options={drain}
          onChange={setDrain}
          onRun={runDrain}
          onClose={() => {
            setDrainNode(undefined);
          }}
        />
      ) : null}
      {job !== undefined ? (
        <JobPanel job={job} onCancel={() => void post(`/api/nodes/jobs/${job.id}/cancel`, {})} />
      ) : null}
      <AuditTable audits={audits} />
    </div>
  );
}
