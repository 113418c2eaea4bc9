// One console session: a process behind a ConsoleProcess (a pod exec today, a node shell later),
// the numbered output it produced, and at most one attached stream. The session outlives its
// stream for the resume window; flow control is the output window: when the far end stops
// acknowledging, the process's output is paused at its source, so memory stays bounded and
// nothing is dropped.
import { randomBytes } from 'node:crypto';
import {
  ConsoleEndReason,
  ConsoleStream,
  type CommandTarget,
  type ConsoleAudit,
  type ConsoleResponse,
} from '../../proto/index.js';
import type { OutputChunk, OutputLog } from './output-log.js';

/** The process side of a console, whatever runs it. */
export interface ConsoleProcess {
  writeStdin(data: Buffer): boolean;
  closeStdin(): void;
  resize(cols: number, rows: number): void;
  pause(): void;
  resume(): void;
  /** Ends the process (best effort) and its connection; onEnd follows. */
  terminate(): void;
}

export interface ConsoleProcessEnd {
  readonly exitCode: number;
  readonly message: string;
  readonly statusReceived: boolean;
}

export interface ConsoleProcessHandlers {
  onOutput(stream: 1 | 2, data: Buffer): void;
  onEnd(end: ConsoleProcessEnd): void;
}

/** The attached stream (the gRPC call as the server sees it). */
export interface ConsoleSink {
  /** false: the stream's buffer is above its mark; onDrain says when it is below again. */
  send(message: ConsoleResponse): boolean;
  onDrain(listener: () => void): void;
  /** Ends the stream (the session may live on). */
  end(): void;
}

/** What the audit record and ConsoleOpened say about the session. */
export interface SessionDescription {
  readonly requestId: string;
  readonly principal: string;
  readonly target: CommandTarget;
  readonly command: readonly string[];
  readonly tty: boolean;
  /** The rule that allowed it (exec.pod.rules id). */
  readonly rule: string;
}

/** The config key whose limit ended a session: a node console has its own. */
function maxSessionKey(target: CommandTarget): string {
  return target.kind === 'node' ? 'exec.node.max_session_sec' : 'exec.pod.max_session_sec';
}

export interface SessionTimers {
  readonly maxSessionMs: number;
  /** 0: no resume (a lost stream ends the session). */
  readonly resumeWindowMs: number;
}

export interface SessionHooks {
  /** The session is over and may be forgotten. */
  readonly onGone: (session: ConsoleSession) => void;
  /** Every audit record (open, close), for the executor's log. */
  readonly onAudit: (record: ConsoleAudit) => void;
  /** The process ended (the running-session count drops). */
  readonly onProcessEnded: (session: ConsoleSession) => void;
}

export type SessionState = 'running' | 'ended';

export class ConsoleSession {
  readonly id = randomBytes(16).toString('hex');
  readonly startMs = Date.now();
  private process: ConsoleProcess | undefined;
  private sink: ConsoleSink | undefined;
  private paused = false;
  private bytesIn = 0;
  private bytesOut = 0;
  private exit: { reason: ConsoleEndReason; exitCode: number; message: string } | undefined;
  private endMs = 0;
  /** The reason to report when the process ends because the session ended it. */
  private endingReason: { reason: ConsoleEndReason; message: string } | undefined;
  private readonly maxSessionTimer: NodeJS.Timeout;
  private detachTimer: NodeJS.Timeout | undefined;
  private forgotten = false;
  /** The attached stream refused a write (above its buffer mark) and has not drained yet. */
  private sinkBlocked = false;
  private pendingAudit: ConsoleAudit | undefined;

  readonly description: SessionDescription;
  readonly timers: SessionTimers;
  private readonly log: OutputLog;
  private readonly hooks: SessionHooks;

  constructor(
    description: SessionDescription,
    log: OutputLog,
    timers: SessionTimers,
    hooks: SessionHooks,
  ) {
    this.description = description;
    this.log = log;
    this.timers = timers;
    this.hooks = hooks;
    this.maxSessionTimer = setTimeout(() => {
      this.end(
        ConsoleEndReason.CONSOLE_END_REASON_MAX_SESSION_TIME,
        `the session reached ${maxSessionKey(description.target)} (${Math.round(timers.maxSessionMs / 1000)} s)`,
      );
    }, timers.maxSessionMs);
    this.maxSessionTimer.unref();
  }

  state(): SessionState {
    return this.exit === undefined ? 'running' : 'ended';
  }

  /** Handlers for the process: wire them before it starts. */
  processHandlers(): ConsoleProcessHandlers {
    return {
      onOutput: (stream, data) => {
        this.bytesOut += data.length;
        const accepted = this.sendChunks(this.log.append(stream, data));
        // A stream that does not take writes pauses the source too, so the stream's own buffer
        // stays small; it resumes on the stream's drain.
        if (!accepted) this.blockOnSink();
        if (!this.paused && (this.log.full() || this.sinkBlocked)) {
          this.paused = true;
          this.process?.pause();
        }
      },
      onEnd: (end) => {
        this.processEnded(end);
      },
    };
  }

  /** Sends chunks to the attached stream; false when it refused one (above its mark). */
  private sendChunks(chunks: readonly OutputChunk[]): boolean {
    let accepted = true;
    for (const chunk of chunks) {
      const sent = this.sink?.send({
        output: {
          $case: 'chunk',
          value: {
            seq: String(chunk.seq),
            stream:
              chunk.stream === 1
                ? ConsoleStream.CONSOLE_STREAM_STDOUT
                : ConsoleStream.CONSOLE_STREAM_STDERR,
            data: chunk.data,
          },
        },
      });
      if (sent === false) accepted = false;
    }
    return accepted;
  }

  private blockOnSink(): void {
    const sink = this.sink;
    if (sink === undefined || this.sinkBlocked) return;
    this.sinkBlocked = true;
    sink.onDrain(() => {
      this.sinkBlocked = false;
      this.maybeResume();
    });
  }

  /** The process is running: stdin, resize and end go to it from now on. */
  started(process: ConsoleProcess): void {
    this.process = process;
    if (this.endingReason !== undefined) process.terminate();
  }

  /** Attaches a stream, replaying the output after `resumeAfter`, then the exit if it ended. */
  attach(sink: ConsoleSink, resumeAfter: number, principal: string): void {
    if (this.detachTimer !== undefined) clearTimeout(this.detachTimer);
    this.detachTimer = undefined;
    const previous = this.sink;
    this.sink = sink;
    this.sinkBlocked = false;
    previous?.end();
    this.log.ack(resumeAfter);
    const replay = this.log.after(resumeAfter);
    sink.send({
      output: {
        $case: 'opened',
        value: {
          sessionId: this.id,
          principal,
          container: this.description.target.container,
          command: [...this.description.command],
          resumeWindowSec: Math.round(this.timers.resumeWindowMs / 1000),
          maxSessionSec: Math.round(this.timers.maxSessionMs / 1000),
          replayFrom: String(replay[0]?.seq ?? this.log.lastSeq() + 1),
        },
      },
    });
    for (const chunk of replay) {
      sink.send({
        output: {
          $case: 'chunk',
          value: {
            seq: String(chunk.seq),
            stream:
              chunk.stream === 1
                ? ConsoleStream.CONSOLE_STREAM_STDOUT
                : ConsoleStream.CONSOLE_STREAM_STDERR,
            data: chunk.data,
          },
        },
      });
    }
    if (this.exit !== undefined) this.sendExit();
    if (this.pendingAudit !== undefined) {
      sink.send({ output: { $case: 'audit', value: this.pendingAudit } });
      this.pendingAudit = undefined;
    }
    this.maybeResume();
  }

  /** The stream went away without closing the session: wait for a re-attach, or end. */
  detach(sink: ConsoleSink): void {
    if (this.sink !== sink) return;
    this.sink = undefined;
    this.sinkBlocked = false;
    if (this.timers.resumeWindowMs <= 0) {
      this.end(
        ConsoleEndReason.CONSOLE_END_REASON_RESUME_WINDOW_EXPIRED,
        'the console stream ended and resume is off (exec.pod.resume_window_sec < 0)',
      );
      this.forgetIfDone();
      return;
    }
    this.detachTimer = setTimeout(() => {
      this.detachTimer = undefined;
      this.end(
        ConsoleEndReason.CONSOLE_END_REASON_RESUME_WINDOW_EXPIRED,
        `no stream re-attached within the resume window (${Math.round(this.timers.resumeWindowMs / 1000)} s)`,
      );
      this.forget();
    }, this.timers.resumeWindowMs);
    this.detachTimer.unref();
  }

  stdin(data: Buffer): void {
    if (this.exit !== undefined || this.process === undefined) return;
    this.bytesIn += data.length;
    this.process.writeStdin(data);
  }

  closeStdin(): void {
    this.process?.closeStdin();
  }

  resize(cols: number, rows: number): void {
    if (cols > 0 && rows > 0 && cols <= 10_000 && rows <= 10_000) this.process?.resize(cols, rows);
  }

  ack(seq: number): void {
    this.log.ack(seq);
    this.maybeResume();
    // The exit was delivered and everything acknowledged: nothing is left to resume.
    if (this.exit !== undefined && this.log.acked() >= this.log.lastSeq()) this.forget();
  }

  /** Ends the session on purpose (close, max session time, resume window, shutdown). */
  end(reason: ConsoleEndReason, message: string): void {
    if (this.exit !== undefined || this.endingReason !== undefined) return;
    this.endingReason = { reason, message };
    if (this.process === undefined) return; // started() terminates it
    this.process.terminate();
  }

  /** The process or its connection is over: record the exit and tell the attached stream. */
  private processEnded(end: ConsoleProcessEnd): void {
    if (this.exit !== undefined) return;
    clearTimeout(this.maxSessionTimer);
    this.endMs = Date.now();
    if (this.endingReason !== undefined) {
      this.exit = { ...this.endingReason, exitCode: end.statusReceived ? end.exitCode : -1 };
    } else if (end.statusReceived) {
      this.exit = {
        reason: ConsoleEndReason.CONSOLE_END_REASON_EXITED,
        exitCode: end.exitCode,
        message: end.message,
      };
    } else {
      this.exit = {
        reason: ConsoleEndReason.CONSOLE_END_REASON_STREAM_FAILED,
        exitCode: -1,
        message: end.message,
      };
    }
    this.hooks.onProcessEnded(this);
    const record = this.auditRecord('close');
    this.hooks.onAudit(record);
    if (this.sink !== undefined) {
      this.sendExit();
      this.sink.send({ output: { $case: 'audit', value: record } });
    } else {
      // Ended while detached: the stream that re-attaches carries the record to the gateway.
      this.pendingAudit = record;
    }
    this.forgetIfDone();
  }

  private sendExit(): void {
    if (this.exit === undefined) return;
    this.sink?.send({
      output: {
        $case: 'exit',
        value: {
          reason: this.exit.reason,
          exitCode: this.exit.exitCode,
          message: this.exit.message,
          lastSeq: String(this.log.lastSeq()),
        },
      },
    });
  }

  /** An ended session stays only while a stream could still re-attach for its last output. */
  private forgetIfDone(): void {
    if (this.exit === undefined) return;
    if (this.sink === undefined && this.detachTimer === undefined) this.forget();
    else if (this.log.acked() >= this.log.lastSeq() && this.sink !== undefined) {
      // Everything was acknowledged already; the stream gets the exit and is done.
      this.forget();
    }
  }

  private forget(): void {
    if (this.forgotten) return;
    this.forgotten = true;
    if (this.detachTimer !== undefined) clearTimeout(this.detachTimer);
    this.detachTimer = undefined;
    const sink = this.sink;
    this.sink = undefined;
    sink?.end();
    this.hooks.onGone(this);
  }

  private maybeResume(): void {
    if (this.paused && this.log.drained() && !this.sinkBlocked) {
      this.paused = false;
      this.process?.resume();
    }
  }

  auditRecord(event: 'open' | 'close'): ConsoleAudit {
    const d = this.description;
    return {
      event,
      requestId: d.requestId,
      sessionId: this.id,
      principal: d.principal,
      target: d.target,
      command: [...d.command],
      tty: d.tty,
      startUnixMs: String(this.startMs),
      endUnixMs: String(this.endMs),
      exitCode: this.exit?.exitCode ?? 0,
      endReason: this.exit?.reason ?? ConsoleEndReason.CONSOLE_END_REASON_UNSPECIFIED,
      bytesIn: String(this.bytesIn),
      bytesOut: String(this.bytesOut),
      rule: d.rule,
    };
  }

  /** Why the session ended or is ending; UNSPECIFIED while it runs. */
  endReason(): ConsoleEndReason {
    return (
      this.exit?.reason ??
      this.endingReason?.reason ??
      ConsoleEndReason.CONSOLE_END_REASON_UNSPECIFIED
    );
  }

  /** Held output bytes (for tests and metrics). */
  heldBytes(): number {
    return this.log.bytes();
  }
}
