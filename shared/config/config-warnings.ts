// Conditions that do not stop the agent but that an operator should hear about at startup:
// settings that cannot take effect, and exec.pod problems while no console is enabled (the seed
// makes those warnings, not errors, until exec.pod or exec.node is turned on).
import { formatConfigIssue } from '../errors.js';
import { checkExecPod } from './rule-checks.js';
import type { Config } from './schema.js';
import { formatPath } from './schema-walk.js';

type Warn = (path: readonly PropertyKey[], message: string) => void;

function warnGatewayAndQuery({ gateway, query }: Config, warn: Warn): void {
  if (gateway.insecure_skip_verify) {
    warn(
      ['gateway', 'insecure_skip_verify'],
      gateway.tls
        ? "the gateway's certificate is not verified; use this only against a development gateway"
        : 'has no effect while gateway.tls is false',
    );
  }
  const wildcard = query.rules.find((rule) => rule.resources.some((entry) => entry.trim() === '*'));
  if (query.enabled && !query.redact_secrets && wildcard !== undefined) {
    warn(
      ['query', 'rules'],
      `rule "${wildcard.id}" permits every resource and Secret values are not redacted; set query.redact_secrets: true or name the resources`,
    );
  }
}

function warnPrivileged({ mutate, exec }: Config, warn: Warn): void {
  if (!exec.pod.enabled && !exec.node.enabled) {
    checkExecPod(exec.pod, ['exec', 'pod'], (path, message) => {
      warn(path, `${message} (not an error while exec.pod and exec.node are disabled)`);
    });
  }
  if (exec.pod.enabled && exec.pod.rules.length === 0) {
    warn(
      ['exec', 'pod', 'rules'],
      'is empty, so no pod console is allowed; add a rule naming a namespace',
    );
  }
  if (mutate.node.enabled && mutate.node.nodes.length === 0) {
    warn(
      ['mutate', 'node', 'nodes'],
      'is empty, so no node job is allowed; add node name patterns such as "*"',
    );
  }
  if (mutate.enabled && mutate.rules.length === 0) {
    warn(['mutate', 'rules'], 'is empty, so no mutation is allowed');
  }
}

/** Warnings about a valid config, each `path: message`. */
export function configWarnings(config: Config): string[] {
  const warnings: string[] = [];
  const warn: Warn = (path, message) => {
    warnings.push(formatConfigIssue({ path: formatPath(path), message }));
  };
  warnGatewayAndQuery(config, warn);
  warnPrivileged(config, warn);
  return warnings;
}
