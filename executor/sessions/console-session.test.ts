import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConsoleEndReason, type CommandTarget, type ConsoleResponse } from '../../proto/index.js';
import { ConsoleSession, type ConsoleProcess, type ConsoleSink } from './console-session.js';
import { OutputLog } from './output-log.js';

afterEach(() => {
  vi.useRealTimers();
});

/** A session on `target` whose process ends as soon as it is told to; the exit it sent. */
function sessionReachingMaxTime(target: CommandTarget): ConsoleResponse[] {
  vi.useFakeTimers();
  const session = new ConsoleSession(
    { requestId: 'r1', principal: 'alice', target, command: ['sh'], tty: true, rule: 'r' },
    new OutputLog(1 << 20, 1 << 14),
    { maxSessionMs: 30_000, resumeWindowMs: 0 },
    { onGone: () => undefined, onAudit: () => undefined, onProcessEnded: () => undefined },
  );
  const handlers = session.processHandlers();
  const process: ConsoleProcess = {
    writeStdin: () => true,
    closeStdin: () => undefined,
    resize: () => undefined,
    pause: () => undefined,
    resume: () => undefined,
    terminate: () => {
      handlers.onEnd({ exitCode: 0, message: 'terminated', statusReceived: false });
    },
  };
  session.started(process);
  const sent: ConsoleResponse[] = [];
  const sink: ConsoleSink = {
    send: (message) => sent.push(message) > 0,
    onDrain: () => undefined,
    end: () => undefined,
  };
  session.attach(sink, 0, 'alice');
  vi.advanceTimersByTime(30_000);
  return sent;
}

function exitOf(sent: ConsoleResponse[]) {
  const exit = sent.find((m) => m.output?.$case === 'exit');
  return exit?.output?.$case === 'exit' ? exit.output.value : undefined;
}

describe('ConsoleSession max session time', () => {
  it('ends a pod console naming exec.pod.max_session_sec, and a node console naming exec.node.max_session_sec', () => {
    const pod = exitOf(
      sessionReachingMaxTime({
        kind: 'pod',
        namespace: 'team-a',
        name: 'api-0',
        container: 'app',
        resource: '',
      }),
    );
    expect(pod?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_MAX_SESSION_TIME);
    expect(pod?.message).toBe('the session reached exec.pod.max_session_sec (30 s)');
    const node = exitOf(
      sessionReachingMaxTime({
        kind: 'node',
        namespace: '',
        name: 'worker-1',
        container: '',
        resource: '',
      }),
    );
    expect(node?.reason).toBe(ConsoleEndReason.CONSOLE_END_REASON_MAX_SESSION_TIME);
    expect(node?.message).toBe('the session reached exec.node.max_session_sec (30 s)');
  });
});
