// Pod consoles: the pod-specific half of a console open. Every open is decided here from the
// executor's own configuration, whatever the collector says: the signed command and the exec.pod
// gate (the guard), exec.pod.rules, the session limit, then `pods/exec` with the executor's own
// identity, whose 403 is reported as RBAC_DENIED.
import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  RefusalCode,
  type CommandTarget,
  type ConsoleOpen,
  type Refusal,
  type TerminalSize,
} from '../../proto/index.js';
import type { AuthorizationRefusalCode, CommandGuard } from '../guard/authorize-command.js';
import type { ConsoleSession, ConsoleSink } from './console-session.js';
import { allowingRule, type ExecPodRuleConfig } from './pod-console-policy.js';
import {
  openPodExec,
  PodExecError,
  type PodExecFailureCode,
  type PodExecTarget,
} from './pod-exec-socket.js';
import { hasShell, killMarked, markCommand } from './marked-processes.js';
import type { SessionManager, StartProcess } from './session-manager.js';

/** exec.pod as the executor's config gives it. */
export interface ExecPodConfig {
  readonly enabled: boolean;
  readonly rules: readonly ExecPodRuleConfig[];
  readonly default_shell: string;
  readonly max_session_sec: number;
  readonly max_sessions: number;
  readonly resume_window_sec: number;
}

/** resume_window_sec: 0 means 60 s, a negative value no resume, at most 600 s. */
export function resumeWindowMs(seconds: number): number {
  if (seconds < 0) return 0;
  if (seconds === 0) return 60_000;
  return Math.min(seconds, 600) * 1000;
}

export type OpenOutcome =
  | { readonly opened: true; readonly session: ConsoleSession; readonly principal: string }
  | {
      readonly opened: false;
      readonly refusal: Refusal;
      /** Known once the signature verified: the audit record names who was refused. */
      readonly principal: string;
      readonly rule: string;
    };

export interface PodConsoles {
  open(request: ConsoleOpen, sink: ConsoleSink): Promise<OpenOutcome>;
}

const EXEC_REFUSALS: Record<PodExecFailureCode, RefusalCode> = {
  RBAC_DENIED: RefusalCode.REFUSAL_CODE_RBAC_DENIED,
  NOT_FOUND: RefusalCode.REFUSAL_CODE_NOT_FOUND,
  EXEC_FAILED: RefusalCode.REFUSAL_CODE_EXEC_FAILED,
};

const MAX_ARGS = 64;
const MAX_ARG_LENGTH = 4096;

/** Why a console's command is refused for its size (pod and node consoles alike), or undefined. */
export function commandLimitRefusal(command: readonly string[]): string | undefined {
  return command.length > MAX_ARGS || command.some((arg) => arg.length > MAX_ARG_LENGTH)
    ? `the command is limited to ${MAX_ARGS} arguments of ${MAX_ARG_LENGTH} characters`
    : undefined;
}

function refused(code: RefusalCode, reason: string, principal = '', rule = ''): OpenOutcome {
  return { opened: false, refusal: { code, reason: reason.slice(0, 512) }, principal, rule };
}

/** The request's target when the request is well formed (checked before anything else). */
function checkShape(request: ConsoleOpen): CommandTarget | OpenOutcome {
  const target = request.target;
  if (target?.kind !== 'pod' || target.namespace === '' || target.name === '') {
    return refused(
      RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
      'a pod console needs a target of kind "pod" with a namespace and a name',
    );
  }
  const tooLong = commandLimitRefusal(request.command);
  if (tooLong !== undefined) return refused(RefusalCode.REFUSAL_CODE_INVALID_REQUEST, tooLong);
  return target;
}

/** What a failed read of the pod means, as a refusal. */
function podReadRefusal(err: unknown, namespace: string, pod: string): OpenOutcome {
  const code = err instanceof ApiException ? err.code : 0;
  if (code === 401 || code === 403) {
    return refused(
      RefusalCode.REFUSAL_CODE_RBAC_DENIED,
      `the executor may not read pod ${namespace}/${pod} (API server answered ${code})`,
    );
  }
  if (code === 404) {
    return refused(RefusalCode.REFUSAL_CODE_NOT_FOUND, `pod ${namespace}/${pod} not found`);
  }
  return refused(RefusalCode.REFUSAL_CODE_EXEC_FAILED, 'could not read the pod');
}

/** The session's process: a pods/exec connection behind the ConsoleProcess interface. */
export function podExecProcess(
  kube: KubeConfig,
  target: PodExecTarget,
  size: TerminalSize | undefined,
): StartProcess {
  return async (handlers) => {
    // Nothing ends the process when the connection closes: not without a TTY, and not with one
    // either (the runtime keeps the terminal open: a `sleep` in it was still running after close,
    // on v5 and v4 alike). Run it marked, so that ending the session can end it
    // (marked-processes.ts); `exec "$@"` keeps the terminal, the PID and the exit status.
    const sized = target.tty && size !== undefined && size.cols > 0 && size.rows > 0;
    const marked = (await hasShell(kube, target))
      ? markCommand(target.command, { waitForTerminalSize: sized })
      : undefined;
    const execTarget = marked === undefined ? target : { ...target, command: marked.argv };
    const exec = await openPodExec(kube, execTarget, {
      onOutput: (stream, data) => {
        handlers.onOutput(stream, data);
      },
      onEnd: (end) => {
        handlers.onEnd(end);
      },
    });
    if (sized) {
      exec.resize(size.cols, size.rows);
    }
    return {
      writeStdin: (data) => exec.writeStdin(data),
      closeStdin: () => {
        exec.closeStdin();
      },
      resize: (cols, rows) => {
        exec.resize(cols, rows);
      },
      pause: () => {
        exec.pause();
      },
      resume: () => {
        exec.resume();
      },
      terminate: () => {
        // Closing the WebSocket alone leaves the process running (anchors D.2), with or without
        // a TTY; stdin is closed first (v5 only) so a reader of stdin sees its end. A marked
        // process is ended by a second exec first, so the connection reports its real exit
        // status before it is closed.
        exec.closeStdin();
        if (marked === undefined) {
          exec.close();
          return;
        }
        killMarked(kube, target, marked.marker)
          .catch(() => undefined)
          .finally(() => {
            exec.close();
          });
      },
    };
  };
}

export function createPodConsoles(deps: {
  readonly config: ExecPodConfig;
  readonly guard: CommandGuard;
  readonly kube: KubeConfig;
  readonly sessions: SessionManager;
}): PodConsoles {
  const core = deps.kube.makeApiClient(CoreV1Api);

  /** The container to exec in: the named one, or the pod's default (its annotation, else the first). */
  async function resolveContainer(
    namespace: string,
    pod: string,
    container: string,
  ): Promise<string | OpenOutcome> {
    if (container !== '') return container;
    try {
      const found = await core.readNamespacedPod({ name: pod, namespace });
      const annotated = found.metadata?.annotations?.['kubectl.kubernetes.io/default-container'];
      return annotated ?? found.spec?.containers[0]?.name ?? '';
    } catch (err: unknown) {
      return podReadRefusal(err, namespace, pod);
    }
  }

  /** Rules and the session limit, once the principal is known; the rule id or the refusal. */
  function policy(
    target: CommandTarget,
    container: string,
    principal: string,
  ): string | OpenOutcome {
    const rule = allowingRule(deps.config.rules, {
      namespace: target.namespace,
      pod: target.name,
      container,
    });
    if (rule === undefined) {
      return refused(
        RefusalCode.REFUSAL_CODE_POLICY_DENIED,
        `no exec.pod.rules entry allows ${target.namespace}/${target.name} container "${container}"`,
        principal,
      );
    }
    if (!deps.sessions.reserve()) {
      return refused(
        RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
        `exec.pod.max_sessions (${deps.config.max_sessions}) sessions (pod and node consoles together) are running`,
        principal,
        rule,
      );
    }
    return rule;
  }

  return {
    async open(request, sink) {
      const target = checkShape(request);
      if ('opened' in target) return target;
      // The signed command first, then the exec.pod gate (both inside the guard).
      const decision = deps.guard.authorize(request.commandSignature?.jws ?? '', {
        requestId: request.requestId,
        permission: 'cluster:node_console',
        target,
        verb: 'console',
      });
      if (!decision.accepted) {
        return refused(REFUSAL_BY_GUARD[decision.code], decision.reason, decision.principal);
      }
      const principal = decision.principal;
      const container = await resolveContainer(target.namespace, target.name, target.container);
      if (typeof container !== 'string') return { ...container, principal };
      const rule = policy(target, container, principal);
      if (typeof rule !== 'string') return rule;
      const command =
        request.command.length > 0 ? [...request.command] : [deps.config.default_shell];
      const execTarget = {
        namespace: target.namespace,
        pod: target.name,
        container,
        command,
        tty: request.tty,
      };
      try {
        const session = await deps.sessions.start(
          {
            requestId: request.requestId,
            principal,
            target: { ...target, container },
            command,
            tty: request.tty,
            rule,
          },
          podExecProcess(deps.kube, execTarget, request.size),
          sink,
        );
        return { opened: true, session, principal };
      } catch (err: unknown) {
        if (err instanceof PodExecError) {
          return refused(EXEC_REFUSALS[err.code], err.message, principal, rule);
        }
        throw err;
      }
    },
  };
}

export const REFUSAL_BY_GUARD: Record<AuthorizationRefusalCode, RefusalCode> = {
  SIGNATURE_INVALID: RefusalCode.REFUSAL_CODE_SIGNATURE_INVALID,
  SIGNATURE_EXPIRED: RefusalCode.REFUSAL_CODE_SIGNATURE_EXPIRED,
  SIGNATURE_REPLAYED: RefusalCode.REFUSAL_CODE_SIGNATURE_REPLAYED,
  SIGNATURE_MISMATCH: RefusalCode.REFUSAL_CODE_SIGNATURE_MISMATCH,
  LIMIT_REACHED: RefusalCode.REFUSAL_CODE_LIMIT_REACHED,
  INVALID_REQUEST: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
  GATE_DISABLED: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
};
