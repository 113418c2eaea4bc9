import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import { fastify, type FastifyInstance, type FastifyReply } from 'fastify';
import type { ControlResult, LogFilter, Overview } from './api-types.js';
import { registerConsoleRoutes } from './console-routes.js';
import { registerNodeRoutes } from './node-routes.js';
import { registerClusterRoutes } from './cluster-routes.js';
import { registerNodeConsoleRoutes } from './node-console-routes.js';
import type { DemoGateway } from './demo-gateway.js';
import { parseLevels } from './log-store.js';
import { registerMetricsRoutes } from './metrics-routes.js';
import { registerQueryRoutes } from './query-routes.js';
import { UI_OUT_DIR, uiBuildIsCurrent } from './ui-build.js';

/** Messages returned per poll of /api/state at most. */
const MAX_MESSAGES_PER_POLL = 200;
const DEFAULT_PAGE = 200;

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
};

export interface WebUiOptions {
  /** The built bundle (dist/demo-ui by default). */
  readonly uiDir?: string;
}

interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

/** Every file of the bundle, read once: the bundle is a few small files. */
function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const walk = (current: string): void => {
    for (const name of readdirSync(current)) {
      const path = join(current, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (!name.startsWith('.')) {
        assets.set(`/${relative(dir, path).split('\\').join('/')}`, {
          type: CONTENT_TYPES[extname(name)] ?? 'application/octet-stream',
          body: readFileSync(path),
        });
      }
    }
  };
  walk(dir);
  return assets;
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Kubexa demo gateway</title>
<p>The web UI is not built (or was built from older sources). Run <code>npm run build:ui</code>
and restart; <code>npm run demo</code> does this by itself.</p>`;

/** A query-string value as one string ("" when absent or repeated oddly). */
function one(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** A positive integer query value, or undefined; throws with the parameter's name. */
function seqParam(name: string, value: unknown): number | undefined {
  const text = one(value);
  if (text === '') return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name}: not a sequence number: ${text}`);
  return n;
}

function filterOf(query: Record<string, unknown>): LogFilter {
  const filter = {
    namespace: one(query['namespace']),
    workload: one(query['workload']),
    pod: one(query['pod']),
    container: one(query['container']),
    level: one(query['level']),
    text: one(query['q']),
  };
  parseLevels(filter.level); // refuses an unknown level with its name
  return filter;
}

/**
 * The demo gateway's web UI: the Vite-built front-end (demo-gateway/ui, no CDN) and the JSON
 * endpoints it polls, plus the control actions it sends to an agent's session.
 */
export function createWebUi(gateway: DemoGateway, options: WebUiOptions = {}): FastifyInstance {
  const uiDir = options.uiDir ?? UI_OUT_DIR;
  const built = existsSync(join(uiDir, 'index.html')) && uiBuildIsCurrent(uiDir);
  const assets = built ? loadAssets(uiDir) : new Map<string, Asset>();
  const app = fastify({ logger: false });

  app.get('/api/overview', (): Overview => {
    const now = Date.now();
    return {
      now,
      sessions: gateway.sessions(),
      totals: {
        stored: gateway.store.count(),
        duplicates: gateway.store.duplicates,
        byKind: gateway.store.countByKind(),
      },
      logs: gateway.store.logs.stats(now),
    };
  });

  app.get('/api/logs', (request, reply) => {
    const query = request.query as Record<string, unknown>;
    try {
      const limit = seqParam('limit', query['limit']) ?? DEFAULT_PAGE;
      return gateway.store.logs.query(filterOf(query), {
        limit,
        before: seqParam('before', query['before']),
        after: seqParam('after', query['after']),
      });
    } catch (err: unknown) {
      return reply.code(400).send({ error: err instanceof Error ? err.message : String(err) });
    }
  });

  app.get('/api/logs/facets', () => gateway.store.logs.facets());

  app.get<{ Params: { id: string } }>('/api/sessions/:id/timeline', (request) =>
    gateway.store.controls(request.params.id),
  );

  /** The raw message stream (every kind); kept for scripts and older pages. */
  app.get<{ Querystring: { after?: string } }>('/api/state', (request) => {
    const after = Number(request.query.after ?? 0);
    return {
      now: Date.now(),
      sessions: gateway.sessions(),
      totals: {
        stored: gateway.store.count(),
        duplicates: gateway.store.duplicates,
        byKind: gateway.store.countByKind(),
      },
      messages: gateway.store.recent(MAX_MESSAGES_PER_POLL, Number.isFinite(after) ? after : 0),
    };
  });

  app.post<{ Params: { id: string }; Body: { reason?: string } | null }>(
    '/api/sessions/:id/shutdown',
    (request, reply) => {
      const reason = request.body?.reason ?? 'requested from the demo gateway UI';
      return sendOr404(reply, () => gateway.sendShutdown(request.params.id, reason));
    },
  );

  app.post<{ Params: { id: string }; Body: { throttle?: boolean; delayMs?: number } | null }>(
    '/api/sessions/:id/backpressure',
    (request, reply) => {
      const throttle = request.body?.throttle ?? true;
      const delayMs = request.body?.delayMs ?? 2000;
      return sendOr404(reply, () =>
        gateway.sendBackpressure(request.params.id, { throttle, delayMs }),
      );
    },
  );

  app.post<{ Params: { id: string }; Body: { heartbeatIntervalSec?: number } | null }>(
    '/api/sessions/:id/config',
    (request, reply) => {
      const seconds = request.body?.heartbeatIntervalSec ?? 5;
      if (!Number.isInteger(seconds) || seconds < 1 || seconds > 3600) {
        return reply
          .code(400)
          .send({ sent: false, error: 'heartbeatIntervalSec: a whole number of seconds, 1..3600' });
      }
      return sendOr404(reply, () =>
        gateway.sendConfigUpdate(request.params.id, {
          configVersion: `demo-${Date.now()}`,
          config: {
            logCollectors: [],
            watchers: [],
            metricScrapers: [],
            heartbeatIntervalSec: seconds,
            batchSize: 0,
            flushIntervalMs: 0,
            ingestRules: undefined,
          },
        }),
      );
    },
  );

  registerQueryRoutes(app, gateway);
  registerConsoleRoutes(app, gateway);
  registerNodeRoutes(app, gateway);
  registerClusterRoutes(app, gateway);
  registerMetricsRoutes(app, gateway);
  registerNodeConsoleRoutes(app, gateway);

  app.get('/*', (request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const asset =
      assets.get(path) ?? (path.startsWith('/assets/') ? undefined : assets.get('/index.html'));
    if (asset) return reply.type(asset.type).send(asset.body);
    if (!built) return reply.code(503).type('text/html; charset=utf-8').send(NOT_BUILT);
    return reply.code(404).send({ error: `no such file: ${path}` });
  });

  return app;
}

function sendOr404(reply: FastifyReply, send: () => boolean): ControlResult {
  try {
    return { sent: send() };
  } catch (err: unknown) {
    void reply.code(404);
    return { sent: false, error: err instanceof Error ? err.message : String(err) };
  }
}
