import type { ConfigSnapshot, GatewayMessage } from '../proto/index.js';

type ControlPayload = Exclude<
  NonNullable<GatewayMessage['payload']>,
  { $case: 'ack' } | { $case: 'handshake' }
>;

/** The fields a config patch sets (0 and empty mean "unchanged"). */
function describeSnapshot(config: ConfigSnapshot): string[] {
  const parts: string[] = [];
  if (config.heartbeatIntervalSec > 0)
    parts.push(`heartbeat every ${config.heartbeatIntervalSec} s`);
  if (config.batchSize > 0) parts.push(`batch size ${config.batchSize}`);
  if (config.flushIntervalMs > 0) parts.push(`flush every ${config.flushIntervalMs} ms`);
  const rules = config.ingestRules;
  if (rules && Number(rules.maxLineBytes) > 0) parts.push(`max line ${rules.maxLineBytes} B`);
  if (rules && Number(rules.perStreamRateBytes) > 0)
    parts.push(`rate ${rules.perStreamRateBytes} B/s per stream`);
  if (config.logCollectors.length > 0) parts.push(`${config.logCollectors.length} log rule(s)`);
  return parts;
}

/** One line for the Agents view's timeline: what the gateway told the agent. */
export function describeControl(payload: ControlPayload): string {
  if (isPrivilegedRequest(payload)) return describeWriteRequest(payload);
  switch (payload.$case) {
    case 'backpressure':
      return payload.value.throttle
        ? `throttle: wait ${payload.value.delayMs} ms between sends`
        : 'unthrottle: send at full speed';
    case 'config': {
      const parts = payload.value.config ? describeSnapshot(payload.value.config) : [];
      const version = payload.value.configVersion ? ` ${payload.value.configVersion}` : '';
      return `config update${version}: ${parts.length > 0 ? parts.join(', ') : 'no change'}`;
    }
    case 'shutdown':
      return `shutdown: ${payload.value.reason}`;
    case 'resourceQuery':
      return `query ${payload.value.queryId}`;
  }
}

type PrivilegedRequest = Extract<
  ControlPayload,
  {
    $case: 'consoleOpen' | 'consoleAttach' | 'nodeJobRequest' | 'nodeJobCancel' | 'mutationRequest';
  }
>;

function isPrivilegedRequest(payload: ControlPayload): payload is PrivilegedRequest {
  return [
    'consoleOpen',
    'consoleAttach',
    'nodeJobRequest',
    'nodeJobCancel',
    'mutationRequest',
  ].includes(payload.$case);
}

/** The privileged requests (consoles, node jobs, mutations), one line each. */
function describeWriteRequest(
  payload: Extract<
    ControlPayload,
    {
      $case:
        'consoleOpen' | 'consoleAttach' | 'nodeJobRequest' | 'nodeJobCancel' | 'mutationRequest';
    }
  >,
): string {
  switch (payload.$case) {
    case 'consoleOpen':
      return `console ${payload.value.requestId}: ${payload.value.namespace}/${payload.value.pod}`;
    case 'consoleAttach':
      return `console ${payload.value.requestId}: re-attach after seq ${payload.value.resumeAfter}`;
    case 'nodeJobRequest':
      return `node job ${payload.value.verb} ${payload.value.node}${payload.value.dryRun ? ' (dry run)' : ''}`;
    case 'nodeJobCancel':
      return `cancel node job ${payload.value.jobId}`;
    case 'mutationRequest':
      return `mutation ${payload.value.verb} ${payload.value.resource} ${payload.value.namespace}/${payload.value.name}`;
  }
}
