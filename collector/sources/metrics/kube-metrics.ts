// metrics.k8s.io scrapes: per rule, one loop for pods and one for nodes at the rule's interval,
// each starting after a random jitter. One MetricsEvent per pod (its containers summed) and per
// node. The Metrics API being absent (no APIService, or its backend down) is a state, not an
// error storm: one warning for the whole source, a retry every 30 s, and `available()` false
// until a scrape succeeds again.
import { minimatch } from 'minimatch';
import type { Logger } from 'pino';
import { KubeMetricsResourceType } from '../../../proto/index.js';
import type { Clock } from '../../../shared/clock.js';
import type { BufferItem } from '../../buffer/types.js';
import type { Sink } from '../source.js';
import { metricsItem, type MessageIdentity } from './encode.js';
import {
  describeApiError,
  isMetricsApiUnavailable,
  type MetricsApi,
  type UsageItem,
} from './metrics-api.js';
import { bytes, nanocores } from './quantity.js';
import { initialJitter, runLoop } from './schedule.js';
import type { ScrapeRecorder, ScrapeStatus } from './self-metrics.js';

/** Retry delay while metrics.k8s.io is not served. */
export const UNAVAILABLE_RETRY_MS = 30_000;
/** First retry delay after any other error; doubles per failure up to the rule's interval. */
export const ERROR_RETRY_MS = 5_000;

const GLOB = { dot: true, nocomment: true, nonegate: true } as const;

export interface KubeMetricsRule {
  readonly id: string;
  readonly namespace: string;
  readonly resources: readonly string[];
  readonly pod_names: readonly string[];
  readonly node_names: readonly string[];
  readonly label_selector: string;
  readonly field_selector: string;
  readonly pod_interval?: number | undefined;
  readonly node_interval?: number | undefined;
}

export interface KubeMetricsOptions {
  readonly rules: readonly KubeMetricsRule[];
  /** collect.metrics.pod_interval / node_interval (already "0 means 30s"-resolved). */
  readonly podIntervalMs: number;
  readonly nodeIntervalMs: number;
  readonly identity: MessageIdentity;
}

export interface KubeMetricsDeps {
  readonly api: MetricsApi;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly recorder: ScrapeRecorder;
  readonly random?: () => number;
}

export type Availability = 'unknown' | 'available' | 'unavailable';

interface Scraper {
  readonly target: string;
  readonly intervalMs: number;
  scrape(signal: AbortSignal): Promise<BufferItem[]>;
}

const POD = KubeMetricsResourceType.KUBE_METRICS_RESOURCE_TYPE_POD;
const NODE = KubeMetricsResourceType.KUBE_METRICS_RESOURCE_TYPE_NODE;

export class KubeMetricsScraper {
  readonly #options: KubeMetricsOptions;
  readonly #deps: KubeMetricsDeps;
  #availability: Availability = 'unknown';
  #warnedUnavailable = false;
  #loops: Promise<void>[] = [];

  constructor(options: KubeMetricsOptions, deps: KubeMetricsDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  /** Whether the last scrape found metrics.k8s.io served (for the capability and readiness). */
  availability(): Availability {
    return this.#availability;
  }

  /** Starts every loop; they run until `signal` aborts. */
  start(signal: AbortSignal): void {
    const random = this.#deps.random ?? Math.random;
    for (const scraper of this.#scrapers()) {
      const failures = { count: 0, lastMessage: '' };
      this.#loops.push(
        runLoop(
          {
            clock: this.#deps.clock,
            signal,
            initialDelayMs: initialJitter(scraper.intervalMs, random),
          },
          (loopSignal) => this.#runOnce(scraper, failures, loopSignal),
          (err) => {
            this.#deps.logger.error({ err, target: scraper.target }, 'metrics scrape loop bug');
            return scraper.intervalMs;
          },
        ),
      );
    }
  }

  /** Resolves when every loop has ended (after the start signal aborted). */
  async stopped(): Promise<void> {
    await Promise.all(this.#loops);
  }

  #scrapers(): Scraper[] {
    const out: Scraper[] = [];
    for (const rule of this.#options.rules) {
      const kinds = new Set(rule.resources.map((r) => r.trim().toLowerCase().replace(/s$/, '')));
      if (kinds.has('pod')) {
        out.push({
          target: `pods/${rule.id}`,
          intervalMs: positiveOr(rule.pod_interval, this.#options.podIntervalMs),
          scrape: (signal) => this.#scrapePods(rule, signal),
        });
      }
      if (kinds.has('node')) {
        out.push({
          target: `nodes/${rule.id}`,
          intervalMs: positiveOr(rule.node_interval, this.#options.nodeIntervalMs),
          scrape: (signal) => this.#scrapeNodes(rule, signal),
        });
      }
    }
    return out;
  }

  async #runOnce(
    scraper: Scraper,
    failures: { count: number; lastMessage: string },
    signal: AbortSignal,
  ): Promise<number> {
    const { clock, logger, recorder, sink } = this.#deps;
    const started = clock.now();
    let status: ScrapeStatus = 'success';
    let items: BufferItem[] = [];
    let next: number;
    try {
      items = await scraper.scrape(signal);
      for (const item of items) sink.enqueue(item);
      if (this.#availability === 'unavailable' || failures.count > 0) {
        logger.info({ target: scraper.target }, 'metrics.k8s.io scrapes succeed again');
      }
      this.#availability = 'available';
      this.#warnedUnavailable = false;
      failures.count = 0;
      failures.lastMessage = '';
      next = scraper.intervalMs;
    } catch (err: unknown) {
      if (signal.aborted) throw err;
      const reason = describeApiError(err);
      if (isMetricsApiUnavailable(err)) {
        status = 'unavailable';
        this.#availability = 'unavailable';
        if (!this.#warnedUnavailable) {
          this.#warnedUnavailable = true;
          logger.warn(
            { target: scraper.target, reason, retryInSeconds: UNAVAILABLE_RETRY_MS / 1000 },
            'metrics.k8s.io is not served (is metrics-server installed and its APIService Available?): no pod or node metrics until it is',
          );
        }
        next = UNAVAILABLE_RETRY_MS;
      } else {
        status = 'error';
        failures.count += 1;
        // One line per change of reason, not one per retry.
        if (reason !== failures.lastMessage) {
          failures.lastMessage = reason;
          logger.warn({ target: scraper.target, reason }, 'metrics.k8s.io scrape failed');
        }
        next = Math.min(
          Math.max(ERROR_RETRY_MS, scraper.intervalMs),
          ERROR_RETRY_MS * 2 ** Math.min(failures.count - 1, 10),
        );
      }
    }
    const at = clock.now();
    recorder.record({
      source: 'kubernetes',
      target: scraper.target,
      status,
      durationMs: at - started,
      samples: items.length,
      at,
    });
    return next;
  }

  async #scrapePods(rule: KubeMetricsRule, signal: AbortSignal): Promise<BufferItem[]> {
    const { api } = this.#deps;
    const selected =
      rule.label_selector !== '' || rule.field_selector !== ''
        ? await api.listSelectedPods(
            {
              namespace: rule.namespace,
              labelSelector: rule.label_selector,
              fieldSelector: rule.field_selector,
            },
            signal,
          )
        : undefined;
    const list = await api.listPodMetrics(rule.namespace, signal);
    const now = this.#deps.clock.now();
    const out: BufferItem[] = [];
    for (const item of list) {
      const name = item.metadata.name;
      const namespace = item.metadata.namespace ?? '';
      if (!matchesAny(name, rule.pod_names)) continue;
      if (selected !== undefined && !selected.has(`${namespace}/${name}`)) continue;
      const usage = podUsage(item);
      if (usage === undefined) continue;
      out.push(this.#event({ resourceType: POD, namespace, name, usage, item }, now));
    }
    return out;
  }

  async #scrapeNodes(rule: KubeMetricsRule, signal: AbortSignal): Promise<BufferItem[]> {
    const list = await this.#deps.api.listNodeMetrics(signal);
    const now = this.#deps.clock.now();
    const out: BufferItem[] = [];
    for (const item of list) {
      if (!matchesAny(item.metadata.name, rule.node_names)) continue;
      const usage = nodeUsage(item);
      if (usage === undefined) continue;
      out.push(
        this.#event(
          { resourceType: NODE, namespace: '', name: item.metadata.name, usage, item },
          now,
        ),
      );
    }
    return out;
  }

  #event({ resourceType, namespace, name, usage, item }: EventParts, now: number): BufferItem {
    const parsed = item.timestamp === undefined ? Number.NaN : Date.parse(item.timestamp);
    const timestamp = Number.isFinite(parsed) ? parsed : now;
    return metricsItem(this.#options.identity, timestamp, {
      $case: 'kubeMetrics',
      value: {
        resourceType,
        namespace,
        name,
        cpuNanocores: usage.cpu.toString(),
        memoryBytes: usage.memory.toString(),
        timestamp: String(timestamp),
        windowSeconds: windowSeconds(item.window),
      },
    });
  }
}

interface EventParts {
  readonly resourceType: typeof POD | typeof NODE;
  readonly namespace: string;
  readonly name: string;
  readonly usage: Usage;
  readonly item: UsageItem;
}

interface Usage {
  readonly cpu: bigint;
  readonly memory: bigint;
}

function positiveOr(value: number | undefined, fallback: number): number {
  return value !== undefined && value > 0 ? value : fallback;
}

function matchesAny(name: string, globs: readonly string[]): boolean {
  return globs.length === 0 || globs.some((glob) => minimatch(name, glob, GLOB));
}

/** Containers summed; undefined when a quantity does not parse (the item is skipped). */
export function podUsage(item: UsageItem): Usage | undefined {
  try {
    let cpu = 0n;
    let memory = 0n;
    for (const container of item.containers ?? []) {
      cpu += nanocores(container.usage.cpu ?? '0');
      memory += bytes(container.usage.memory ?? '0');
    }
    return { cpu, memory };
  } catch {
    return undefined;
  }
}

export function nodeUsage(item: UsageItem): Usage | undefined {
  try {
    return { cpu: nanocores(item.usage?.cpu ?? '0'), memory: bytes(item.usage?.memory ?? '0') };
  } catch {
    return undefined;
  }
}

/** A Go duration ("10.5s", "1m0s", "500ms") in whole seconds: 0 when absent or ≤ 0, else at least 1. */
export function windowSeconds(window: string | undefined): number {
  if (window === undefined) return 0;
  const units: Record<string, number> = {
    h: 3600,
    m: 60,
    s: 1,
    ms: 1e-3,
    us: 1e-6,
    µs: 1e-6,
    ns: 1e-9,
  };
  let seconds = 0;
  let matched = '';
  for (const match of window.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|\u00b5s|ns)/g)) {
    seconds += Number(match[1]) * (units[match[2] ?? 's'] ?? 0);
    matched += match[0];
  }
  if (matched === '' || matched !== window.replace(/^-/, '')) return 0;
  if (window.startsWith('-') || seconds <= 0) return 0;
  return Math.max(1, Math.round(seconds));
}
