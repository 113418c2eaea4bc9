// The demo gateway's node jobs and mutations: it sends node_job_request / mutation_request on an
// agent's Connect stream, signed with the demo's own key as the platform would sign them, and
// keeps what comes back (NodeJobEvent per step, the final result, MutationResult, and the audit
// records) for the page and for tests. Only agents that advertised node_jobs / mutations are
// sent these requests (the send function checks it).
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type {
  AgentMessage,
  AuditRecord,
  GatewayMessage,
  MutationResult,
  NodeJobEvent,
} from '../proto/index.js';
import type { CommandSigner } from './command-signer.js';

type EventOf<C extends string> = Extract<NonNullable<NodeJobEvent['event']>, { $case: C }>['value'];
/** The agent.v1 steps of a job (executor.v1 has messages of the same names). */
export type NodeJobStarted = EventOf<'started'>;
export type NodeJobPod = EventOf<'pod'>;
export type NodeJobDone = EventOf<'done'>;

/** Sends a payload on an agent's Connect stream; false when that session cannot take it. */
export type SendNodeJob = (
  sessionId: string,
  payload: NonNullable<GatewayMessage['payload']>,
) => boolean;

export interface NodeJobSpec {
  readonly node: string;
  readonly verb: 'cordon' | 'uncordon' | 'drain';
  readonly dryRun?: boolean;
  readonly force?: boolean;
  readonly deleteEmptydirData?: boolean;
  /** Absent: each pod's own grace period. */
  readonly gracePeriodSeconds?: number;
  /** 0: the agent's maximum. */
  readonly timeoutSeconds?: number;
  readonly podSelector?: string;
  /** Who the signed command names. */
  readonly principal?: string;
  /** Sends the request without a signature (what a forged request looks like). */
  readonly unsigned?: boolean;
}

export interface NodeJobView {
  readonly id: string;
  readonly agentSession: string;
  readonly spec: Omit<NodeJobSpec, 'unsigned'> & { readonly signed: boolean };
  readonly requestedAt: number;
  readonly state: 'sent' | 'running' | 'done' | 'not_sent';
  readonly started: NodeJobStarted | undefined;
  readonly pods: readonly NodeJobPod[];
  readonly done: NodeJobDone | undefined;
}

export interface MutationSpec {
  readonly verb: 'create' | 'update' | 'patch' | 'delete' | 'scale';
  readonly group?: string;
  readonly version: string;
  readonly resource: string;
  readonly namespace?: string;
  readonly name: string;
  readonly body?: string;
  readonly patchType?: 'merge' | 'strategic' | 'json' | 'apply';
  readonly replicas?: number;
  readonly dryRun?: boolean;
  readonly principal?: string;
  readonly unsigned?: boolean;
}

/** Node-job and mutation audit records kept for the page. */
const MAX_AUDITS = 200;
/** Jobs kept for the page (the oldest finished ones go first). */
const MAX_JOBS = 100;
const DEMO_PRINCIPAL = 'demo-user@kubexa.local';

interface HubEvents {
  /** A job changed (an event arrived). */
  job: [NodeJobView];
  mutation: [MutationResult];
}

/** The spec with every default filled in, as the request carries it. */
function recordedSpec(spec: NodeJobSpec) {
  return {
    node: spec.node,
    verb: spec.verb,
    dryRun: spec.dryRun ?? false,
    force: spec.force ?? false,
    deleteEmptydirData: spec.deleteEmptydirData ?? false,
    ...(spec.gracePeriodSeconds === undefined
      ? {}
      : { gracePeriodSeconds: spec.gracePeriodSeconds }),
    timeoutSeconds: spec.timeoutSeconds ?? 0,
    podSelector: spec.podSelector ?? '',
  };
}

export class NodeJobHub extends EventEmitter<HubEvents> {
  readonly #signer: CommandSigner;
  readonly #send: SendNodeJob;
  readonly #jobs = new Map<string, NodeJobView>();
  /** Audit records of node jobs and mutations, oldest first. */
  readonly audits: AuditRecord[] = [];

  constructor(signer: CommandSigner, send: SendNodeJob) {
    super();
    this.#signer = signer;
    this.#send = send;
  }

  /** Sends a node job to an agent's session; the view follows its events. */
  run(agentSession: string, spec: NodeJobSpec): NodeJobView {
    const id = `job-${randomUUID()}`;
    const principal = spec.principal ?? DEMO_PRINCIPAL;
    const signedCommand =
      spec.unsigned === true
        ? ''
        : this.#signer.sign({
            requestId: id,
            principal,
            permission: 'cluster:node_write',
            target: { kind: 'node', namespace: '', name: spec.node, container: '', resource: '' },
            verb: spec.verb,
          });
    const options = recordedSpec(spec);
    const sent = this.#send(agentSession, {
      $case: 'nodeJobRequest',
      value: {
        requestId: id,
        signedCommand,
        node: spec.node,
        verb: spec.verb,
        dryRun: options.dryRun,
        force: options.force,
        deleteEmptydirData: options.deleteEmptydirData,
        gracePeriodSeconds: spec.gracePeriodSeconds,
        timeoutSeconds: options.timeoutSeconds,
        podSelector: options.podSelector,
      },
    });
    const view: NodeJobView = {
      id,
      agentSession,
      spec: { ...recordedSpec(spec), principal, signed: signedCommand !== '' },
      requestedAt: Date.now(),
      state: sent ? 'sent' : 'not_sent',
      started: undefined,
      pods: [],
      done: undefined,
    };
    this.#jobs.set(id, view);
    this.#prune();
    return view;
  }

  /** Asks the agent to cancel a running job; false when the session cannot take it. */
  cancel(jobId: string): boolean {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return false;
    return this.#send(job.agentSession, { $case: 'nodeJobCancel', value: { jobId } });
  }

  /** Sends a mutation; resolves with the agent's MutationResult. */
  mutate(agentSession: string, spec: MutationSpec, timeoutMs = 30_000): Promise<MutationResult> {
    const id = `mutation-${randomUUID()}`;
    const group = spec.group ?? '';
    const namespace = spec.namespace ?? '';
    const signedCommand =
      spec.unsigned === true
        ? ''
        : this.#signer.sign({
            requestId: id,
            principal: spec.principal ?? DEMO_PRINCIPAL,
            permission: 'cluster:node_write',
            target: {
              kind: 'resource',
              namespace,
              name: spec.name,
              container: '',
              resource: group === '' ? spec.resource : `${group}/${spec.resource}`,
            },
            verb: spec.verb,
          });
    const answer = this.#waitForMutation(id, timeoutMs);
    const sent = this.#send(agentSession, {
      $case: 'mutationRequest',
      value: {
        requestId: id,
        signedCommand,
        verb: spec.verb,
        group,
        version: spec.version,
        resource: spec.resource,
        namespace,
        name: spec.name,
        body: Buffer.from(spec.body ?? ''),
        patchType: spec.patchType ?? '',
        replicas: spec.replicas ?? 0,
        propagationPolicy: '',
        dryRun: spec.dryRun ?? false,
        fieldManager: '',
        force: false,
      },
    });
    if (!sent) return Promise.reject(new Error('the agent session cannot take mutations'));
    return answer;
  }

  get(jobId: string): NodeJobView | undefined {
    return this.#jobs.get(jobId);
  }

  /** Newest first. */
  list(): NodeJobView[] {
    return [...this.#jobs.values()].reverse();
  }

  /** Resolves once the job's final result is in. */
  waitForDone(jobId: string, timeoutMs = 120_000): Promise<NodeJobView> {
    return new Promise<NodeJobView>((resolve, reject) => {
      const check = (view: NodeJobView | undefined) => {
        if (view?.id !== jobId || view.done === undefined) return false;
        cleanup();
        resolve(view);
        return true;
      };
      const listener = (view: NodeJobView) => {
        check(view);
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`no result for ${jobId} within ${String(timeoutMs)} ms`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.off('job', listener);
      };
      if (check(this.#jobs.get(jobId))) return;
      this.on('job', listener);
    });
  }

  /** Takes the agent's messages that belong here. */
  onAgentMessage(payload: NonNullable<AgentMessage['payload']>): void {
    if (payload.$case === 'nodeJobEvent') {
      this.#onEvent(payload.value);
    } else if (payload.$case === 'mutationResult') {
      this.emit('mutation', payload.value);
    } else if (
      payload.$case === 'auditRecord' &&
      (payload.value.event === 'node_job' || payload.value.event === 'mutation')
    ) {
      this.audits.push(payload.value);
      if (this.audits.length > MAX_AUDITS) this.audits.splice(0, this.audits.length - MAX_AUDITS);
    }
  }

  #onEvent(event: NodeJobEvent): void {
    const job = this.#jobs.get(event.jobId);
    if (job === undefined || event.event === undefined) return;
    let next: NodeJobView;
    switch (event.event.$case) {
      case 'started':
        next = { ...job, state: 'running', started: event.event.value };
        break;
      case 'pod':
        next = { ...job, state: 'running', pods: [...job.pods, event.event.value] };
        break;
      case 'done':
        next = { ...job, state: 'done', done: event.event.value };
        break;
    }
    this.#jobs.set(job.id, next);
    this.emit('job', next);
  }

  #waitForMutation(id: string, timeoutMs: number): Promise<MutationResult> {
    return new Promise<MutationResult>((resolve, reject) => {
      const listener = (result: MutationResult) => {
        if (result.requestId !== id) return;
        cleanup();
        resolve(result);
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`no mutation result for ${id} within ${String(timeoutMs)} ms`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.off('mutation', listener);
      };
      this.on('mutation', listener);
    });
  }

  #prune(): void {
    for (const [id, job] of this.#jobs) {
      if (this.#jobs.size <= MAX_JOBS) return;
      if (job.state === 'done' || job.state === 'not_sent') this.#jobs.delete(id);
    }
  }
}
