// The Consoles view: pick a pod and container from what the collector reported, open a terminal
// (xterm.js from npm, bundled: no CDN), type, resize with the window, see the exit status or the
// refusal with its code, and the audit records the agent sent.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ViewProps } from '../views.js';
import { NodeConsolePicker } from './node-console-picker.js';

interface Target {
  readonly namespace: string;
  readonly pod: string;
  readonly containers: string[];
  readonly node: string;
  /** Why no console can open there (a simulated kwok node); absent when one can. */
  readonly unavailable?: string;
}

interface ConsoleViewState {
  readonly id: string;
  readonly state: 'opening' | 'open' | 'detached' | 'ended' | 'refused';
  readonly exit?: { reason: string; exitCode: number; message: string };
  readonly refusal?: { code: string; reason: string };
}

interface Audit {
  readonly event: string;
  readonly principal: string;
  readonly target: string;
  readonly exitCode: number;
  readonly endReason: string;
  readonly refusalCode: string;
  readonly refusalReason: string;
  readonly startUnixMs: string;
  readonly bytesIn: string;
  readonly bytesOut: string;
}

const POLL_MS = 100;

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

function decode(base64: string): Uint8Array {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

function TerminalPane({ id, onState }: { id: string; onState: (s: ConsoleViewState) => void }) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = host.current;
    if (element === null) return undefined;
    const term = new Terminal({ convertEol: false, fontSize: 13, cursorBlink: true });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(element);
    fit.fit();
    const input = (data: string) => void post(`/api/consoles/${id}/input`, { data });
    const typed = term.onData(input);
    const sendSize = () => {
      fit.fit();
      // What the terminal shows, for whoever reads the page (and the Chromium test).
      element.dataset['cols'] = String(term.cols);
      element.dataset['rows'] = String(term.rows);
      void post(`/api/consoles/${id}/input`, { resize: { cols: term.cols, rows: term.rows } });
    };
    sendSize();
    window.addEventListener('resize', sendSize);
    let after = 0;
    let stopped = false;
    const poll = async () => {
      while (!stopped) {
        try {
          const answer = await json<{
            view: ConsoleViewState & { lastSeq: number };
            chunks: { seq: number; data: string }[];
          }>(`/api/consoles/${id}/output?after=${after}`);
          for (const chunk of answer.chunks) {
            term.write(decode(chunk.data));
            after = chunk.seq;
          }
          onState(answer.view);
          if (answer.view.state === 'ended' || answer.view.state === 'refused') return;
        } catch {
          // the gateway is away for a moment: keep polling
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    };
    void poll();
    term.focus();
    return () => {
      stopped = true;
      typed.dispose();
      window.removeEventListener('resize', sendSize);
      term.dispose();
    };
  }, [id]);
  return <div class="console-terminal" ref={host} data-console-id={id} />;
}

function Status({ state }: { state: ConsoleViewState | undefined }) {
  if (state === undefined) return null;
  if (state.refusal) {
    return (
      <p class="console-refusal" role="alert">
        refused <code class="refusal-code">{state.refusal.code}</code>: {state.refusal.reason}
        {state.refusal.code === 'EXEC_FAILED'
          ? ' (on a simulated kwok node no process runs: pick a pod on a real node)'
          : ''}
      </p>
    );
  }
  if (state.exit) {
    return (
      <p class="console-exit">
        ended ({state.exit.reason}), exit status{' '}
        <code class="exit-code">{state.exit.exitCode}</code>: {state.exit.message}
      </p>
    );
  }
  return <p class={`console-state state-${state.state}`}>{state.state}</p>;
}

function resultText(a: Audit): string {
  if (a.refusalCode) return `${a.refusalCode}: ${a.refusalReason}`;
  return a.event === 'console_close' ? `${a.endReason} (${a.exitCode})` : '';
}

function AuditTable({ audits }: { audits: Audit[] }) {
  return (
    <>
      <h3>Audit records</h3>
      <table class="console-audits">
        <thead>
          <tr>
            <th>time</th>
            <th>event</th>
            <th>principal</th>
            <th>target</th>
            <th>result</th>
            <th>bytes in/out</th>
          </tr>
        </thead>
        <tbody>
          {audits.map((a, i) => (
            <tr key={i} class={`audit-${a.event}`}>
              <td>{new Date(Number(a.startUnixMs)).toLocaleTimeString()}</td>
              <td>{a.event}</td>
              <td>{a.principal || '?'}</td>
              <td>{a.target}</td>
              <td>{resultText(a)}</td>
              <td>
                {a.bytesIn}/{a.bytesOut}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Picker(props: {
  targets: Target[];
  choice: string;
  container: string;
  onChoice: (value: string) => void;
  onContainer: (value: string) => void;
  onOpen: () => void;
  closable: boolean;
  onClose: () => void;
}) {
  const selected = pick(props.targets, props.choice);
  return (
    <div class="console-picker">
      <label>
        Pod{' '}
        <select
          class="console-pod"
          value={selected === undefined ? '' : `${selected.namespace}/${selected.pod}`}
          onChange={(e) => {
            props.onChoice((e.target as HTMLSelectElement).value);
          }}
        >
          {props.targets.map((t) => (
            <option
              key={`${t.namespace}/${t.pod}`}
              value={`${t.namespace}/${t.pod}`}
              disabled={t.unavailable !== undefined}
              title={t.unavailable ?? `on node ${t.node || '?'}`}
              class={t.unavailable === undefined ? 'console-target' : 'console-target-simulated'}
            >
              {t.namespace}/{t.pod}
              {t.unavailable === undefined ? '' : ' (simulated node: no console)'}
            </option>
          ))}
        </select>
      </label>
      <label>
        Container{' '}
        <select
          class="console-container"
          value={props.container || (selected?.containers[0] ?? '')}
          onChange={(e) => {
            props.onContainer((e.target as HTMLSelectElement).value);
          }}
        >
          {(selected?.containers ?? []).map((c) => (
            <option key={c} value={c}>
              {c}
            </option>
          ))}
        </select>
      </label>
      <button
        class="console-open"
        type="button"
        disabled={selected === undefined || selected.unavailable !== undefined}
        title={selected?.unavailable}
        onClick={props.onOpen}
      >
        Open console
      </button>
      {props.closable ? (
        <button type="button" class="console-close" onClick={props.onClose}>
          Close
        </button>
      ) : null}
    </div>
  );
}

/** The chosen target, or the first one a console can open on (else the first offered). */
function pick(targets: Target[], choice: string): Target | undefined {
  return (
    targets.find((t) => `${t.namespace}/${t.pod}` === choice) ??
    targets.find((t) => t.unavailable === undefined) ??
    targets[0]
  );
}

/** Says why some pods are not offered: kwok's simulated nodes run no process to exec into. */
function SimulatedNote({ targets }: { targets: Target[] }) {
  const simulated = targets.filter((t) => t.unavailable !== undefined);
  if (simulated.length === 0) return null;
  const real = targets.length - simulated.length;
  return (
    <p class="muted console-simulated-note">
      {simulated.length} pod(s) run on simulated (kwok) nodes, where no container process exists: a
      console cannot open there and they are shown disabled.{' '}
      {real > 0
        ? `${real} pod(s) on a real node can open one.`
        : 'No pod on a real node has reported logs yet.'}
    </p>
  );
}

export function ConsolesView({ reachable }: ViewProps) {
  const [targets, setTargets] = useState<Target[]>([]);
  const [audits, setAudits] = useState<Audit[]>([]);
  const [available, setAvailable] = useState<string[]>([]);
  const [choice, setChoice] = useState('');
  const [container, setContainer] = useState('');
  const [current, setCurrent] = useState<string | undefined>(undefined);
  const [state, setState] = useState<ConsoleViewState | undefined>(undefined);
  const [error, setError] = useState('');

  useEffect(() => {
    let stopped = false;
    const refresh = async () => {
      try {
        const [found, list] = await Promise.all([
          json<Target[]>('/api/consoles/targets'),
          json<{ audits: Audit[]; available: string[] }>('/api/consoles'),
        ]);
        if (stopped) return;
        setTargets(found);
        setAudits(list.audits);
        setAvailable(list.available);
      } catch {
        // shown as stale by the frame
      }
    };
    void refresh();
    const timer = setInterval(() => void refresh(), 2000);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  const selected = pick(targets, choice);
  const open = async () => {
    if (selected === undefined) return;
    setError('');
    setState(undefined);
    try {
      const { id } = await post<{ id: string }>('/api/consoles', {
        namespace: selected.namespace,
        pod: selected.pod,
        container: container || (selected.containers[0] ?? ''),
      });
      setCurrent(id);
    } catch (err: unknown) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };

  return (
    <section class={`consoles-view${reachable ? '' : ' stale'}`}>
      <header class="view-header">
        <h2>Consoles</h2>
        <p class="muted">
          Pod shells through the executor: the demo gateway signs each open with its own key; the
          executor checks it, exec.pod.rules and its limits, and runs pods/exec with its own
          identity.
        </p>
      </header>
      {available.length === 0 ? (
        <p class="muted console-unavailable">
          No connected agent offers pod consoles (exec.pod.enabled and rbac.exec are off, or no
          executor is running).
        </p>
      ) : null}
      <Picker
        targets={targets}
        choice={choice}
        container={container}
        onChoice={setChoice}
        onContainer={setContainer}
        onOpen={() => void open()}
        closable={current !== undefined && state?.state === 'open'}
        onClose={() => void post(`/api/consoles/${current ?? ''}/input`, { close: true })}
      />
      <SimulatedNote targets={targets} />
      <NodeConsolePicker
        onOpened={(id) => {
          setState(undefined);
          setCurrent(id);
        }}
        onError={setError}
      />
      {error ? <p class="console-error">{error}</p> : null}
      <Status state={state} />
      {current !== undefined ? (
        <TerminalPane key={current} id={current} onState={setState} />
      ) : null}
      <AuditTable audits={audits} />
    </section>
  );
}
