// Starts the demo gateway: the gRPC AgentService on 127.0.0.1 and its web UI. The only file
// of the demo gateway that touches process (argv, env, signals, exit code).
import { parseArgs } from 'node:util';
import { createLogger } from '../shared/logging/create-logger.js';
import { DemoGateway } from './demo-gateway.js';
import { uiBuildIsCurrent } from './ui-build.js';
import { createWebUi } from './web-ui.js';

const HOST = '127.0.0.1';
const USAGE = `usage: demo-gateway [--grpc-port 50051] [--http-port 8090] [--db path.sqlite] [--token T] [--no-acks]
  env: KUBEXA_DEMO_GRPC_PORT, KUBEXA_DEMO_HTTP_PORT, KUBEXA_DEMO_DB, KUBEXA_DEMO_TOKEN`;

function port(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535)
    throw new Error(`${name}: not a port: ${value}\n${USAGE}`);
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'grpc-port': { type: 'string' },
      'http-port': { type: 'string' },
      db: { type: 'string' },
      token: { type: 'string' },
      'no-acks': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const env = process.env;
  const grpcPort = port(values['grpc-port'] ?? env['KUBEXA_DEMO_GRPC_PORT'], 50_051, '--grpc-port');
  const httpPort = port(values['http-port'] ?? env['KUBEXA_DEMO_HTTP_PORT'], 8090, '--http-port');
  const databasePath = values.db ?? env['KUBEXA_DEMO_DB'] ?? ':memory:';
  const acceptToken = values.token ?? env['KUBEXA_DEMO_TOKEN'];
  const logger = createLogger({ level: 'info', base: { process: 'demo-gateway' } });

  const gateway = new DemoGateway(
    {
      databasePath,
      deliveryAcks: !values['no-acks'],
      ...(acceptToken === undefined || acceptToken === '' ? {} : { acceptToken }),
    },
    { logger },
  );
  // Not built here: tests start many of these processes at once, and one build must not race
  // another into dist/demo-ui. `npm run demo` builds it; the page says how when it is missing.
  if (!uiBuildIsCurrent()) {
    logger.warn('the web UI is not built from the current sources: run npm run build:ui');
  }
  const boundGrpc = await gateway.listen(HOST, grpcPort);
  const ui = createWebUi(gateway);
  const url = await ui.listen({ host: HOST, port: httpPort });
  logger.info(
    { grpc: `${HOST}:${boundGrpc}`, ui: url, tokenCheck: acceptToken !== undefined, databasePath },
    'demo gateway ready',
  );
  process.stdout.write(`demo gateway: gRPC ${HOST}:${boundGrpc}, UI ${url}\n`);

  const stop = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'demo gateway stopping');
    Promise.all([ui.close(), gateway.close()])
      .then(() => {
        logger.info('demo gateway stopped');
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'demo gateway did not close cleanly');
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `demo gateway failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exitCode = 1;
});
