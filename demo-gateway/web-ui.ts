import { readFileSync } from 'node:fs';
import { fastify, type FastifyInstance } from 'fastify';
import type { DemoGateway } from './demo-gateway.js';

/** Messages returned per poll at most: the page keeps its own rolling window. */
const MAX_MESSAGES_PER_POLL = 200;

/**
 * The demo gateway's web UI: one static page (no build step, no CDN) polling a JSON endpoint,
 * plus buttons that send Backpressure and Shutdown to a session.
 */
export function createWebUi(gateway: DemoGateway): FastifyInstance {
  const page = readFileSync(new URL('./ui/index.html', import.meta.url), 'utf8');
  const app = fastify({ logger: false });

  app.get('/', (_request, reply) => reply.type('text/html; charset=utf-8').send(page));

  app.get<{ Querystring: { after?: string } }>('/api/state', (request, reply) => {
    const after = Number(request.query.after ?? 0);
    return reply.send({
      now: Date.now(),
      sessions: gateway.sessions(),
      totals: {
        stored: gateway.store.count(),
        duplicates: gateway.store.duplicates,
        byKind: gateway.store.countByKind(),
      },
      messages: gateway.store.recent(MAX_MESSAGES_PER_POLL, Number.isFinite(after) ? after : 0),
    });
  });

  app.post<{ Params: { id: string }; Body: { reason?: string } | null }>(
    '/api/sessions/:id/shutdown',
    (request, reply) => {
      const reason = request.body?.reason ?? 'requested from the demo gateway UI';
      return reply.send(sendOr404(reply, () => gateway.sendShutdown(request.params.id, reason)));
    },
  );

  app.post<{ Params: { id: string }; Body: { throttle?: boolean; delayMs?: number } | null }>(
    '/api/sessions/:id/backpressure',
    (request, reply) => {
      const throttle = request.body?.throttle ?? true;
      const delayMs = request.body?.delayMs ?? 2000;
      return reply.send(
        sendOr404(reply, () => gateway.sendBackpressure(request.params.id, { throttle, delayMs })),
      );
    },
  );

  return app;
}

function sendOr404(
  reply: { code(status: number): unknown },
  send: () => boolean,
): { sent: boolean; error?: string } {
  try {
    return { sent: send() };
  } catch (err: unknown) {
    reply.code(404);
    return { sent: false, error: err instanceof Error ? err.message : String(err) };
  }
}
