// HTTP routes of the node console in the Consoles view: whether a connected agent offers node
// consoles, and opening one on a node. The console then runs in the same hub as pod consoles (the
// view's terminal, input and output routes serve it). Registered with one line in web-ui.ts.
import type { FastifyInstance } from 'fastify';
import type { CommandSigner } from './command-signer.js';
import type { DemoGateway } from './demo-gateway.js';

/** A node name is a DNS subdomain. */
const NODE_NAME_RE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * The platform's signature over a node console open: permission cluster:node_console (the third
 * gate; the executor refuses an open that does not carry it), verb console, target kind "node".
 */
export function signNodeConsoleOpen(
  signer: CommandSigner,
  requestId: string,
  principal: string,
  node: string,
): string {
  return signer.sign({
    requestId,
    principal,
    permission: 'cluster:node_console',
    target: { kind: 'node', namespace: '', name: node, container: '', resource: '' },
    verb: 'console',
  });
}

interface OpenBody {
  readonly node?: string;
  readonly cols?: number;
  readonly rows?: number;
}

export function registerNodeConsoleRoutes(app: FastifyInstance, gateway: DemoGateway): void {
  app.get('/api/node-consoles', () => ({ available: gateway.nodeConsoleAgents() }));

  app.post<{ Body: OpenBody | null }>('/api/node-consoles', (request, reply) => {
    const body = request.body ?? {};
    const agent = gateway.nodeConsoleAgents()[0];
    if (agent === undefined) {
      return reply.code(409).send({
        error: 'no connected agent offers node consoles (rbac.nodeShell and exec.node.enabled)',
      });
    }
    const node = (body.node ?? '').trim();
    if (!NODE_NAME_RE.test(node)) {
      return reply.code(400).send({ error: 'a node name is required' });
    }
    const console = gateway.consoles.open(agent, {
      namespace: '',
      pod: '',
      node,
      tty: true,
      cols: body.cols ?? 80,
      rows: body.rows ?? 24,
    });
    return { id: console.id };
  });
}
