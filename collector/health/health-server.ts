// /healthz (the process is alive) and /readyz (every registered component is fine) on
// observability.health_addr; /metrics on observability.metrics_addr. Kubernetes probes and
// Prometheus are the only callers; anything but GET/HEAD is answered 405.
import { randomUUID } from 'node:crypto';
import fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Service } from '../../shared/lifecycle/service.js';
import type { ListenAddress } from './listen-address.js';

export type ComponentState = 'ok' | 'degraded' | 'unhealthy';

export interface ComponentHealth {
  readonly state: ComponentState;
  /** Why the component is not ok; never a secret. */
  readonly reason?: string;
}

/** One named readiness check; it must answer quickly and never throw for an expected state. */
export interface ReadinessCheck {
  readonly name: string;
  check(): Promise<ComponentHealth> | ComponentHealth;
}

export interface HealthServerOptions {
  readonly health: ListenAddress;
  readonly metrics: ListenAddress;
  /** A check that takes longer than this counts as unhealthy. */
  readonly checkTimeoutMs: number;
}

export interface HealthServerDeps {
  readonly logger: Logger;
  readonly registry: Registry;
  readonly checks: readonly ReadinessCheck[];
  readonly now: () => number;
}

async function runCheck(check: ReadinessCheck, timeoutMs: number): Promise<ComponentHealth> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<ComponentHealth>((resolve) => {
    timer = setTimeout(() => {
      resolve({ state: 'unhealthy', reason: `check timed out after ${String(timeoutMs)} ms` });
    }, timeoutMs);
    timer.unref();
  });
  try {
    return await Promise.race([Promise.resolve(check.check()), timeout]);
  } catch (err: unknown) {
    return { state: 'unhealthy', reason: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

function onlyGet(app: FastifyInstance, path: string): void {
  app.route({
    method: ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    url: path,
    handler: (_request, reply) =>
      reply.code(405).header('allow', 'GET, HEAD').send({ error: 'method not allowed' }),
  });
}

function buildHealthApp(options: HealthServerOptions, deps: HealthServerDeps): FastifyInstance {
  const app = fastify({ genReqId: () => randomUUID() });
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.get('/healthz', () => ({ status: 'ok', timestamp: new Date(deps.now()).toISOString() }));
  app.get<{ Querystring: { verbose?: string } }>('/readyz', async (request, reply) => {
    const results = await Promise.all(
      deps.checks.map(
        async (check) => [check.name, await runCheck(check, options.checkTimeoutMs)] as const,
      ),
    );
    const ready = results.every(([, health]) => health.state === 'ok');
    const verbose = request.query.verbose !== undefined && request.query.verbose !== 'false';
    const body: Record<string, unknown> = {
      status: ready ? 'ok' : 'degraded',
      timestamp: new Date(deps.now()).toISOString(),
    };
    if (verbose || !ready) {
      body['components'] = Object.fromEntries(
        results.map(([name, health]) => [
          name,
          { status: health.state, reason: health.reason ?? null },
        ]),
      );
    }
    return reply.code(ready ? 200 : 503).send(body);
  });
  onlyGet(app, '/healthz');
  onlyGet(app, '/readyz');
  return app;
}

function buildMetricsApp(registry: Registry): FastifyInstance {
  const app = fastify();
  app.get('/metrics', async (_request, reply) =>
    reply.header('content-type', registry.contentType).send(await registry.metrics()),
  );
  onlyGet(app, '/metrics');
  return app;
}

export interface HealthServer extends Service {
  /** Bound ports, valid only after start (port 0 in the options picks a free one). */
  ports(): { health: number; metrics: number };
}

export function createHealthServer(
  options: HealthServerOptions,
  deps: HealthServerDeps,
): HealthServer {
  const logger = deps.logger.child({ component: 'health-server' });
  const healthApp = buildHealthApp(options, deps);
  const metricsApp = buildMetricsApp(deps.registry);
  const portOf = (app: FastifyInstance): number => {
    const address = app.server.address();
    return address !== null && typeof address !== 'string' ? address.port : 0;
  };
  let closing: Promise<void> | undefined;
  return {
    name: 'health-server',
    async start() {
      await healthApp.listen({ host: options.health.host, port: options.health.port });
      await metricsApp.listen({ host: options.metrics.host, port: options.metrics.port });
      logger.info(
        { health: portOf(healthApp), metrics: portOf(metricsApp) },
        'health server listening',
      );
    },
    close() {
      closing ??= Promise.all([healthApp.close(), metricsApp.close()]).then(() => undefined);
      return closing;
    },
    ports: () => ({ health: portOf(healthApp), metrics: portOf(metricsApp) }),
  };
}
