// The collector's part of a console: relay only. It holds no identity that can exec; it joins the
// gateway's Console call to an executor Console stream on the Pod-local socket, translates the
// frames, and maps the executor's refusals to the wire. Audit records go to the buffer as
// durable items. A lost call on either side ends the other without closing the session: the
// executor keeps it for its resume window, and the gateway re-attaches.
import { randomUUID } from 'node:crypto';
import { credentials, type ClientDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  AgentMessage,
  ConsoleEndReason,
  ConsoleStream,
  ExecutorServiceClient,
  RefusalCode,
  type AuditRecord,
  type CommandTarget,
  type ConsoleOpenRequest,
  type ConsoleAgentFrame,
  type ConsoleAudit,
  type ConsoleGatewayFrame,
  type ConsoleRequest,
  type ConsoleResponse,
} from '../../proto/index.js';
import type { BufferItem } from '../buffer/types.js';
import type { ConsoleCall } from '../gateway/dial.js';
import type { ConsoleHandler } from '../gateway/session.js';

export interface ConsoleRelayDeps {
  readonly socketPath: string;
  readonly logger: Logger;
  /** Where audit records go: the durable buffer. */
  readonly enqueue: (item: BufferItem) => void;
  /**
   * Called when the last relayed console's gateway call has completed (its status received, so
   * every frame written on it went out): the relay thread then closes its channel.
   */
  readonly onIdle?: () => void;
}

const END_REASONS: Record<number, string> = {
  [ConsoleEndReason.CONSOLE_END_REASON_EXITED]: 'exited',
  [ConsoleEndReason.CONSOLE_END_REASON_MAX_SESSION_TIME]: 'max_session_time',
  [ConsoleEndReason.CONSOLE_END_REASON_CLOSED]: 'closed',
  [ConsoleEndReason.CONSOLE_END_REASON_RESUME_WINDOW_EXPIRED]: 'resume_window_expired',
  [ConsoleEndReason.CONSOLE_END_REASON_EXECUTOR_STOPPING]: 'executor_stopping',
  [ConsoleEndReason.CONSOLE_END_REASON_STREAM_FAILED]: 'stream_failed',
};

/** executor.v1 RefusalCode as the wire's string code (the enum name without its prefix). */
export function refusalCodeName(code: RefusalCode): string {
  const name = Object.entries(RefusalCode).find(([, value]) => value === code)?.[0];
  return name === undefined ? 'UNSPECIFIED' : name.replace(/^REFUSAL_CODE_/, '');
}

export function endReasonName(reason: ConsoleEndReason): string {
  return END_REASONS[reason] ?? 'unspecified';
}

/** The audited target: pod/<namespace>/<pod>/<container>, or node/<node> for a node console. */
function consoleTargetText(t: NonNullable<ConsoleAudit['target']>): string {
  return t.kind === 'node' ? `node/${t.name}` : `pod/${t.namespace}/${t.name}/${t.container}`;
}

/** The executor's audit record as the wire's AuditRecord. */
export function toAuditRecord(audit: ConsoleAudit): AuditRecord {
  const t = audit.target;
  return {
    event: `console_${audit.event}`,
    requestId: audit.requestId,
    sessionId: audit.sessionId,
    principal: audit.principal,
    target: t === undefined ? '' : consoleTargetText(t),
    verb: 'console',
    command: audit.command,
    tty: audit.tty,
    startUnixMs: audit.startUnixMs,
    endUnixMs: audit.endUnixMs,
    exitCode: audit.exitCode,
    endReason: audit.event === 'close' ? endReasonName(audit.endReason) : '',
    bytesIn: audit.bytesIn,
    bytesOut: audit.bytesOut,
    refusalCode: audit.refusal === undefined ? '' : refusalCodeName(audit.refusal.code),
    refusalReason: audit.refusal?.reason ?? '',
    rule: audit.rule,
    // Node-job and mutation fields; a console reports exit_code and end_reason instead.
    outcome: '',
    dryRun: false,
  };
}

/** Executor output as the gateway's frame; audit records are not frames (they are buffered). */
function toFrame(requestId: string, message: ConsoleResponse): ConsoleAgentFrame | undefined {
  const output = message.output;
  switch (output?.$case) {
    case 'opened':
      return { requestId, frame: { $case: 'opened', value: output.value } };
    case 'chunk':
      return {
        requestId,
        frame: {
          $case: 'output',
          value: {
            seq: output.value.seq,
            stderr: output.value.stream === ConsoleStream.CONSOLE_STREAM_STDERR,
            data: output.value.data,
          },
        },
      };
    case 'exit':
      return {
        requestId,
        frame: {
          $case: 'exit',
          value: {
            reason: endReasonName(output.value.reason),
            exitCode: output.value.exitCode,
            message: output.value.message,
            lastSeq: output.value.lastSeq,
          },
        },
      };
    case 'refusal':
      return {
        requestId,
        frame: {
          $case: 'refusal',
          value: { code: refusalCodeName(output.value.code), reason: output.value.reason },
        },
      };
    case 'audit':
    case undefined:
      return undefined;
  }
}

/** A gateway frame as the executor's input. */
function toInput(frame: ConsoleGatewayFrame): ConsoleRequest | undefined {
  const value = frame.frame;
  switch (value?.$case) {
    case 'stdin':
      return { input: { $case: 'stdin', value: value.value } };
    case 'resize':
      return { input: { $case: 'resize', value: value.value } };
    case 'ack':
      return { input: { $case: 'ack', value: value.value } };
    case 'close':
      return { input: { $case: 'close', value: { reason: value.value } } };
    case undefined:
      return undefined;
  }
}

/**
 * The executor's target for a gateway open: a node console when `node` is set (kind "node"),
 * a pod console otherwise. The executor checks it against the signed command.
 */
export function consoleOpenTarget(open: ConsoleOpenRequest): CommandTarget {
  if (open.node !== '') {
    return { kind: 'node', namespace: '', name: open.node, container: '', resource: '' };
  }
  return {
    kind: 'pod',
    namespace: open.namespace,
    name: open.pod,
    container: open.container,
    resource: '',
  };
}

export interface ConsoleRelay {
  readonly handle: ConsoleHandler;
  /** Consoles relayed right now. */
  active(): number;
  /** No console relayed and every gateway call completed. */
  idle(): boolean;
  close(): void;
}

export function createConsoleRelay(deps: ConsoleRelayDeps): ConsoleRelay {
  const logger = deps.logger.child({ component: 'console-relay' });
  const executor = new ExecutorServiceClient(
    `unix://${deps.socketPath}`,
    credentials.createInsecure(),
  );
  let active = 0;
  /** Gateway calls not yet completed (a relay that ended may still be flushing its call). */
  let calls = 0;

  const audit = (record: ConsoleAudit) => {
    const message: AgentMessage = {
      messageId: randomUUID(),
      payload: { $case: 'auditRecord', value: toAuditRecord(record) },
    };
    deps.enqueue({
      id: message.messageId,
      kind: 'audit',
      payload: AgentMessage.encode(message).finish(),
    });
  };

  const relay = (
    requestId: string,
    first: ConsoleRequest,
    gateway: ConsoleCall,
    upstream: ClientDuplexStream<ConsoleRequest, ConsoleResponse>,
  ) => {
    active += 1;
    calls += 1;
    // Idle once both counts are back at zero, whichever comes last: grpc-js reports a call's
    // status (and error) in the tick before its readable side ends, so on a cut from the gateway
    // the call completes while this console is still active.
    const maybeIdle = () => {
      if (active === 0 && calls === 0) deps.onIdle?.();
    };
    let completed = false;
    const complete = () => {
      if (completed) return;
      completed = true;
      calls -= 1;
      maybeIdle();
    };
    // The call is over once the gateway answered our half-close (or it failed): closing the
    // channel before that could drop output still queued on it.
    gateway.on('status', complete);
    gateway.on('error', complete);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      active -= 1;
      // Ending one side ends the other; the executor detaches (the session waits to resume).
      upstream.cancel();
      gateway.end();
      maybeIdle();
    };
    upstream.on('data', (message: ConsoleResponse) => {
      if (message.output?.$case === 'audit') {
        audit(message.output.value);
        return;
      }
      const frame = toFrame(requestId, message);
      if (frame === undefined) return;
      // Flow control: a gateway that reads slowly pauses the executor stream; HTTP/2 flow
      // control then reaches the executor, whose output window pauses the process.
      if (!gateway.write(frame)) {
        upstream.pause();
        gateway.once('drain', () => upstream.resume());
      }
    });
    upstream.on('end', finish);
    upstream.on('error', (err: Error) => {
      if (done) return;
      logger.warn({ requestId, err: err.message }, 'executor console stream failed');
      gateway.write({
        requestId,
        frame: {
          $case: 'refusal',
          value: { code: 'EXECUTOR_UNAVAILABLE', reason: 'the executor did not answer' },
        },
      });
      finish();
    });
    gateway.on('data', (frame: ConsoleGatewayFrame) => {
      const input = toInput(frame);
      if (input !== undefined && !done) upstream.write(input);
    });
    gateway.on('end', finish);
    gateway.on('error', finish);
    upstream.write(first);
  };

  return {
    handle(request, dial) {
      const gateway = dial();
      gateway.on('error', () => undefined);
      const upstream = executor.console();
      if (request.$case === 'consoleOpen') {
        const open = request.value;
        logger.info(
          { requestId: open.requestId, namespace: open.namespace, pod: open.pod, node: open.node },
          'console open relayed to the executor',
        );
        // The first frame names the console on the gateway's side.
        gateway.write({ requestId: open.requestId, frame: undefined });
        relay(
          open.requestId,
          {
            input: {
              $case: 'open',
              value: {
                requestId: open.requestId,
                target: consoleOpenTarget(open),
                command: open.command,
                tty: open.tty,
                size: { cols: open.cols, rows: open.rows },
                commandSignature: { jws: open.signedCommand },
              },
            },
          },
          gateway,
          upstream,
        );
      } else {
        const attach = request.value;
        gateway.write({ requestId: attach.requestId, frame: undefined });
        relay(
          attach.requestId,
          {
            input: {
              $case: 'attach',
              value: {
                sessionId: attach.sessionId,
                resumeAfter: attach.resumeAfter,
                // Relayed untouched: the executor verifies it (bound to the session).
                commandSignature: { jws: attach.signedCommand },
              },
            },
          },
          gateway,
          upstream,
        );
      }
    },
    active: () => active,
    idle: () => active === 0 && calls === 0,
    close() {
      executor.close();
    },
  };
}
