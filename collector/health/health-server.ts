// /healthz (the process is alive) and /readyz (every registered component is fine) on
// observability.health_addr; /metrics on observability.metrics_addr. Kubernetes probes and
// Prometheus are the only callers; anything but GET/HEAD is answered 405. Served by node:http:
// fastify (with its schema compilers, about 800 KB of the bundle) cost the idle collector
// several MiB for three routes (README, Sizing: "Idle footprint").
import { randomUUID } from 'node:crypto';
import http from 'node:http';
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

/** One answer: a status, a body and its content type (JSON unless it says otherwise). */
interface Reply {
  readonly status: number;
  readonly body: string;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

type Route = (query: URLSearchParams) => Promise<Reply> | Reply;

const JSON_TYPE = 'application/json; charset=utf-8';

const send = (code: number, body: unknown): Reply => ({ status: code, body: JSON.stringify(body) });

/**
 * A server for a few GET routes: HEAD answers as GET without the body, any other method on a
 * route is 405 with an Allow header, an unknown path 404. `everyReply` adds headers to every
 * answer (the request id).
 */
function createRouteServer(
  routes: Readonly<Record<string, Route>>,
  logger: Logger,
  everyReply: () => Readonly<Record<string, string>> = () => ({}),
): http.Server {
  const answer = async (request: http.IncomingMessage): Promise<Reply> => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    const route = Object.hasOwn(routes, url.pathname) ? routes[url.pathname] : undefined;
    const method = request.method ?? 'GET';
    if (route === undefined) {
      return send(404, {
        message: `Route ${method}:${url.pathname} not found`,
        error: 'Not Found',
        statusCode: 404,
      });
    }
    if (method !== 'GET' && method !== 'HEAD') {
      return { ...send(405, { error: 'method not allowed' }), headers: { allow: 'GET, HEAD' } };
    }
    return route(url.searchParams);
  };
  return http.createServer((request, response) => {
    answer(request)
      .catch((err: unknown) => {
        logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'route failed');
        return send(500, { error: 'internal error' });
      })
      .then(
        (reply) => {
          const body = Buffer.from(reply.body, 'utf8');
          response.writeHead(reply.status, {
            ...everyReply(),
            ...reply.headers,
            'content-type': reply.contentType ?? JSON_TYPE,
            'content-length': String(body.length),
          });
          response.end(request.method === 'HEAD' ? undefined : body);
        },
        () => undefined,
      );
  });
}

function buildHealthServer(
  options: HealthServerOptions,
  deps: HealthServerDeps,
  logger: Logger,
): http.Server {
  return createRouteServer(
    {
      '/healthz': () => send(200, { status: 'ok', timestamp: new Date(deps.now()).toISOString() }),
      '/readyz': async (query) => {
        const results = await Promise.all(
          deps.checks.map(
            async (check) => [check.name, await runCheck(check, options.checkTimeoutMs)] as const,
          ),
        );
        const ready = results.every(([, health]) => health.state === 'ok');
        const verbose = query.has('verbose') && query.get('verbose') !== 'false';
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
        return send(ready ? 200 : 503, body);
      },
    },
    logger,
    () => ({ 'x-request-id': randomUUID() }),
  );
}

function buildMetricsServer(registry: Registry, logger: Logger): http.Server {
  return createRouteServer(
    {
      '/metrics': async () => ({
        status: 200,
        contentType: registry.contentType,
        body: await registry.metrics(),
      }),
    },
    logger,
  );
}

async function listen(server: http.Server, address: ListenAddress): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: address.host, port: address.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function closeServer(server: http.Server): Promise<void> {
  if (!server.listening) return;
  await new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
    // Node 20 closes idle keep-alive connections on close(); a request in flight finishes.
    server.closeIdleConnections();
  });
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
  const healthServer = buildHealthServer(options, deps, logger);
  const metricsServer = buildMetricsServer(deps.registry, logger);
  const portOf = (server: http.Server): number => {
    const address = server.address();
    return address !== null && typeof address !== 'string' ? address.port : 0;
  };
  let closing: Promise<void> | undefined;
  return {
    name: 'health-server',
    async start() {
      await listen(healthServer, options.health);
      await listen(metricsServer, options.metrics);
      logger.info(
        { health: portOf(healthServer), metrics: portOf(metricsServer) },
        'health server listening',
      );
    },
    close() {
      closing ??= Promise.all([closeServer(healthServer), closeServer(metricsServer)]).then(
        () => undefined,
      );
      return closing;
    },
    ports: () => ({ health: portOf(healthServer), metrics: portOf(metricsServer) }),
  };
}
