// Composition root of the executor process: reads argv/env, loads the config file, starts the
// Unix-socket server, and stops on SIGTERM/SIGINT within the shutdown timeout.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parseArgs } from 'node:util';
import { Gate, type ConsoleAudit } from '../proto/index.js';
import { loadConfig } from '../shared/config/load-config.js';
import { getErrorMessage } from '../shared/errors.js';
import { startServices } from '../shared/lifecycle/service.js';
import { createLogger } from '../shared/logging/create-logger.js';
import type { Logger } from 'pino';
import { systemClock } from '../shared/clock.js';
import { createCommandGuard } from './guard/authorize-command.js';
import { enabledGateNames, enabledGates } from './guard/enabled-gates.js';
import { createCommandVerifier, loadCommandKeys } from './guard/verify-command.js';
import { createTokenMinter } from './identity/token-minter.js';
import { selfSubjectReviewProbe } from './identity/token-liveness.js';
import { createGateAccessReporter } from './catalog/gate-access.js';
import { createExecutorServer } from './server/executor-server.js';
import { createNodeJobServices } from './jobs/wire-node-jobs.js';
import { createPodConsoles, resumeWindowMs } from './sessions/pod-consoles.js';
import { createSessionManager } from './sessions/session-manager.js';
import { createNodeConsoles } from './node-console/node-consoles.js';

const DEFAULT_CONFIG_PATH = '/config/config.yaml';
const DEFAULT_SOCKET_PATH = '/run/kubexa/executor.sock';
// Shorter than the chart's terminationGracePeriodSeconds (45 s), so a forced close still ends
// before the kubelet's SIGKILL.
const SHUTDOWN_TIMEOUT_MS = 20_000;

async function main(): Promise<void> {
  // Owner-only by default: nothing the executor creates is ever readable or writable by another
  // user until it sets a wider mode on purpose (the socket and the minted token).
  process.umask(0o077);
  const { values: args } = parseArgs({
    options: { config: { type: 'string', default: DEFAULT_CONFIG_PATH } },
    strict: true,
  });
  const configPath = args.config;
  // role 'executor': the executor's container never receives the tenant token, and it does not
  // dial the gateway, so neither is required here.
  const { config, warnings } = loadConfig({
    fileText: readFileSync(configPath, 'utf8'),
    env: process.env,
    role: 'executor',
  });
  const logger = createLogger({ level: config.log.level, base: { process: 'executor' } });
  for (const warning of warnings) logger.warn({ configPath }, warning);

  const gates = enabledGates(config, {
    podExec: Gate.GATE_POD_EXEC,
    nodeShell: Gate.GATE_NODE_SHELL,
    nodeOps: Gate.GATE_NODE_OPS,
    mutate: Gate.GATE_MUTATE,
  });
  const guard = createCommandGuard(
    createCommandVerifier({
      keys: loadCommandKeys(config.security.command_keys),
      clock: systemClock,
    }),
    enabledGateNames(config),
  );
  if (config.security.command_keys.length === 0 && gates.length > 0) {
    logger.warn(
      { configPath },
      'security.command_keys is empty: every privileged request will be refused (SIGNATURE_INVALID)',
    );
  }
  const sharedGid = parseGid(process.env['KUBEXA_SHARED_GID']);
  const minter = collectorTokenMinter(sharedGid, logger);
  const stop = new AbortController();
  const jobs = createNodeJobServices(config, guard, process.env, logger);
  const consoles = consoleDeps(config, guard, logger);
  const closeAll = await startServices(
    [
      ...(minter === undefined ? [] : [minter]),
      createExecutorServer(
        {
          socketPath: process.env['KUBEXA_EXECUTOR_SOCKET'] ?? DEFAULT_SOCKET_PATH,
          ownUid: processUid(),
          ...(sharedGid === undefined ? {} : { socketGroup: sharedGid }),
          enabledGates: gates,
          guard,
          gateAccess: gateAccessReporter(config).report,
          shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
          ...jobs.serverOptions,
          consoles,
        },
        { logger },
      ),
      // After the server: the boot sweep runs once the socket is up (it keeps this executor's
      // own helpers), and at stop node consoles end and their helpers go before the server drains.
      ...(consoles?.nodes === undefined ? [] : [consoles.nodes.service]),
      // Started after the server so it stops first: a running node job is cancelled (its stream
      // ends with CANCELLED) before the server drains its calls.
      jobs.service,
    ],
    stop.signal,
  );
  logger.info({ gates }, 'executor started');

  const onSignal = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'executor stopping');
    stop.abort();
    closeAll()
      .then(() => {
        logger.info('executor stopped');
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'executor did not close cleanly');
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}

/** Unacknowledged console output per session before its process is paused (flow control). */
const CONSOLE_OUTPUT_WINDOW_BYTES = 1024 * 1024;
const CONSOLE_MAX_CHUNK_BYTES = 32 * 1024;

/**
 * Pod consoles with the executor's own identity: in a Pod its ServiceAccount; elsewhere (the
 * demo, tests) KUBECONFIG. Every open is still decided by the guard and exec.pod (pod-consoles.ts).
 */
function consoleDeps(
  config: ReturnType<typeof loadConfig>['config'],
  guard: ReturnType<typeof createCommandGuard>,
  logger: Logger,
) {
  const kube = new KubeConfig();
  if (process.env['KUBERNETES_SERVICE_HOST']) kube.loadFromCluster();
  else kube.loadFromDefault();
  if (kube.getCurrentCluster() === null) {
    logger.warn('no Kubernetes cluster configured: console streams are refused');
    return undefined;
  }
  const pod = config.exec.pod;
  const audit = (record: ConsoleAudit) => {
    // The executor's own audit trail; stdin is never part of a record.
    logger.info({ audit: record }, 'console audit');
  };
  const sessions = createSessionManager(
    {
      maxSessions: pod.max_sessions,
      maxSessionMs: pod.max_session_sec * 1000,
      resumeWindowMs: resumeWindowMs(pod.resume_window_sec),
      outputWindowBytes: CONSOLE_OUTPUT_WINDOW_BYTES,
      maxChunkBytes: CONSOLE_MAX_CHUNK_BYTES,
    },
    { logger, audit },
  );
  return {
    pods: createPodConsoles({ config: pod, guard, kube, sessions }),
    nodes: createNodeConsoles({
      config: config.exec.node,
      defaultShell: pod.default_shell,
      guard,
      kube,
      sessions,
      logger,
      // The chart sets both; a local run (the demo, tests) names its own or gets these.
      release: nonEmpty(process.env['KUBEXA_RELEASE_NAME']) ?? 'kubexa-agent',
      releaseNamespace:
        nonEmpty(process.env['KUBEXA_POD_NAMESPACE']) ??
        nonEmpty(kube.getContextObject(kube.getCurrentContext())?.namespace) ??
        'default',
    }),
    sessions,
    logger,
    audit,
  };
}

const nonEmpty = (text: string | undefined): string | undefined =>
  text === undefined || text === '' ? undefined : text;

/** Where the in-cluster ServiceAccount files are (the executor's own projected token). */
const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The collector's token minter, when the chart asks for one (KUBEXA_COLLECTOR_TOKEN_DIR): the
 * executor's own in-cluster identity mints the collector's ServiceAccount token, bound to a Secret
 * the Pod owns (KUBEXA_POD_NAME and KUBEXA_POD_UID from the Downward API).
 */
function collectorTokenMinter(sharedGid: number | undefined, logger: Logger) {
  const env = process.env;
  const tokenDir = env['KUBEXA_COLLECTOR_TOKEN_DIR'];
  if (tokenDir === undefined || tokenDir === '') return undefined;
  const required = (name: string) => {
    const value = env[name];
    if (value === undefined || value === '') {
      throw new Error(
        `${name} must be set when KUBEXA_COLLECTOR_TOKEN_DIR is (the chart sets both)`,
      );
    }
    return value;
  };
  const kube = new KubeConfig();
  kube.loadFromCluster();
  return createTokenMinter(
    {
      serviceAccount: required('KUBEXA_COLLECTOR_SERVICE_ACCOUNT'),
      namespace: required('KUBEXA_POD_NAMESPACE'),
      podName: required('KUBEXA_POD_NAME'),
      podUid: required('KUBEXA_POD_UID'),
      ...instanceLabel(env['KUBEXA_POD_INSTANCE']),
      tokenDir,
      ...(sharedGid === undefined ? {} : { readerGroup: sharedGid }),
      caCert: readFileSync(join(SERVICE_ACCOUNT_DIR, 'ca.crt'), 'utf8'),
    },
    {
      core: kube.makeApiClient(CoreV1Api),
      clock: systemClock,
      logger,
      liveness: selfSubjectReviewProbe(kube),
    },
  );
}

/** The binding Secret carries the release's instance label, so that people find it with it. */
function instanceLabel(instance: string | undefined) {
  if (instance === undefined || instance === '') return {};
  return {
    bindingLabels: {
      'app.kubernetes.io/name': 'kubexa-agent',
      'app.kubernetes.io/instance': instance,
      'app.kubernetes.io/component': 'collector-token-binding',
    },
  };
}

/**
 * The executor's own access reviews for the catalog, on its own identity: in a Pod its projected
 * ServiceAccount token, elsewhere KUBECONFIG when set (tests, local runs), otherwise none.
 */
function gateAccessReporter(config: Parameters<typeof createGateAccessReporter>[0]) {
  let kube: KubeConfig | undefined;
  if (process.env['KUBERNETES_SERVICE_HOST']) {
    kube = new KubeConfig();
    kube.loadFromCluster();
  } else if (process.env['KUBECONFIG']) {
    kube = new KubeConfig();
    kube.loadFromDefault();
  }
  return createGateAccessReporter(config, {
    kube,
    homeNamespace: process.env['KUBEXA_POD_NAMESPACE'] ?? '',
  });
}

/**
 * The numeric uid this process runs as. Not os.userInfo(): it reads /etc/passwd and throws when
 * the image has no entry for the uid the Pod's securityContext picked.
 */
function processUid(): number {
  const uid = process.getuid?.();
  if (uid === undefined) throw new Error('the executor needs a POSIX system (no process.getuid)');
  return uid;
}

/** KUBEXA_SHARED_GID: the group given access to the socket and the minted token. */
function parseGid(text: string | undefined): number | undefined {
  if (text === undefined || text === '') return undefined;
  const gid = Number(text);
  if (!Number.isInteger(gid) || gid < 0) {
    throw new Error(`KUBEXA_SHARED_GID must be a numeric group id, got ${JSON.stringify(text)}`);
  }
  return gid;
}

main().catch((err: unknown) => {
  process.stderr.write(`kubexa executor failed to start: ${getErrorMessage(err)}\n`);
  process.exit(1);
});
