// The node console part of the Consoles view: shown only when a connected agent offers node
// consoles (rbac.nodeShell, exec.node.enabled). The demo gateway signs the open with
// cluster:node_console; the executor creates a privileged helper Pod on the node and enters the
// host's namespaces with nsenter. The console runs in the view's terminal like a pod console.
import { useEffect, useState } from 'preact/hooks';

/** Whether a connected agent offers node consoles (polled; the Nodes view asks it too). */
export function useNodeConsolesAvailable(): boolean {
  const [available, setAvailable] = useState(false);
  useEffect(() => {
    let stopped = false;
    const refresh = async () => {
      try {
        const response = await fetch('/api/node-consoles');
        const body = (await response.json()) as { available?: string[] };
        if (!stopped) setAvailable((body.available ?? []).length > 0);
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
  return available;
}

/** The node a link asked for: #/consoles?node=NAME (the Nodes view's Console button). */
function linkedNode(): string {
  const query = location.hash.split('?')[1] ?? '';
  return new URLSearchParams(query).get('node') ?? '';
}

/** The Consoles view's link for a node's console. */
export const nodeConsoleHref = (node: string): string =>
  `#/consoles?${new URLSearchParams({ node }).toString()}`;

export function NodeConsolePicker(props: {
  readonly onOpened: (id: string) => void;
  readonly onError: (message: string) => void;
}) {
  const available = useNodeConsolesAvailable();
  const [node, setNode] = useState(linkedNode);

  if (!available) return null;
  const open = async () => {
    props.onError('');
    const response = await fetch('/api/node-consoles', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ node: node.trim() }),
    });
    const body = (await response.json()) as { id?: string; error?: string };
    if (!response.ok || body.id === undefined) {
      props.onError(body.error ?? `HTTP ${response.status}`);
      return;
    }
    props.onOpened(body.id);
  };

  return (
    <div class="console-picker node-console-picker">
      <label>
        Node{' '}
        <input
          class="node-console-name"
          value={node}
          placeholder="node name"
          onInput={(e) => {
            setNode((e.target as HTMLInputElement).value);
          }}
        />
      </label>
      <button
        class="node-console-open"
        type="button"
        disabled={node.trim() === ''}
        onClick={() => void open()}
      >
        Open node console (root on the node)
      </button>
    </div>
  );
}
