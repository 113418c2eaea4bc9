// ExecutorService.Console: one stream per console. The first message opens a session (decided by
// pod-consoles.ts) or re-attaches one; later messages are stdin, resize, ack and close. A stream
// that ends without close only detaches: the session waits for its resume window.
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  ConsoleEndReason,
  RefusalCode,
  type ConsoleAttach,
  type ConsoleAudit,
  type ConsoleRequest,
  type ConsoleResponse,
  type Refusal,
} from '../../proto/index.js';
import type { CommandGuard } from '../guard/authorize-command.js';
import { attachRefusal, attachRefusalRecord } from '../sessions/attach-authorization.js';
import type { ConsoleSession, ConsoleSink } from '../sessions/console-session.js';
import type { PodConsoles } from '../sessions/pod-consoles.js';
import type { NodeConsoles } from '../node-console/node-consoles.js';
import { openerFor } from '../node-console/console-kind.js';
import type { SessionManager } from '../sessions/session-manager.js';

export interface ConsoleRpcDeps {
  readonly pods: PodConsoles;
  /** Node consoles (target kind "node"); absent: such opens are refused as GATE_DISABLED. */
  readonly nodes?: Pick<NodeConsoles, 'open'>;
  readonly sessions: SessionManager;
  readonly logger: Logger;
  /** Writes one audit record to the executor's log. */
  readonly audit: (record: ConsoleAudit) => void;
}

const MAX_STDIN_MESSAGE = 64 * 1024;

export function handleConsoleStream(
  call: ServerDuplexStream<ConsoleRequest, ConsoleResponse>,
  deps: ConsoleRpcDeps,
  guard: CommandGuard,
): void {
  let session: ConsoleSession | undefined;
  let first = true;
  let ended = false;
  const sink: ConsoleSink = {
    send(message) {
      if (ended) return true;
      return call.write(message);
    },
    onDrain(listener) {
      call.once('drain', listener);
    },
    end() {
      if (ended) return;
      ended = true;
      call.end();
    },
  };
  const refuse = (refusal: Refusal, audit?: ConsoleAudit) => {
    if (audit !== undefined) sink.send({ output: { $case: 'audit', value: audit } });
    sink.send({ output: { $case: 'refusal', value: refusal } });
    sink.end();
  };
  // Messages that arrive while the open is decided are applied once it is (stdin typed early).
  const pending: ConsoleRequest[] = [];
  let opening = false;

  const apply = (message: ConsoleRequest) => {
    const input = message.input;
    if (session === undefined || input === undefined) return;
    switch (input.$case) {
      case 'stdin':
        if (input.value.length <= MAX_STDIN_MESSAGE) session.stdin(input.value);
        break;
      case 'resize':
        session.resize(input.value.cols, input.value.rows);
        break;
      case 'ack':
        session.ack(Number(input.value));
        break;
      case 'close':
        session.end(
          ConsoleEndReason.CONSOLE_END_REASON_CLOSED,
          input.value.reason.slice(0, 256) || 'closed by the client',
        );
        break;
      case 'open':
      case 'attach':
        refuse({
          code: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
          reason: `${input.$case} is only valid as the first message of a stream`,
        });
    }
  };

  const attach = (request: ConsoleAttach) => {
    // A fresh signed command for this session first: the session id alone is not enough.
    const live = deps.sessions.find(request.sessionId);
    const refusal =
      live === undefined
        ? undefined
        : attachRefusal(guard, live, request.commandSignature?.jws ?? '');
    if (live !== undefined && refusal !== undefined) {
      const record = attachRefusalRecord(live, refusal);
      deps.audit(record);
      refuse(refusal, record);
      return;
    }
    const result = deps.sessions.attach(request.sessionId, Number(request.resumeAfter), sink);
    if (!result.ok) {
      refuse({
        code: result.reason.includes('resume window')
          ? RefusalCode.REFUSAL_CODE_RESUME_EXPIRED
          : RefusalCode.REFUSAL_CODE_NOT_FOUND,
        reason: result.reason,
      });
      return;
    }
    session = result.session;
  };

  call.on('data', (message: ConsoleRequest) => {
    if (!first) {
      if (opening) pending.push(message);
      else apply(message);
      return;
    }
    first = false;
    const input = message.input;
    if (input?.$case === 'open') {
      opening = true;
      openerFor(input.value, deps)
        .open(input.value, sink)
        .then((outcome) => {
          opening = false;
          if (outcome.opened) {
            session = outcome.session;
            // The stream went away while the open was decided: the session starts detached.
            if (ended) outcome.session.detach(sink);
            for (const message of pending.splice(0)) apply(message);
            return;
          }
          const target = input.value.target;
          const record: ConsoleAudit = {
            event: 'refusal',
            requestId: input.value.requestId,
            sessionId: '',
            principal: outcome.principal,
            ...(target === undefined ? {} : { target }),
            command: [...input.value.command],
            tty: input.value.tty,
            startUnixMs: String(Date.now()),
            endUnixMs: String(Date.now()),
            exitCode: 0,
            endReason: 0,
            bytesIn: '0',
            bytesOut: '0',
            refusal: outcome.refusal,
            rule: outcome.rule,
          };
          deps.audit(record);
          refuse(outcome.refusal, record);
        })
        .catch((err: unknown) => {
          opening = false;
          deps.logger.error({ err }, 'console open failed');
          refuse({
            code: RefusalCode.REFUSAL_CODE_EXEC_FAILED,
            reason: 'the console could not be opened',
          });
        });
      return;
    }
    if (input?.$case === 'attach') {
      attach(input.value);
      return;
    }
    refuse({
      code: RefusalCode.REFUSAL_CODE_INVALID_REQUEST,
      reason: 'the first message of a console stream must be open or attach',
    });
  });
  const detach = () => {
    if (ended) return;
    ended = true;
    session?.detach(sink);
  };
  // A detached sink sends nothing: `ended` is checked in send.
  call.on('end', () => {
    // The collector half-closed: the session lives on for its resume window.
    detach();
    call.end();
  });
  call.on('error', detach);
  call.on('cancelled', detach);
}

/** The executor runs without consoles (no Kubernetes identity for them): refuse the stream. */
export function refuseConsoleStream(
  call: ServerDuplexStream<ConsoleRequest, ConsoleResponse>,
): void {
  call.write({
    output: {
      $case: 'refusal',
      value: {
        code: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
        reason: 'consoles are off in the executor (exec.pod.enabled is false)',
      },
    },
  });
  call.end();
  call.on('data', () => undefined);
  call.on('error', () => undefined);
}
