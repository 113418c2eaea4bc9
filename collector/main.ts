// Composition root of the collector process: the only collector file that touches process
// (argv, env, signals, exit code). Loads the config, resolves the cluster and agent ids, wires
// the collector (collector.ts), starts it, and stops it on SIGTERM/SIGINT within a timeout
// shorter than the chart's terminationGracePeriodSeconds.
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { loadConfig } from '../shared/config/load-config.js';
import { AgentError, ConfigError, getErrorMessage } from '../shared/errors.js';
import { startServices } from '../shared/lifecycle/service.js';
import { createLogger } from '../shared/logging/create-logger.js';
import { AGENT_VERSION } from '../shared/version.js';
import { resolveAgentId } from './agent-id.js';
import {
  askExecutorConsoleFeatures,
  askExecutorWriteFeatures,
} from './executor-client/executor-features.js';
import { createCollector, describeKubeError, readClusterId } from './collector.js';

const DEFAULT_CONFIG_PATH = '/config/config.yaml';
// The chart's terminationGracePeriodSeconds is 45: a graceful stop must be over well before the
// kubelet's SIGKILL, so after this long whatever is still closing is abandoned (exit 1).
const SHUTDOWN_TIMEOUT_MS = 30_000;
// The cluster id is needed before the first handshake; an API server that is briefly away at
// start is retried, then the process fails and Kubernetes restarts it.
const CLUSTER_ID_ATTEMPTS = 5;
const CLUSTER_ID_RETRY_MS = 2000;

function fail(message: string): never {
  process.stderr.write(`kubexa collector: ${message}\n`);
  process.exit(1);
}

function readConfig(configPath: string) {
  let fileText: string;
  try {
    fileText = readFileSync(configPath, 'utf8');
  } catch (err: unknown) {
    fail(`cannot read the config file ${configPath}: ${getErrorMessage(err)}`);
  }
  try {
    return loadConfig({ fileText, env: process.env, role: 'collector' });
  } catch (err: unknown) {
    if (!(err instanceof ConfigError)) throw err;
    for (const warning of err.warnings) process.stderr.write(`warning: ${warning}\n`);
    fail(`${configPath}: ${err.message}`);
  }
}

function loadKubeConfig(): KubeConfig {
  const kube = new KubeConfig();
  // In a Pod: the projected ServiceAccount token. Elsewhere: KUBECONFIG or ~/.kube/config.
  if (process.env['KUBERNETES_SERVICE_HOST']) kube.loadFromCluster();
  else kube.loadFromDefault();
  return kube;
}

async function clusterIdWithRetry(
  kube: KubeConfig,
  logger: Logger,
  signal: AbortSignal,
): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await readClusterId(kube);
    } catch (err: unknown) {
      const reason = describeKubeError(err);
      if (attempt >= CLUSTER_ID_ATTEMPTS) {
        throw new Error(
          `cannot read the kube-system namespace (the cluster id) after ${attempt} attempts: ${reason}; check the API server address and that the ServiceAccount may get namespaces`,
          { cause: err },
        );
      }
      logger.warn({ attempt, reason }, 'cannot read the cluster id yet; retrying');
      // A ref'd timer on purpose: nothing else keeps the process alive yet, and an unref'd one
      // would let Node exit 0 in the middle of the retry.
      await sleep(CLUSTER_ID_RETRY_MS, undefined, { signal });
    }
  }
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: { config: { type: 'string', default: DEFAULT_CONFIG_PATH } },
    strict: true,
  });
  const configPath = args.config;
  const { config, warnings } = readConfig(configPath);
  const logger = createLogger({ level: config.log.level, base: { process: 'collector' } });
  for (const warning of warnings) logger.warn({ configPath }, warning);

  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception');
    process.exit(1);
  });
  process.on('unhandledRejection', (err) => {
    logger.fatal({ err }, 'unhandled rejection');
    process.exit(1);
  });

  const spillDir = config.buffer.spill_dir;
  if (spillDir !== '') mkdirSync(spillDir, { recursive: true });
  const agent = resolveAgentId(config.agent.agent_id, spillDir, randomUUID);
  // A signal during start-up (the cluster id may take retries) stops the start cleanly.
  const startup = new AbortController();
  const onEarlySignal = (): void => {
    startup.abort();
  };
  process.once('SIGTERM', onEarlySignal);
  process.once('SIGINT', onEarlySignal);
  const kube = loadKubeConfig();
  let clusterId: string;
  try {
    clusterId = await clusterIdWithRetry(kube, logger, startup.signal);
  } catch (err: unknown) {
    if (startup.signal.aborted) {
      logger.info('collector stopped during start-up');
      process.exit(0);
    }
    throw err;
  }
  logger.info(
    { version: AGENT_VERSION, clusterId, agentId: agent.agentId, agentIdSource: agent.source },
    'collector starting',
  );

  const executorSocket = process.env['KUBEXA_EXECUTOR_SOCKET'];
  const hasExecutor = executorSocket !== undefined && executorSocket !== '';
  const consoles = hasExecutor
    ? await askExecutorConsoleFeatures(executorSocket, logger)
    : undefined;
  const writeFeatures = hasExecutor
    ? await askExecutorWriteFeatures(executorSocket, logger)
    : undefined;
  const collector = createCollector(
    config,
    { clusterId, agentId: agent.agentId },
    {
      logger,
      kube,
      executorSocket: process.env['KUBEXA_EXECUTOR_SOCKET'],
      ...(consoles === undefined ? {} : { consoles }),
      ...(writeFeatures === undefined ? {} : { writeFeatures }),
      collectGarbage: exposeGc(),
    },
  );
  const stop = new AbortController();
  const closeAll = await startServices(collector.services, stop.signal);
  logger.info({ ports: collector.health.ports() }, 'collector started');

  let stopping: Promise<void> | undefined;
  const shutdown = (why: string, exitCode: number): Promise<void> => {
    stopping ??= (async () => {
      logger.info({ why }, 'collector stopping');
      stop.abort();
      const timer = setTimeout(() => {
        logger.error({ timeoutMs: SHUTDOWN_TIMEOUT_MS }, 'collector did not stop in time');
        process.exit(1);
      }, SHUTDOWN_TIMEOUT_MS);
      timer.unref();
      let code = exitCode;
      try {
        await closeAll();
        logger.info({ buffer: collector.buffer.stats() }, 'collector stopped');
      } catch (err: unknown) {
        logger.error({ err }, 'collector did not close cleanly');
        code = 1;
      }
      clearTimeout(timer);
      process.exit(code);
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    void shutdown(signal, 0);
  };
  process.off('SIGTERM', onEarlySignal);
  process.off('SIGINT', onEarlySignal);
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  if (startup.signal.aborted) void shutdown('signal during start-up', 0);

  collector.done.catch((err: unknown) => {
    // A failure no retry can fix (a refused token, the wrong address): say what to change.
    const code = err instanceof AgentError ? err.code : 'ERR_UNKNOWN';
    process.stderr.write(`kubexa collector: ${getErrorMessage(err)} [${code}]\n`);
    void shutdown(`gateway: ${code}`, 1);
  });
}

main().catch((err: unknown) => {
  fail(`failed to start: ${getErrorMessage(err)}`);
});

/**
 * V8's full collection (the idle collection after a burst, collector/runtime/idle-gc.ts), exposed
 * without a command-line flag: the flag set now applies to a context created after it, whose
 * `gc` collects the whole isolate.
 */
function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  return () => {
    gc();
  };
}
