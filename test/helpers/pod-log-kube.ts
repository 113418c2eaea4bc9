// The pod log source's Kubernetes access for unit tests: a pod list and watch the test drives,
// and log requests whose bodies the test writes to (each ended on its request's abort), handed
// over chunk by chunk as the real reader does (collector/sources/pod-logs/pod-log-http.ts).
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { V1Pod } from '@kubernetes/client-node';
import Database from 'better-sqlite3';
import type { ReleaseListener } from '../../collector/buffer/types.js';
import type { PodLogSourceOptions } from '../../collector/sources/pod-logs/pod-log-source.js';
import type { LogRequest, PodLogKubeAccess } from '../../collector/sources/pod-logs/kube-access.js';
import { hang } from './wait.js';

/** One log request the source opened. */
export interface OpenedLog {
  readonly request: LogRequest;
  readonly body: PassThrough;
  readonly signal: AbortSignal;
}

export interface FakePodLogKube {
  readonly kube: PodLogKubeAccess;
  /** Every log request, in the order opened. */
  readonly opens: OpenedLog[];
  /** The watches' event callbacks: calling one sends the source a pod event. */
  readonly watchers: ((type: string, object: V1Pod) => void)[];
}

export function fakePodLogKube(pods: readonly V1Pod[]): FakePodLogKube {
  const opens: OpenedLog[] = [];
  const watchers: ((type: string, object: V1Pod) => void)[] = [];
  const kube: PodLogKubeAccess = {
    listWatch: () => ({
      list: () => Promise.resolve({ items: [...pods], resourceVersion: '1' }),
      watch: (_rv, onEvent, signal) => {
        watchers.push(onEvent);
        return hang(signal);
      },
    }),
    logs: {
      read: async (request, signal, onChunk) => {
        const body = new PassThrough();
        signal.addEventListener(
          'abort',
          () => {
            body.end();
          },
          { once: true },
        );
        opens.push({ request, body, signal });
        // As the real reader: each chunk handed over as it comes, the end or error passed on.
        for await (const chunk of body as AsyncIterable<Buffer>) onChunk(chunk);
      },
    },
    owners: () => Promise.resolve(undefined),
  };
  return { kube, opens, watchers };
}

/** The second every timestampedLine is in (RFC 3339, without its fraction). */
export const LINE_SECOND = '2025-03-01T10:00:07';

/** A line as the API server sends it with timestamps=true, in the same second for every line. */
export const timestampedLine = (nanos: number, text: string): string =>
  `${LINE_SECOND}.${String(nanos).padStart(9, '0')}Z ${text}\n`;

/** A buffer's release feed the test fires: each listener is one the source registered. */
export function releaseFeed(): {
  readonly listeners: ReleaseListener[];
  readonly releases: { onRelease(listener: ReleaseListener): () => void };
} {
  const listeners: ReleaseListener[] = [];
  return {
    listeners,
    releases: {
      onRelease(listener: ReleaseListener) {
        listeners.push(listener);
        return () => undefined;
      },
    },
  };
}

/** The checkpoints the source's SQLite store in `dir` holds (second, nanos, count), read-only. */
export function readCheckpoints(dir: string): unknown {
  const db = new Database(join(dir, 'pod-logs.db'), { readonly: true });
  try {
    return db.prepare('SELECT sec, nanos, count FROM checkpoints').all();
  } finally {
    db.close();
  }
}

/** The source's `collect.logs` of these tests: every pod of namespace `prod`, tail 10, follow. */
export function followNamespaceProd(checkpointDir: string): PodLogSourceOptions['logs'] {
  return {
    tail_lines: 10,
    follow: true,
    exclude_namespaces: [],
    checkpoint_dir: checkpointDir,
    rules: [
      {
        id: 'r',
        namespace: 'prod',
        pod_names: [],
        label_selector: '',
        field_selector: '',
        containers: [],
      },
    ],
  };
}
