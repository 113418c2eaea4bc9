// The registry of console sessions, shared by every console kind (pod consoles now, node consoles
// later): the session limit, starting a process behind a session, re-attaching by session id,
// and ending everything at shutdown. What may be opened is decided before this (pod-consoles.ts).
import type { Logger } from 'pino';
import { ConsoleEndReason, type ConsoleAudit } from '../../proto/index.js';
import { OutputLog } from './output-log.js';
import {
  ConsoleSession,
  type ConsoleProcess,
  type ConsoleProcessHandlers,
  type ConsoleSink,
  type SessionDescription,
} from './console-session.js';

export interface SessionLimits {
  /** Running sessions at once; one more is refused (LIMIT_REACHED). */
  readonly maxSessions: number;
  readonly maxSessionMs: number;
  /** 0: no resume. */
  readonly resumeWindowMs: number;
  /** Unacknowledged output per session before its process is paused. */
  readonly outputWindowBytes: number;
  readonly maxChunkBytes: number;
}

export interface SessionOverrides {
  readonly maxSessionMs?: number;
}

export type StartProcess = (handlers: ConsoleProcessHandlers) => Promise<ConsoleProcess>;

export type AttachResult =
  | { readonly ok: true; readonly session: ConsoleSession }
  | { readonly ok: false; readonly code: 'NOT_FOUND'; readonly reason: string };

export interface SessionManager {
  /** Reserves a slot; false when maxSessions are running (or starting). */
  reserve(): boolean;
  release(): void;
  /**
   * Starts a session in a reserved slot. The process is started before this resolves; a failure
   * to start releases the slot and rejects with the start error.
   */
  start(
    description: SessionDescription,
    startProcess: StartProcess,
    sink: ConsoleSink,
    /** Per-kind overrides of the manager's limits (a node console's own max_session_sec). */
    overrides?: SessionOverrides,
  ): Promise<ConsoleSession>;
  attach(sessionId: string, resumeAfter: number, sink: ConsoleSink): AttachResult;
  /** The live session with this id (to authorize an attach before it happens). */
  find(sessionId: string): ConsoleSession | undefined;
  running(): number;
  /** Output bytes held by all sessions (not yet acknowledged): the flow-control bound. */
  heldBytes(): number;
  /** Ends every session (executor stopping). */
  closeAll(): void;
}

/** How long an ended session's id is remembered, to say "ended" rather than "unknown". */
const REMEMBER_ENDED_MS = 10 * 60_000;
const MAX_REMEMBERED = 1024;

export function createSessionManager(
  limits: SessionLimits,
  deps: { readonly logger: Logger; readonly audit: (record: ConsoleAudit) => void },
): SessionManager {
  const sessions = new Map<string, ConsoleSession>();
  /** Ids of sessions that are gone, with why, so a late attach gets a useful reason. */
  const gone = new Map<string, { readonly reason: string; readonly atMs: number }>();
  let slots = 0;

  const remember = (session: ConsoleSession) => {
    const now = Date.now();
    for (const [id, entry] of gone) if (now - entry.atMs > REMEMBER_ENDED_MS) gone.delete(id);
    if (gone.size >= MAX_REMEMBERED) {
      const oldest = gone.keys().next().value;
      if (oldest !== undefined) gone.delete(oldest);
    }
    const expired =
      session.endReason() === ConsoleEndReason.CONSOLE_END_REASON_RESUME_WINDOW_EXPIRED;
    gone.set(session.id, {
      atMs: now,
      reason: expired
        ? 'the session ended: no stream re-attached within its resume window'
        : 'the session has ended',
    });
  };

  return {
    reserve() {
      if (slots >= limits.maxSessions) return false;
      slots += 1;
      return true;
    },
    release() {
      slots = Math.max(0, slots - 1);
    },
    async start(description, startProcess, sink, overrides = {}) {
      let released = false;
      const releaseOnce = () => {
        if (released) return;
        released = true;
        slots = Math.max(0, slots - 1);
      };
      const session = new ConsoleSession(
        description,
        new OutputLog(limits.outputWindowBytes, limits.maxChunkBytes),
        {
          maxSessionMs: overrides.maxSessionMs ?? limits.maxSessionMs,
          resumeWindowMs: limits.resumeWindowMs,
        },
        {
          onGone: (s) => {
            sessions.delete(s.id);
            remember(s);
          },
          onAudit: deps.audit,
          onProcessEnded: releaseOnce,
        },
      );
      let process: ConsoleProcess;
      try {
        process = await startProcess(session.processHandlers());
      } catch (err: unknown) {
        releaseOnce();
        session.end(ConsoleEndReason.CONSOLE_END_REASON_STREAM_FAILED, 'the process did not start');
        throw err;
      }
      sessions.set(session.id, session);
      session.started(process);
      const openRecord = session.auditRecord('open');
      deps.audit(openRecord);
      session.attach(sink, 0, description.principal);
      // The open's audit record also travels to the gateway (as a durable message there).
      sink.send({ output: { $case: 'audit', value: openRecord } });
      return session;
    },
    attach(sessionId, resumeAfter, sink) {
      const session = sessions.get(sessionId);
      if (session === undefined) {
        const entry = gone.get(sessionId);
        return {
          ok: false,
          code: 'NOT_FOUND',
          reason: entry?.reason ?? 'no such console session',
        };
      }
      session.attach(sink, resumeAfter, session.description.principal);
      return { ok: true, session };
    },
    find: (sessionId) => sessions.get(sessionId),
    running: () => slots,
    heldBytes: () => {
      let total = 0;
      for (const session of sessions.values()) total += session.heldBytes();
      return total;
    },
    closeAll() {
      for (const session of sessions.values()) {
        session.end(
          ConsoleEndReason.CONSOLE_END_REASON_EXECUTOR_STOPPING,
          'the executor is stopping',
        );
      }
      deps.logger.info({ sessions: sessions.size }, 'console sessions ended for shutdown');
    },
  };
}
