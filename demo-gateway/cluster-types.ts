// What the State and Events views get from /api/cluster/* and /api/events (cluster-routes.ts).
// Types only: the page (demo-gateway/ui) imports them too.

export interface KindCount {
  readonly resource: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly live: number;
  readonly deleted: number;
}

export interface ObjectRow {
  readonly resource: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** The last change: ADDED, MODIFIED or DELETED. */
  readonly lastType: string;
  readonly changes: number;
  readonly updatedAt: number;
}

export interface ObjectDetail extends ObjectRow {
  /** The sanitized object as the agent sent it (JSON text). */
  readonly object: string;
}

export interface StateChange {
  readonly seq: number;
  readonly at: number;
  readonly type: string;
  readonly resource: string;
  readonly namespace: string;
  readonly name: string;
}

export interface EventRow {
  readonly seq: number;
  /** `kube` (a Kubernetes Event) or `lifecycle` (a pod status transition). */
  readonly source: 'kube' | 'lifecycle';
  readonly reason: string;
  /** info, warning or error (a Kubernetes Event: Normal is info, Warning is warning). */
  readonly severity: 'info' | 'warning' | 'error';
  readonly namespace: string;
  /** Kind/name of the object it is about. */
  readonly object: string;
  /** Kind/name of the owning workload, "" when none. */
  readonly workload: string;
  readonly count: number;
  readonly message: string;
  /** When it last happened (unix ms). */
  readonly lastAt: number;
  readonly receivedAt: number;
}
