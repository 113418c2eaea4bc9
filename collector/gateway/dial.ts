import { readFile } from 'node:fs/promises';
import {
  type ChannelCredentials,
  type ChannelOptions,
  type Client,
  type ClientDuplexStream,
  connectivityState,
  credentials,
  makeGenericClientConstructor,
  type Metadata,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  AgentServiceService,
  type ConsoleAgentFrame,
  type ConsoleGatewayFrame,
  type GatewayMessage,
} from '../../proto/index.js';

/** How to reach the gateway. Mirrors the `gateway.*` config keys. */
export interface DialOptions {
  /** host:port. */
  readonly address: string;
  /** false: plaintext (development only). */
  readonly tls: boolean;
  /** PEM bundle trusted in addition to nothing else: when set, replaces the system roots. */
  readonly caCertPath?: string;
  /** Accept any server certificate. For internal CAs during setup only; logged loudly. */
  readonly insecureSkipVerify?: boolean;
  readonly dialTimeoutMs: number;
  /** Interval of HTTP/2 keepalive pings; detects dead NAT and load balancer paths. */
  readonly keepaliveTimeMs?: number;
  readonly keepaliveTimeoutMs?: number;
}

/** 30 s: short enough for idle NAT tables, long enough for a grpc-go gateway's ping policy. */
export const DEFAULT_KEEPALIVE_TIME_MS = 30_000;
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 10_000;
/** Queries and config from the gateway are small; 16 MiB leaves room without inviting abuse. */
const MAX_RECEIVE_BYTES = 16 * 1024 * 1024;

/** The Connect call as the stream uses it: encoded AgentMessages out, GatewayMessages in. */
export type ConnectCall = ClientDuplexStream<Uint8Array, GatewayMessage>;

/** One console's own call (AgentService.Console), dialled when the gateway asks for a console. */
export type ConsoleCall = ClientDuplexStream<ConsoleAgentFrame, ConsoleGatewayFrame>;

export interface AgentClient extends Client {
  connect(metadata: Metadata): ConnectCall;
  console(metadata: Metadata): ConsoleCall;
}

/**
 * Buffered items are already encoded AgentMessages, so the client writes bytes as they are
 * instead of decoding and re-encoding every item.
 */
const passThroughDefinition = {
  connect: {
    ...AgentServiceService.connect,
    requestSerialize: (bytes: Uint8Array): Buffer =>
      Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  },
  console: AgentServiceService.console,
} satisfies ServiceDefinition;

const AgentClientConstructor = makeGenericClientConstructor(
  passThroughDefinition,
  'agent.v1.AgentService',
) as unknown as new (
  address: string,
  credentials: ChannelCredentials,
  options: ChannelOptions,
) => AgentClient;

/** Channel credentials for the options; warns loudly when verification is switched off. */
export async function createCredentials(
  options: DialOptions,
  logger: Logger,
): Promise<ChannelCredentials> {
  if (!options.tls) {
    logger.warn(
      { address: options.address },
      'gateway connection is plaintext (gateway.tls=false)',
    );
    return credentials.createInsecure();
  }
  const rootCerts =
    options.caCertPath === undefined || options.caCertPath === ''
      ? null
      : await readCaFile(options.caCertPath);
  if (options.insecureSkipVerify === true) {
    logger.error(
      { address: options.address },
      'TLS certificate verification of the gateway is OFF (gateway.insecure_skip_verify=true): anyone on the network path can impersonate the gateway and read the tenant token; set gateway.ca_cert_path instead',
    );
    return credentials.createSsl(rootCerts, null, null, {
      rejectUnauthorized: false,
      checkServerIdentity: () => undefined,
    });
  }
  return credentials.createSsl(rootCerts);
}

/**
 * A fresh channel per connection attempt, so grpc-js's own reconnect loop never runs.
 *
 * `consoles`: the channel for console calls, on a TCP connection of its own, so console frames
 * never queue behind log batches (on a shared connection a keystroke's echo waits for every byte
 * written before it: the socket's buffers, the shared HTTP/2 connection window, the gateway's
 * parsing). That is what the separation guarantees (test/component/console-connection.test.ts
 * freezes the Connect connection and a console keeps echoing); the benchmark did not show it
 * faster (docs/consoles.md, Benchmark). grpc-js reuses a subchannel, and so its connection,
 * between channels of one thread whose target, credentials and options match in its global pool;
 * a channel with its own pool (`grpc.use_local_subchannel_pool`) never shares. Consoles are
 * relayed from the collector's relay thread, which has a grpc-js of its own and dials this
 * channel for the first console and closes it once the last console's call has completed
 * (collector/consoles/console-relay-worker.ts); the main thread's consoles channel
 * (gateway-stream.ts, one per session) only carries refusals the relay thread could not send.
 */
export function createAgentClient(
  options: DialOptions,
  creds: ChannelCredentials,
  purpose: 'connect' | 'consoles' = 'connect',
): AgentClient {
  return new AgentClientConstructor(options.address, creds, {
    'grpc.keepalive_time_ms': options.keepaliveTimeMs ?? DEFAULT_KEEPALIVE_TIME_MS,
    'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS,
    'grpc.keepalive_permit_without_calls': 0,
    'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
    'grpc.enable_retries': 0,
    ...(purpose === 'consoles' ? { 'grpc.use_local_subchannel_pool': 1 } : {}),
  });
}

/** The channel did not become ready: the transport failed, or the dial timeout passed. */
export class DialError extends Error {
  /** `failed`: the transport failed at once (refused, TLS, HTTP/2); `timeout`: no answer. */
  readonly kind: 'failed' | 'timeout';

  constructor(kind: 'failed' | 'timeout', message: string) {
    super(message);
    this.name = 'DialError';
    this.kind = kind;
  }
}

/**
 * Connects the channel, failing on the first transport failure (refused, TLS error) instead
 * of letting grpc-js retry until the deadline, and after `timeoutMs` at the latest.
 */
export function waitForReady(
  client: Client,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  const channel = client.getChannel();
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const onAbort = (): void => {
      finish(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    };
    const timer = setTimeout(() => {
      finish(new DialError('timeout', `dial timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    signal.addEventListener('abort', onAbort, { once: true });
    let sawConnecting = false;
    const check = (): void => {
      if (settled) return;
      const state = channel.getConnectivityState(true);
      if (state === connectivityState.READY) {
        finish();
        return;
      }
      if (state === connectivityState.SHUTDOWN) {
        finish(new Error('channel closed'));
        return;
      }
      if (state === connectivityState.TRANSIENT_FAILURE && sawConnecting) {
        // The target reads "dns:host:port"; the operator wrote host:port.
        const target = channel.getTarget().replace(/^dns:/, '');
        finish(new DialError('failed', `could not connect to ${target}`));
        return;
      }
      if (state === connectivityState.CONNECTING) sawConnecting = true;
      channel.watchConnectivityState(state, Infinity, check);
    };
    check();
  });
}

/** Read on every dial, so a rotated CA bundle is picked up without a restart. */
async function readCaFile(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err: unknown) {
    const reason = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new Error(
      `gateway.ca_cert_path: cannot read ${path} (${reason}); mount the CA bundle there or fix the path`,
      { cause: err },
    );
  }
}
