// The single import surface for generated protobuf code: nothing else imports proto/gen.
export {
  AuthorizeCommandRequest,
  AuthorizeCommandResponse,
  ExecutorServiceClient,
  ExecutorServiceService,
  GetCapabilitiesRequest,
  GetCapabilitiesResponse,
  type ExecutorServiceServer,
  Gate,
} from './gen/executor/v1/executor.js';
export {
  CommandTarget,
  Refusal,
  RefusalCode,
  refusalCodeToJSON,
  SignedCommand,
} from './gen/executor/v1/command.js';
export { AccessReview, GateAccess } from './gen/executor/v1/catalog.js';

// Gateway <-> collector contract (agent.v1, common.v1): wire-compatible with the Go agent.
export {
  Ack,
  AgentCapabilities,
  AgentHealth,
  AgentMessage,
  AgentServiceClient,
  AgentServiceService,
  type AgentServiceServer,
  BackpressureSignal,
  ConfigSnapshot,
  ConfigUpdate,
  GatewayMessage,
  HandshakeRequest,
  HandshakeResponse,
  Heartbeat,
  IngestRules,
  LogCollectorConfig,
  MetricScrapeConfig,
  QueryError,
  QueryErrorCode,
  QueryVerb,
  QueryView,
  ResourceQuery,
  ResourceQueryResult,
  ResourceRef,
  Shutdown,
  WatcherConfig,
} from './gen/agent/v1/agent.js';
export {
  AccessCheck,
  ExecutorCatalog,
  ExecutorState,
  PrivilegedCapability,
  ResourceCapability,
  ResourceCatalog,
} from './gen/agent/v1/catalog.js';
export { LogBatch, LogEntry, LogLevel } from './gen/agent/v1/log.js';
export {
  KubeMetricsResourceType,
  Metric,
  // Deprecated on the wire (never produced), exported so the demo gateway can still parse it.
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  MetricBatch,
  MetricFamily,
  MetricType,
  MetricsEvent,
  PrometheusMetricsEvent,
} from './gen/agent/v1/metric.js';
export { EventType, eventTypeToJSON, ResourceKind, StateEvent } from './gen/agent/v1/state.js';
export { ProfileEvent } from './gen/agent/v1/profile.js';
export { AgentMetadata } from './gen/common/v1/metadata.js';
// Node jobs and generic mutations (executor.v1, node_job.proto).
export {
  ApplyMutationRequest,
  ApplyMutationResponse,
  CancelNodeJobRequest,
  CancelNodeJobResponse,
  DrainOptions,
  ExecutorAudit,
  NodeJobOutcome,
  NodeJobResult,
  NodeJobStarted,
  NodePodProgress,
  PatchType,
  PodPhase,
  RunNodeJobRequest,
  RunNodeJobResponse,
} from './gen/executor/v1/node_job.js';

// Kubernetes events and pod lifecycle events (agent.v1 events.proto).
export {
  KubeEvent,
  LifecycleSeverity,
  ObjectReference,
  PodLifecycleEvent,
  PodLifecycleReason,
  podLifecycleReasonToJSON,
  WorkloadReference,
} from './gen/agent/v1/events.js';

// executor.v1 consoles (console.proto).
export {
  ConsoleAttach,
  ConsoleAudit,
  ConsoleChunk,
  ConsoleClose,
  ConsoleEndReason,
  ConsoleExit,
  ConsoleOpen,
  ConsoleOpened,
  ConsoleRequest,
  ConsoleResponse,
  ConsoleStream,
  TerminalSize,
} from './gen/executor/v1/console.js';

// agent.v1 consoles and audit records (console.proto, audit.proto).
export { AuditRecord } from './gen/agent/v1/audit.js';
export {
  ConsoleAgentFrame,
  ConsoleAttachRequest,
  ConsoleExitEvent,
  ConsoleGatewayFrame,
  ConsoleOpenedEvent,
  ConsoleOpenRequest,
  ConsoleOutputChunk,
  ConsoleRefusal,
  ConsoleResize,
} from './gen/agent/v1/console.js';
// Node jobs and mutations on the gateway wire (agent.v1).
export {
  MutationRequest as GatewayMutationRequest,
  MutationResult,
  NodeJobCancel,
  NodeJobDone,
  NodeJobEvent,
  NodeJobPod,
  NodeJobRequest,
} from './gen/agent/v1/node_job.js';
export { podPhaseToJSON } from './gen/executor/v1/node_job.js';
