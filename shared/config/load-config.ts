// Turns the config file's text and the environment into a Config, once, at startup. Pure: main.ts
// reads the file and passes the environment. Every problem is collected and thrown together in one
// ConfigError; nothing here prints, and no message carries a secret's value.
import { parseAllDocuments, type YAMLError } from 'yaml';
import { ConfigError, type ConfigIssue } from '../errors.js';
import { REDACTED } from './config-output.js';
import { configWarnings } from './config-warnings.js';
import { deepFreeze } from './deep-freeze.js';
import { describeIssue } from './describe-issue.js';
import { prepareInput } from './prepare-input.js';
import { ConfigSchema, ExecutorConfigSchema, type Config } from './schema.js';
import { formatPath, isPlainObject } from './schema-walk.js';

/** Environment variables that override the file when set to a non-empty value (Go agent's set). */
export const ENV_OVERRIDES = [
  { name: 'KUBEXA_TENANT_TOKEN', path: ['agent', 'tenant_token'] },
  { name: 'KUBEXA_AGENT_ID', path: ['agent', 'agent_id'] },
  { name: 'KUBEXA_GATEWAY_ADDRESS', path: ['gateway', 'address'] },
  { name: 'KUBEXA_LOG_LEVEL', path: ['log', 'level'] },
] as const;

export interface LoadConfigOptions {
  /** The config file's contents (YAML); empty text means "all defaults". */
  readonly fileText: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Fills agent.agent_id when neither the file nor KUBEXA_AGENT_ID sets it (main.ts: randomUUID). */
  readonly createAgentId?: () => string;
  /**
   * Which process loads the file (default collector). The executor reads the same file but never
   * talks to the gateway, and its container gets no tenant token, so for it the gateway
   * credentials are not required.
   */
  readonly role?: 'collector' | 'executor';
}

export interface LoadedConfig {
  /** Deep-frozen. */
  readonly config: Config;
  /** Unknown keys and settings that cannot take effect; print them, they do not stop startup. */
  readonly warnings: readonly string[];
}

// yaml's own message quotes the offending source lines, which may hold the token; keep only the
// sentence before the position, and report the position ourselves.
function describeYamlError(error: YAMLError): ConfigIssue {
  const sentence = error.message.split(/ at line \d+/)[0] ?? error.code;
  const position = error.linePos?.[0];
  const where = position === undefined ? '' : `line ${position.line}, column ${position.col}: `;
  return { path: '', message: `${where}${sentence} (the file is not valid YAML)` };
}

function parseYaml(fileText: string): { data: unknown; warnings: string[] } {
  const documents = parseAllDocuments(fileText);
  const list = Array.isArray(documents) ? documents : [];
  const [first, ...rest] = list;
  if (first === undefined) return { data: {}, warnings: [] };
  if (first.errors.length > 0) throw new ConfigError(first.errors.map(describeYamlError));
  const warnings =
    rest.length > 0 ? [`only the first YAML document is read; ${rest.length} more ignored`] : [];
  return { data: first.toJS({ maxAliasCount: 100 }) as unknown, warnings };
}

/** Sets each non-empty override into `data`; returns the formatted paths that came from env. */
function applyEnv(
  data: Record<string, unknown>,
  env: LoadConfigOptions['env'],
): Map<string, string> {
  const fromEnv = new Map<string, string>();
  for (const { name, path } of ENV_OVERRIDES) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    const [sectionKey, key] = path;
    const section = data[sectionKey] ?? {};
    // A section of the wrong type stays as it is, for the schema to report.
    if (!isPlainObject(section)) continue;
    data[sectionKey] = { ...section, [key]: value };
    fromEnv.set(formatPath(path), name);
  }
  return fromEnv;
}

/** Secrets shorter than this are not searched for in messages (they would match ordinary words). */
const MIN_REDACTED_LENGTH = 8;

/**
 * Defence in depth: no message quotes a secret's value on purpose, but a token pasted in the
 * wrong place (as a key, in another field) could still be echoed, so any known secret text is
 * replaced wherever it appears.
 */
function createRedactor(data: Record<string, unknown>, env: LoadConfigOptions['env']) {
  const agent = data['agent'];
  const fromFile = isPlainObject(agent) ? agent['tenant_token'] : undefined;
  const secrets = [env['KUBEXA_TENANT_TOKEN'], fromFile].filter(
    (value): value is string => typeof value === 'string' && value.length >= MIN_REDACTED_LENGTH,
  );
  return (text: string): string =>
    secrets.reduce((result, secret) => result.split(secret).join(REDACTED), text);
}

/**
 * Parses and validates the config. Throws ConfigError listing every issue (with the warnings
 * collected so far); returns a deep-frozen Config and the warnings otherwise.
 */
export function loadConfig(options: LoadConfigOptions): LoadedConfig {
  const parsed = parseYaml(options.fileText);
  const data = parsed.data ?? {};
  if (!isPlainObject(data)) {
    throw new ConfigError(
      [
        {
          path: '',
          message: 'the file must be a YAML mapping of sections (agent, gateway, collect, ...)',
        },
      ],
      parsed.warnings,
    );
  }
  const redact = createRedactor(data, options.env);
  const withEnv = { ...data };
  const fromEnv = applyEnv(withEnv, options.env);
  const prepared = prepareInput(withEnv, ConfigSchema);
  const warnings = [...parsed.warnings, ...prepared.warnings].map(redact);
  const schema = options.role === 'executor' ? ExecutorConfigSchema : ConfigSchema;
  const result = schema.safeParse(prepared.value, { error: describeIssue });
  if (!result.success) {
    const issues = result.error.issues.map((issue): ConfigIssue => {
      const path = formatPath(prepared.toFilePath(issue.path));
      const envName = fromEnv.get(path);
      const message =
        envName === undefined ? issue.message : `${issue.message} (value from ${envName})`;
      return { path: redact(path), message: redact(message) };
    });
    // Two checks of one field may word the same refusal (a length and a pattern): say it once.
    const unique = issues.filter(
      (issue, index) =>
        issues.findIndex(
          (other) => other.path === issue.path && other.message === issue.message,
        ) === index,
    );
    throw new ConfigError(unique, warnings);
  }
  let config = result.data;
  if (config.agent.agent_id === '' && options.createAgentId !== undefined) {
    config = { ...config, agent: { ...config.agent, agent_id: options.createAgentId() } };
  }
  const allWarnings = [...warnings, ...configWarnings(config).map(redact)];
  return { config: deepFreeze(config), warnings: allWarnings };
}
