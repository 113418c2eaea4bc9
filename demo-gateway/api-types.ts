// The data the demo gateway stores and its web UI shows: one set of types for the server
// (demo-gateway/*.ts) and the front-end (demo-gateway/ui), so a renamed field fails both builds.
// Type-only: nothing here may import Node or the browser.

/** The last heartbeat of a session: counters are cumulative since the agent process started. */
export interface HeartbeatView {
  readonly status: string;
  readonly queueDepth: number;
  readonly droppedMessages: number;
  readonly truncatedLines: number;
  readonly droppedRateLimited: number;
  /** AgentHealth.metrics_api: "available", "unavailable" or "" (not scraped, or an older agent). */
  readonly metricsApi: string;
  readonly at: number;
}

/** The throttle the gateway asked for, while it lasts. */
export interface ThrottleView {
  readonly since: number;
  readonly delayMs: number;
}

/** What the UI and tests see of one agent connection. */
export interface SessionInfo {
  readonly sessionId: string;
  readonly agentId: string;
  readonly clusterId: string;
  readonly agentVersion: string;
  readonly protoVersion: string;
  readonly deliveryAcks: boolean;
  readonly peer: string;
  readonly connectedAt: number;
  readonly lastMessageAt: number;
  readonly received: number;
  readonly duplicates: number;
  readonly acked: number;
  readonly state: 'connected' | 'closed';
  readonly closeReason: string | undefined;
  /** The agent's heartbeat interval as configured by this gateway, when it pushed one. */
  readonly heartbeatIntervalMs: number | undefined;
  readonly lastHeartbeat: HeartbeatView | undefined;
  readonly throttle: ThrottleView | undefined;
}

export type ControlKind =
  | 'handshake'
  | 'backpressure'
  | 'config'
  | 'shutdown'
  | 'query'
  | 'closed'
  | 'heartbeat-status'
  | 'consoleOpen'
  | 'consoleAttach'
  | 'nodeJobRequest'
  | 'nodeJobCancel'
  | 'mutationRequest';

/** One entry of a session's timeline: what the gateway sent, and the session's own milestones. */
export interface ControlEvent {
  readonly seq: number;
  readonly sessionId: string;
  readonly at: number;
  readonly kind: ControlKind;
  /** Sent by the gateway (true) or seen from the agent (false). */
  readonly outbound: boolean;
  readonly detail: string;
}

/** 0 unspecified, 1 debug, 2 info, 3 warn, 4 error: the LogLevel enum's numbers. */
export type LevelNumber = 0 | 1 | 2 | 3 | 4;

export const LEVEL_NAMES: readonly string[] = ['', 'debug', 'info', 'warn', 'error'];

/**
 * One stored log record: one LogEntry of a LogBatch (a multi-line record such as a stack trace
 * is one record, its `raw` holding every line), or a marker that the agent dropped lines.
 */
export interface LogLine {
  readonly seq: number;
  readonly kind: 'line' | 'rate-limited';
  readonly sessionId: string;
  /** The log's own timestamp (unix ms, from the runtime's timestamp on the line). */
  readonly timeMs: number;
  readonly receivedAt: number;
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly workload: string;
  readonly workloadKind: string;
  readonly node: string;
  readonly level: LevelNumber;
  /** The first line. */
  readonly message: string;
  /** Every line of the record, newline-joined; equal to message for a one-line record. */
  readonly raw: string;
  readonly lineCount: number;
  readonly truncated: boolean;
}

/** Filters of GET /api/logs; an empty string means "any". */
export interface LogFilter {
  readonly namespace?: string;
  readonly workload?: string;
  readonly pod?: string;
  readonly container?: string;
  /** The minimum level: "warn" shows warn and error. */
  readonly level?: string;
  /** Case-insensitive substring of any line of the record. */
  readonly text?: string;
}

export interface LogPage {
  /** Oldest first. */
  readonly lines: LogLine[];
  /** More lines older than the first one match. */
  readonly hasOlder: boolean;
  /** The newest seq stored (matching or not), so a follower asks for `after` it next. */
  readonly newestSeq: number;
}

export interface FollowedContainer {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly workload: string;
  readonly lastLineAt: number;
  readonly lines: number;
}

export interface LogStats {
  /** Lines received per second over the last 10 s. */
  readonly linesPerSecond: number;
  readonly totalLines: number;
  /** Containers that sent a line in the last 5 minutes, newest first. */
  readonly containers: FollowedContainer[];
}

export interface LogFacets {
  readonly namespaces: string[];
  readonly workloads: string[];
  readonly pods: string[];
  readonly containers: string[];
}

/** GET /api/overview: everything the frame and the Agents view poll. */
export interface Overview {
  readonly now: number;
  readonly sessions: SessionInfo[];
  readonly totals: {
    readonly stored: number;
    readonly duplicates: number;
    readonly byKind: Record<string, number>;
  };
  readonly logs: LogStats;
}

/** Answer of every control POST. */
export interface ControlResult {
  readonly sent: boolean;
  readonly error?: string;
}

// The Metrics view (demo-gateway/metrics-routes.ts).

/** One node's or pod's samples: [unix ms, CPU cores, memory bytes], oldest first. */
export interface MetricSeries {
  /** The node's name, or namespace/pod. */
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly points: [number, number, number][];
}

export interface MetricsSnapshot {
  readonly nodes: MetricSeries[];
  readonly pods: MetricSeries[];
}

/** The newest scrape of one Prometheus family of one target. */
export interface FamilyRow {
  readonly targetUrl: string;
  readonly name: string;
  /** counter, gauge, histogram, summary, unspecified (untyped). */
  readonly type: string;
  readonly help: string;
  readonly series: number;
  /** The first few series; value null when it is NaN or ±Inf (left out of the JSON). */
  readonly examples: { labels: Record<string, string>; value: number | null }[];
  readonly scrapedAt: number;
}

/** A received profile; its raw pprof bytes are at /api/metrics/profiles/:id/pprof. */
export interface ProfileRow {
  readonly id: string;
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly workload: string;
  /** cpu, heap or goroutine. */
  readonly type: string;
  readonly durationMs: number;
  readonly timestamp: number;
  readonly targetUrl: string;
  readonly bytes: number;
}
