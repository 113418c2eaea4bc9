// Prometheus endpoint scrapes: configured custom_endpoints and pods discovered by annotation.
// Each target has its own loop (a slow or dead target never delays another), starting after a
// random jitter. A timeout or 5xx is retried twice, 1 s apart; a 4xx is not; a failed scrape
// then waits an exponential backoff from 5 s to 2 min (never less than the interval). Every
// failure is counted; it is logged once per target and cause, with the URL (credentials
// masked), and its recovery once.
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import { AGENT_VERSION } from '../../../shared/version.js';
import type { Sink } from '../source.js';
import { metricsItem, type MessageIdentity } from './encode.js';
import { ExpositionError, formatOf, parseExposition } from './exposition.js';
import { keepFamily, toWireFamily, type FamilyFilter } from './family-json.js';
import type { MetricsPart } from './metrics-source.js';
import { initialJitter, runLoop } from './schedule.js';
import { httpGet, redactUrl, ScrapeError, type HttpTarget } from './scrape-http.js';
import type { ScrapeRecorder, ScrapeStatus } from './self-metrics.js';

/** The text format first, OpenMetrics accepted (the parser reads both). */
export const PROMETHEUS_ACCEPT =
  'text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1';
export const ATTEMPTS = 3;
export const RETRY_DELAY_MS = 1000;
export const BACKOFF_INITIAL_MS = 5000;
export const BACKOFF_MAX_MS = 120_000;

export interface PromTarget {
  /** The `target` label of the self-metrics and the key of the target set. */
  readonly name: string;
  readonly url: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  readonly caFile: string;
  readonly bearerTokenFile: string;
  readonly extraLabels: Readonly<Record<string, string>>;
  readonly filter: FamilyFilter;
}

export interface PromTargetsDeps {
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly recorder: ScrapeRecorder;
  readonly identity: MessageIdentity;
  readonly random?: () => number;
  /** Told the families each successful scrape sent (the demo page lists them). */
  readonly onFamilies?: (target: PromTarget, families: readonly string[]) => void;
}

interface Running {
  readonly target: PromTarget;
  readonly abort: AbortController;
  readonly loop: Promise<void>;
}

/** A set of targets that can change while running (annotation discovery replaces it). */
export class PrometheusTargets implements MetricsPart {
  readonly #deps: PromTargetsDeps;
  readonly #running = new Map<string, Running>();
  #wanted: readonly PromTarget[];
  #signal: AbortSignal | undefined;

  constructor(targets: readonly PromTarget[], deps: PromTargetsDeps) {
    this.#wanted = targets;
    this.#deps = deps;
  }

  start(signal: AbortSignal): void {
    this.#signal = signal;
    this.setTargets(this.#wanted);
  }

  async stopped(): Promise<void> {
    await Promise.all([...this.#running.values()].map((running) => running.loop));
  }

  /** Starts loops for new targets, stops those no longer wanted, restarts changed ones. */
  setTargets(targets: readonly PromTarget[]): void {
    this.#wanted = targets;
    const signal = this.#signal;
    if (signal === undefined || signal.aborted) return;
    const byName = new Map(targets.map((target) => [target.name, target]));
    for (const [name, running] of this.#running) {
      const next = byName.get(name);
      if (next === undefined || JSON.stringify(next) !== JSON.stringify(running.target)) {
        running.abort.abort();
        this.#running.delete(name);
      }
    }
    for (const target of targets) {
      if (this.#running.has(target.name)) continue;
      const abort = new AbortController();
      const stop = () => {
        abort.abort();
      };
      signal.addEventListener('abort', stop, { once: true });
      const loop = this.#loop(target, abort.signal).finally(() => {
        signal.removeEventListener('abort', stop);
      });
      this.#running.set(target.name, { target, abort, loop });
    }
  }

  targets(): readonly PromTarget[] {
    return [...this.#running.values()].map((running) => running.target);
  }

  #loop(target: PromTarget, signal: AbortSignal): Promise<void> {
    const state: TargetState = { failures: 0, logged: '' };
    return runLoop(
      {
        clock: this.#deps.clock,
        signal,
        initialDelayMs: initialJitter(target.intervalMs, this.#deps.random),
      },
      (loopSignal) => this.#scrapeOnce(target, state, loopSignal),
      (err) => {
        this.#deps.logger.error({ err, target: target.name }, 'prometheus scrape loop bug');
        return target.intervalMs;
      },
    );
  }

  async #scrapeOnce(target: PromTarget, state: TargetState, signal: AbortSignal): Promise<number> {
    const { clock, recorder, logger } = this.#deps;
    const started = clock.now();
    let status: ScrapeStatus = 'success';
    let samples = 0;
    let next = target.intervalMs;
    const url = redactUrl(target.url);
    try {
      samples = await this.#scrapeAndSend(target, signal);
      if (state.failures > 0)
        logger.info({ target: target.name, url }, 'prometheus scrape succeeds again');
      state.failures = 0;
      state.logged = '';
    } catch (err: unknown) {
      if (signal.aborted) throw err;
      const failure =
        err instanceof ScrapeError
          ? err
          : new ScrapeError('error', err instanceof Error ? err.message : String(err));
      status = failure.status;
      state.failures++;
      const backoff = Math.min(
        BACKOFF_MAX_MS,
        BACKOFF_INITIAL_MS * 2 ** Math.min(state.failures - 1, 10),
      );
      next = Math.max(target.intervalMs, backoff);
      const key = `${failure.status}: ${failure.message}`;
      if (key !== state.logged) {
        state.logged = key;
        logger.warn(
          {
            target: target.name,
            url,
            status: failure.status,
            reason: failure.message,
            retryInMs: next,
          },
          'prometheus scrape failed',
        );
      }
    }
    const at = clock.now();
    recorder.record({
      source: 'custom',
      target: target.name,
      status,
      durationMs: at - started,
      samples,
      at,
    });
    return next;
  }

  /** Fetches (with retries), parses and enqueues one event per kept family; returns the samples. */
  async #scrapeAndSend(target: PromTarget, signal: AbortSignal): Promise<number> {
    const response = await this.#fetchWithRetries(target, signal);
    const scrapedAt = this.#deps.clock.now();
    let families;
    try {
      families = parseExposition(response.body.toString('utf8'), formatOf(response.contentType));
    } catch (err: unknown) {
      if (err instanceof ExpositionError) throw new ScrapeError('parse_error', err.message);
      throw err;
    }
    const url = redactUrl(target.url);
    let samples = 0;
    const sent: string[] = [];
    for (const family of families) {
      if (family.samples.length === 0 || !keepFamily(family.name, target.filter)) continue;
      const { family: wire } = toWireFamily(family, target.extraLabels);
      if (wire.metrics.length === 0) continue;
      samples += wire.metrics.length;
      sent.push(family.name);
      this.#deps.sink.enqueue(
        metricsItem(this.#deps.identity, scrapedAt, {
          $case: 'prometheusMetrics',
          value: {
            targetUrl: url,
            metricFamilyJson: JSON.stringify(wire),
            scrapedAt: String(scrapedAt),
          },
        }),
      );
    }
    this.#deps.onFamilies?.(target, sent);
    return samples;
  }

  async #fetchWithRetries(target: PromTarget, signal: AbortSignal) {
    const http: HttpTarget = {
      url: target.url,
      accept: PROMETHEUS_ACCEPT,
      timeoutMs: target.timeoutMs,
      maxBodyBytes: target.maxBodyBytes,
      caFile: target.caFile,
      bearerTokenFile: target.bearerTokenFile,
      userAgent: `kubexa-agent/${AGENT_VERSION}`,
    };
    for (let attempt = 1; ; attempt++) {
      try {
        return await httpGet(http, signal);
      } catch (err: unknown) {
        const retryable =
          err instanceof ScrapeError && (err.status === 'timeout' || err.status === 'server_error');
        if (!retryable || attempt >= ATTEMPTS || signal.aborted) throw err;
        await this.#deps.clock.sleep(RETRY_DELAY_MS, signal);
      }
    }
  }
}

interface TargetState {
  failures: number;
  /** The last failure logged ("status: message"); empty after a success. */
  logged: string;
}
