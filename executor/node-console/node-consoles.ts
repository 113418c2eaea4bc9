// Node consoles: a shell on the node itself. Every open is decided here from the executor's own
// configuration, whatever the collector says: the signed command (permission
// cluster:node_console, verb console, target kind "node") and the exec.node gate (the guard),
// exec.node.nodes, the session limit shared with pod consoles; then a privileged helper Pod pinned
// to the node, waited for under the session's clock, and `nsenter` into the target process's
// namespaces through pods/exec. The helper is deleted whenever the session ends, the open is
// refused after it was created, or the executor stops; the boot sweep removes what a killed
// executor left behind.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  ConsoleEndReason,
  RefusalCode,
  type CommandTarget,
  type ConsoleOpen,
} from '../../proto/index.js';
import type { Service } from '../../shared/lifecycle/service.js';
import type { CommandGuard } from '../guard/authorize-command.js';
import { matchesNamePattern } from '../guard/name-pattern.js';
import type { ConsoleSession, ConsoleSink } from '../sessions/console-session.js';
import {
  commandLimitRefusal,
  podExecProcess,
  REFUSAL_BY_GUARD,
  type OpenOutcome,
} from '../sessions/pod-consoles.js';
import { PodExecError } from '../sessions/pod-exec-socket.js';
import type { SessionManager, StartProcess } from '../sessions/session-manager.js';
import { sweepOrphanHelpers } from './boot-sweep.js';
import {
  createHelper,
  deleteHelper,
  HelperNotReadyError,
  waitForHelper,
} from './helper-lifecycle.js';
import { helperPod, nsenterCommand } from './helper-pod.js';

/** exec.node as the executor's config gives it. */
export interface ExecNodeConfig {
  readonly enabled: boolean;
  readonly image: string;
  /** Empty: the release namespace. */
  readonly namespace: string;
  readonly helper_ready_timeout_sec: number;
  readonly max_session_sec: number;
  readonly nodes: readonly string[];
  readonly nsenter_target_pid: number;
}

export interface NodeConsoles {
  open(request: ConsoleOpen, sink: ConsoleSink): Promise<OpenOutcome>;
  /** Boot sweep at start; at close, pending opens are abandoned and every helper deleted. */
  readonly service: Service;
}

export interface NodeConsoleDeps {
  readonly config: ExecNodeConfig;
  /** The shell when the request names no command (exec.pod.default_shell). */
  readonly defaultShell: string;
  readonly guard: CommandGuard;
  readonly kube: KubeConfig;
  readonly sessions: SessionManager;
  readonly logger: Logger;
  /** The agent's release (the helpers' release label) and namespace. */
  readonly release: string;
  readonly releaseNamespace: string;
}

/** A node name is a DNS subdomain. */
const NODE_NAME_RE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** How long the executor's close waits for helper deletions before it gives up on them. */
const CLOSE_DELETE_TIMEOUT_MS = 10_000;

/** The session a process belongs to, known once the manager has started it. */
interface SessionHolder {
  session?: ConsoleSession;
}

function refused(code: RefusalCode, reason: string, principal = '', rule = ''): OpenOutcome {
  return { opened: false, refusal: { code, reason: reason.slice(0, 512) }, principal, rule };
}

function checkShape(request: ConsoleOpen): CommandTarget | OpenOutcome {
  const target = request.target;
  if (
    target?.kind !== 'node' ||
    !NODE_NAME_RE.test(target.name) ||
    target.namespace !== '' ||
    target.container !== '' ||
    target.resource !== ''
  ) {
    return refused(
      RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
      'a node console needs a target of kind "node" with a node name (and no namespace, container or resource)',
    );
  }
  const tooLong = commandLimitRefusal(request.command);
  if (tooLong !== undefined) return refused(RefusalCode.REFUSAL_CODE_INVALID_REQUEST, tooLong);
  return target;
}

/** The refusal for a session that did not start; undefined for an unexpected error. */
function startRefusalCode(err: unknown): RefusalCode | undefined {
  if (err instanceof HelperNotReadyError) {
    return err.forbidden
      ? RefusalCode.REFUSAL_CODE_RBAC_DENIED
      : RefusalCode.REFUSAL_CODE_HELPER_NOT_READY;
  }
  if (err instanceof PodExecError) {
    return err.code === 'RBAC_DENIED'
      ? RefusalCode.REFUSAL_CODE_RBAC_DENIED
      : RefusalCode.REFUSAL_CODE_EXEC_FAILED;
  }
  return undefined;
}

export function createNodeConsoles(deps: NodeConsoleDeps): NodeConsoles {
  const core = deps.kube.makeApiClient(CoreV1Api);
  const logger = deps.logger.child({ component: 'node-consoles' });
  const config = deps.config;
  const namespace = config.namespace.trim() || deps.releaseNamespace;
  /** Helpers this executor created and has not deleted yet: "namespace/name". */
  const helpers = new Set<string>();
  const deletions = new Set<Promise<void>>();
  /** Opens waiting for their helper: aborted when the executor stops. */
  const opening = new Set<AbortController>();
  const running = new Set<ConsoleSession>();
  let stopping = false;

  const removeHelper = (name: string, why: string): Promise<void> => {
    const key = `${namespace}/${name}`;
    const deletion = deleteHelper(core, namespace, name)
      .then(() => {
        logger.info({ helper: key, why }, 'node-console helper deleted');
      })
      .catch((err: unknown) => {
        logger.error(
          { helper: key, why, err: err instanceof Error ? err.message : String(err) },
          'node-console helper NOT deleted: it ends on activeDeadlineSeconds or at the next boot sweep',
        );
      })
      .finally(() => {
        helpers.delete(key);
        deletions.delete(deletion);
      });
    deletions.add(deletion);
    return deletion;
  };

  /** The session's process: helper, wait, then nsenter through pods/exec. */
  function nodeShellProcess(
    request: ConsoleOpen,
    node: string,
    command: readonly string[],
    holder: SessionHolder,
  ): StartProcess {
    return async (handlers) => {
      const abort = new AbortController();
      opening.add(abort);
      let name = '';
      try {
        const created = await createHelper(
          core,
          helperPod({
            node,
            namespace,
            image: config.image,
            // The request id, not the session id: the session id lets a stream re-attach, and
            // whoever can list Pods would read it from a label.
            sessionId: request.requestId,
            release: deps.release,
            maxSessionSec: config.max_session_sec,
          }),
        );
        name = created.metadata?.name ?? '';
        helpers.add(`${namespace}/${name}`);
        logger.info(
          { requestId: request.requestId, node, helper: `${namespace}/${name}` },
          'node-console helper created',
        );
        if (stopping) abort.abort(new Error('the executor is stopping'));
        await waitForHelper(core, {
          namespace,
          name,
          node,
          deadlineMs: Date.now() + config.helper_ready_timeout_sec * 1000,
          deadlineName: `exec.node.helper_ready_timeout_sec (${config.helper_ready_timeout_sec} s)`,
          signal: abort.signal,
        });
        const start = podExecProcess(
          deps.kube,
          {
            namespace,
            pod: name,
            container: 'shell',
            command: [
              ...nsenterCommand(command[0] ?? deps.defaultShell, config.nsenter_target_pid),
              ...command.slice(1),
            ],
            tty: request.tty,
          },
          request.size,
        );
        let ended = false;
        const helperName = name;
        const process = await start({
          onOutput: (stream, data) => {
            handlers.onOutput(stream, data);
          },
          onEnd: (end) => {
            if (!ended) {
              ended = true;
              void removeHelper(helperName, 'the console ended');
            }
            if (holder.session !== undefined) running.delete(holder.session);
            handlers.onEnd(end);
          },
        });
        return {
          ...process,
          terminate: () => {
            process.terminate();
            // Deleting the helper also ends the nsenter'd shell if the exec's end is lost.
            if (!ended) {
              ended = true;
              void removeHelper(helperName, 'the console was ended');
            }
          },
        };
      } catch (err: unknown) {
        if (name !== '') void removeHelper(name, 'the console did not start');
        throw err;
      } finally {
        opening.delete(abort);
      }
    };
  }

  const service: Service = {
    name: 'node-consoles',
    async start() {
      // Only when node consoles are on: with the gate off the executor may hold no rights there.
      if (!config.enabled) return;
      await sweepOrphanHelpers(
        core,
        {
          namespaces: [namespace, deps.releaseNamespace].filter((ns) => ns !== ''),
          release: deps.release,
          keep: (ns, name) => helpers.has(`${ns}/${name}`),
        },
        logger,
      );
    },
    async close() {
      stopping = true;
      for (const abort of opening) abort.abort(new Error('the executor is stopping'));
      for (const session of running) {
        session.end(
          ConsoleEndReason.CONSOLE_END_REASON_EXECUTOR_STOPPING,
          'the executor is stopping',
        );
      }
      const deadline = new Promise<void>((resolve) => {
        setTimeout(resolve, CLOSE_DELETE_TIMEOUT_MS).unref();
      });
      // Deletions started by the ends above (and by aborted opens) are awaited, bounded.
      for (let round = 0; round < 3 && (deletions.size > 0 || opening.size > 0); round++) {
        await Promise.race([Promise.allSettled([...deletions]), deadline]);
        if (opening.size > 0) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      if (helpers.size > 0) {
        logger.warn(
          { helpers: [...helpers] },
          'node-console helpers left at shutdown: the next boot sweep removes them',
        );
      }
    },
  };

  return {
    service,
    async open(request, sink) {
      const target = checkShape(request);
      if ('opened' in target) return target;
      // The signed command first, then the exec.node gate (both inside the guard).
      const decision = deps.guard.authorize(request.commandSignature?.jws ?? '', {
        requestId: request.requestId,
        permission: 'cluster:node_console',
        target,
        verb: 'console',
      });
      if (!decision.accepted) return refused(REFUSAL_BY_GUARD[decision.code], decision.reason);
      const principal = decision.principal;
      const node = target.name;
      const pattern = config.nodes.find((each) => matchesNamePattern(each, node));
      if (pattern === undefined) {
        return refused(
          RefusalCode.REFUSAL_CODE_POLICY_DENIED,
          `no exec.node.nodes pattern allows node ${node}`,
          principal,
        );
      }
      const rule = `exec.node.nodes ${pattern}`;
      if (stopping) {
        return refused(
          RefusalCode.REFUSAL_CODE_GATE_DISABLED,
          'the executor is stopping',
          principal,
          rule,
        );
      }
      if (!deps.sessions.reserve()) {
        return refused(
          RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
          'exec.pod.max_sessions sessions (pod and node consoles together) are running',
          principal,
          rule,
        );
      }
      const command = request.command.length > 0 ? [...request.command] : [deps.defaultShell];
      const holder: SessionHolder = {};
      try {
        const session = await deps.sessions.start(
          { requestId: request.requestId, principal, target, command, tty: request.tty, rule },
          nodeShellProcess(request, node, command, holder),
          sink,
          { maxSessionMs: config.max_session_sec * 1000 },
        );
        if (session.state() === 'running') running.add(session);
        holder.session = session;
        return { opened: true, session, principal };
      } catch (err: unknown) {
        const code = startRefusalCode(err);
        if (code === undefined) throw err;
        return refused(code, (err as Error).message, principal, rule);
      }
    },
  };
}
