import { eventTypeToJSON, podLifecycleReasonToJSON, type AgentMessage } from '../proto/index.js';

type Payload = NonNullable<AgentMessage['payload']>;
type Describers = {
  [K in Payload['$case']]: (value: Extract<Payload, { $case: K }>['value']) => string;
};

/** The kind stored and shown for a message: its payload case, or "empty". */
export function messageKind(message: AgentMessage): string {
  return message.payload?.$case ?? 'empty';
}

const MAX_SUMMARY = 300;
const clip = (text: string): string =>
  text.length > MAX_SUMMARY ? `${text.slice(0, MAX_SUMMARY)}…` : text;
const prefix = (namespace: string): string => (namespace ? `${namespace}/` : '');

const describers: Describers = {
  // The token is never part of the summary.
  handshake: (h) => `agent ${h.agentVersion} cluster ${h.clusterId} proto ${h.protoVersion}`,
  logs: ({ entries }) => {
    const first = entries[0];
    const head = first
      ? `${first.namespace}/${first.podName}/${first.container}: ${first.message}`
      : '';
    return clip(`${entries.length} log line(s) ${head}`);
  },
  // "EVENT_TYPE_ADDED" reads as "ADDED" in the UI.
  state: (s) =>
    `${eventTypeToJSON(s.type).replace('EVENT_TYPE_', '')} ${s.resource || String(s.kind)} ${prefix(s.namespace)}${s.name}`,
  metrics: (m) => `${m.families.length} metric families (legacy)`,
  heartbeat: ({ health }) =>
    `status ${health?.status ?? '?'} queue ${health?.queueDepth ?? '?'} dropped ${health?.droppedMessages ?? '?'}`,
  kubeMetrics: (m) =>
    `${prefix(m.namespace)}${m.name} cpu ${m.cpuNanocores}n mem ${m.memoryBytes}B`,
  prometheusMetrics: (p) => clip(p.targetUrl),
  profile: (p) =>
    `${p.profileType} profile ${prefix(p.namespace)}${p.pod || p.targetUrl} ${String(p.pprof.length)} B`,
  catalog: (c) => `${c.entries.length} resources`,
  kubeEvent: (e) =>
    clip(
      `${e.type} ${e.reason} ${e.regarding?.kind ?? ''} ${prefix(e.namespace)}${e.regarding?.name ?? e.name} x${String(e.count)}: ${e.note}`,
    ),
  podLifecycle: (e) =>
    `${podLifecycleReasonToJSON(e.reason).replace('POD_LIFECYCLE_REASON_', '')} ${prefix(e.namespace)}${e.pod}${e.container ? `/${e.container}` : ''}`,
  auditRecord: (a) =>
    clip(
      `${a.event} ${a.target} by ${a.principal || '?'}${a.refusalCode ? ` refused ${a.refusalCode}` : ''}${a.outcome ? `: ${a.outcome}` : ''}`,
    ),
  resourceQueryResult: (r) =>
    r.error
      ? `query ${r.queryId} error ${r.error.code}: ${r.error.message}`
      : `query ${r.queryId} ${r.payload.byteLength} bytes`,
  nodeJobEvent: (e) =>
    e.event?.$case === 'pod'
      ? `job ${e.jobId} ${e.event.value.phase} ${e.event.value.namespace}/${e.event.value.name}`
      : `job ${e.jobId} ${e.event?.$case ?? ''}`,
  mutationResult: (r) => `mutation ${r.requestId} ${r.status} ${r.refusalCode}`.trim(),
};

/** One line a person can read in the UI. Never contains the tenant token. */
export function describeMessage(message: AgentMessage): string {
  const payload = message.payload;
  if (!payload) return '(no payload)';
  const describe = describers[payload.$case] as (value: Payload['value']) => string;
  return describe(payload.value);
}
