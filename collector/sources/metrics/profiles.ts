// Cluster profiles: pprof endpoints (configured, or pods annotated kubexa.io/pprof-port) are
// profiled on a schedule: per target, one round per interval that takes each configured type in
// turn (CPU for cpu_duration, then heap, then goroutines), so a target never has two profiles
// in flight; a global semaphore caps profiles in flight across targets. Each profile is shipped
// as its raw bytes (gzip-compressed profile.proto, exactly as served) in a ProfileEvent. A
// profile over max_profile_bytes is dropped and counted (`too_large`) before it reaches the
// buffer; one under it but over the buffer's own item limit (buffer.max_disk_bytes) is dropped
// by the buffer as `too_large` too. Neither is split: half a profile does not parse.
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.js';
import { AGENT_VERSION } from '../../../shared/version.js';
import type { Sink } from '../source.js';
import { metricsItem, type MessageIdentity } from './encode.js';
import type { MetricsPart } from './metrics-source.js';
import { initialJitter, runLoop } from './schedule.js';
import { httpGet, redactUrl, ScrapeError } from './scrape-http.js';
import type { ScrapeRecorder, ScrapeStatus } from './self-metrics.js';

export type ProfileType = 'cpu' | 'heap' | 'goroutine';

export interface ProfileTarget {
  /** Key and `target` label: `pod/<ns>/<name>` or the configured name. */
  readonly name: string;
  /** The base of net/http/pprof, e.g. http://10.0.0.7:6060/debug/pprof */
  readonly baseUrl: string;
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly workload: string;
}

export interface ProfilesOptions {
  readonly intervalMs: number;
  readonly cpuDurationMs: number;
  readonly timeoutMs: number;
  readonly types: readonly ProfileType[];
  readonly maxConcurrent: number;
  readonly maxProfileBytes: number;
}

export interface ProfilesDeps {
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly recorder: ScrapeRecorder;
  readonly identity: MessageIdentity;
  readonly random?: () => number;
  /** Told of every profile shipped (the demo page lists them). */
  readonly onProfile?: (target: ProfileTarget, type: ProfileType, bytes: number) => void;
}

/** A counting semaphore: at most `limit` holders. */
export class Semaphore {
  readonly #limit: number;
  #held = 0;
  #waiting: (() => void)[] = [];
  /** The most ever held at once (for tests). */
  peak = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.#held >= this.#limit) {
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          signal.removeEventListener('abort', abort);
          resolve();
        };
        const abort = () => {
          this.#waiting = this.#waiting.filter((w) => w !== wake);
          reject(new Error('aborted'));
        };
        signal.addEventListener('abort', abort, { once: true });
        this.#waiting.push(wake);
      });
    } else {
      this.#held++;
    }
    this.peak = Math.max(this.peak, this.#held);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      if (next === undefined) this.#held--;
      else next(); // the slot passes straight to the next waiter
    };
  }
}

interface Running {
  readonly target: ProfileTarget;
  readonly abort: AbortController;
  readonly loop: Promise<void>;
}

export class ProfileTargets implements MetricsPart {
  readonly #options: ProfilesOptions;
  readonly #deps: ProfilesDeps;
  readonly #semaphore: Semaphore;
  readonly #running = new Map<string, Running>();
  #wanted: readonly ProfileTarget[];
  #signal: AbortSignal | undefined;

  /** The targets the config names (discovery adds pods to these). */
  readonly configured: readonly ProfileTarget[];

  constructor(targets: readonly ProfileTarget[], options: ProfilesOptions, deps: ProfilesDeps) {
    this.configured = targets;
    this.#wanted = targets;
    this.#options = options;
    this.#deps = deps;
    this.#semaphore = new Semaphore(options.maxConcurrent);
  }

  get semaphore(): Semaphore {
    return this.#semaphore;
  }

  start(signal: AbortSignal): void {
    this.#signal = signal;
    this.setTargets(this.#wanted);
  }

  async stopped(): Promise<void> {
    await Promise.all([...this.#running.values()].map((running) => running.loop));
  }

  setTargets(targets: readonly ProfileTarget[]): void {
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
      const loop = runLoop(
        {
          clock: this.#deps.clock,
          signal: abort.signal,
          initialDelayMs: initialJitter(this.#options.intervalMs, this.#deps.random),
        },
        async (loopSignal) => {
          for (const type of this.#options.types) await this.#profile(target, type, loopSignal);
          return this.#options.intervalMs;
        },
        (err) => {
          this.#deps.logger.error({ err, target: target.name }, 'profile loop bug');
          return this.#options.intervalMs;
        },
      ).finally(() => {
        signal.removeEventListener('abort', stop);
      });
      this.#running.set(target.name, { target, abort, loop });
    }
  }

  async #profile(target: ProfileTarget, type: ProfileType, signal: AbortSignal): Promise<void> {
    const { clock, recorder, logger } = this.#deps;
    const release = await this.#semaphore.acquire(signal);
    const started = clock.now();
    let status: ScrapeStatus = 'success';
    let shipped = 0;
    const url = profileUrl(target.baseUrl, type, this.#options.cpuDurationMs);
    try {
      const cpuMs = type === 'cpu' ? this.#options.cpuDurationMs : 0;
      const response = await httpGet(
        {
          url,
          accept: 'application/octet-stream',
          timeoutMs: this.#options.timeoutMs + cpuMs,
          maxBodyBytes: this.#options.maxProfileBytes,
          userAgent: `kubexa-agent/${AGENT_VERSION}`,
        },
        signal,
      );
      const at = clock.now();
      this.#deps.sink.enqueue(
        metricsItem(this.#deps.identity, at, {
          $case: 'profile',
          value: {
            namespace: target.namespace,
            pod: target.pod,
            container: target.container,
            workload: target.workload,
            profileType: type,
            durationMs: String(cpuMs),
            timestamp: String(at),
            pprof: response.body,
            targetUrl: redactUrl(url),
          },
        }),
      );
      shipped = 1;
      this.#deps.onProfile?.(target, type, response.body.length);
    } catch (err: unknown) {
      if (signal.aborted) throw err;
      const failure = err instanceof ScrapeError ? err : new ScrapeError('error', String(err));
      status = failure.status;
      logger.warn(
        { target: target.name, url: redactUrl(url), type, status, reason: failure.message },
        'profile failed',
      );
    } finally {
      release();
    }
    const at = clock.now();
    recorder.record({
      source: 'profile',
      target: `${target.name}/${type}`,
      status,
      durationMs: at - started,
      samples: shipped,
      at,
    });
  }
}

export function profileUrl(base: string, type: ProfileType, cpuDurationMs: number): string {
  const root = base.replace(/\/+$/, '');
  if (type === 'cpu')
    return `${root}/profile?seconds=${String(Math.max(1, Math.round(cpuDurationMs / 1000)))}`;
  return `${root}/${type}`;
}
