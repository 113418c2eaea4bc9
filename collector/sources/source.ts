// The contract between the collector's data sources and the buffer: sources push encoded
// AgentMessages into a Sink and never import the gateway. Data flows one way:
// sources -> buffer -> gateway.
import type { BufferItem } from '../buffer/types.js';
import type { Service } from '../../shared/lifecycle/service.js';
import type { ComponentHealth } from '../health/health-server.js';

/** Where a source puts what it collected; in production, the durable buffer. */
export interface Sink {
  /** Never throws for a full buffer: the buffer's overflow policy drops and counts. */
  enqueue(item: BufferItem): void;
}

/**
 * A source is a Service that writes into its Sink while running. Its `up()` answers the
 * readiness check and the kubexa_collector_source_up gauge.
 */
export interface Source extends Service {
  /** True while the source does its job (e.g. its watches are synced and not forbidden). */
  up(): boolean;
  /** Readiness with a reason (e.g. the resource not synced yet); default: from up(). */
  health?(): ComponentHealth;
}
