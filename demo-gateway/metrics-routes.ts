// The Metrics view's endpoints: node and pod CPU/memory series, the scraped Prometheus families
// and the received profiles, each profile downloadable as the raw pprof bytes the agent shipped
// (gzip-compressed profile.proto: `go tool pprof` opens the file as it is).
import type { FastifyInstance } from 'fastify';
import type { FamilyRow, MetricsSnapshot, ProfileRow } from './api-types.js';
import type { DemoGateway } from './demo-gateway.js';
import { MetricsStore, type MetricsRetention } from './metrics-store.js';

/** A file name safe in a Content-Disposition header: letters, digits, dot, dash, underscore. */
function fileName(row: ProfileRow): string {
  const who = [row.namespace, row.pod].filter((part) => part !== '').join('_') || 'target';
  const at = new Date(row.timestamp).toISOString().replace(/[:.]/g, '-');
  return `${who}-${row.type}-${at}.pb.gz`.replace(/[^\w.-]/g, '_');
}

export function registerMetricsRoutes(
  app: FastifyInstance,
  gateway: DemoGateway,
  retention: Partial<MetricsRetention> = {},
): MetricsStore {
  const store = new MetricsStore(retention);
  gateway.events.on('message', (message, isNew) => {
    // A redelivered item (same message id) is stored once, as the message store does.
    if (!isNew) return;
    const payload = message.payload;
    if (payload?.$case === 'kubeMetrics') store.addKubeMetrics(payload.value);
    else if (payload?.$case === 'prometheusMetrics') store.addPrometheusFamily(payload.value);
    else if (payload?.$case === 'profile') store.addProfile(payload.value);
  });

  app.get('/api/metrics/series', (): MetricsSnapshot => store.snapshot());
  app.get('/api/metrics/families', (): FamilyRow[] => store.families());
  app.get('/api/metrics/profiles', (): ProfileRow[] => store.profiles());
  app.get<{ Params: { id: string } }>('/api/metrics/profiles/:id/pprof', (request, reply) => {
    const found = store.profile(request.params.id);
    if (found === undefined) {
      return reply.code(404).send({ error: `no profile ${request.params.id} (or it was dropped)` });
    }
    return reply
      .type('application/octet-stream')
      .header('content-disposition', `attachment; filename="${fileName(found.row)}"`)
      .send(Buffer.from(found.pprof));
  });
  return store;
}
