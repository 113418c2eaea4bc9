// The State and Events views' endpoints, over the demo gateway's ClusterStore.
import type { FastifyInstance } from 'fastify';
import type { DemoGateway } from './demo-gateway.js';

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

export function registerClusterRoutes(app: FastifyInstance, gateway: DemoGateway): void {
  const cluster = gateway.store.cluster;

  /** Live and deleted counts per resource and namespace, and the newest changes. */
  app.get('/api/cluster/summary', () => ({
    counts: cluster.counts(),
    changes: cluster.changes(),
  }));

  app.get('/api/cluster/objects', (request) => {
    const query = request.query as Record<string, unknown>;
    return cluster.objects({
      resource: text(query['resource']),
      namespace: text(query['namespace']),
    });
  });

  /** One object's sanitized JSON as the agent last sent it. */
  app.get('/api/cluster/object', (request, reply) => {
    const query = request.query as Record<string, unknown>;
    const resource = text(query['resource']);
    const name = text(query['name']);
    if (resource === '' || name === '') {
      return reply.code(400).send({ error: 'resource and name are required' });
    }
    const found = cluster.object(resource, text(query['namespace']), name);
    if (found === undefined) return reply.code(404).send({ error: `no such object: ${name}` });
    return found;
  });

  app.get('/api/events', (request) => {
    const query = request.query as Record<string, unknown>;
    return { now: Date.now(), events: cluster.events(text(query['q'])) };
  });
}
