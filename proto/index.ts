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
export { CommandTarget, Refusal, RefusalCode, SignedCommand } from './gen/executor/v1/command.js';

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
export { ResourceCapability, ResourceCatalog } from './gen/agent/v1/catalog.js';
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
