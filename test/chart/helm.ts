// Runs the real helm binaries over helm/kubexa-agent and parses what they render. Shared by the
// chart tests and the RBAC matrix against the real API server.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const execFileAsync = promisify(execFile);

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CHART_DIR = join(REPO_ROOT, 'helm', 'kubexa-agent');

/** The two helm majors the chart must work with, by binary name in the cluster bin dir. */
export const HELM_VERSIONS = [
  { label: 'helm 3.17', binary: 'helm3' },
  { label: 'helm 4.1', binary: 'helm' },
] as const;

export type Values = Record<string, unknown>;

/** A rendered Kubernetes object, loosely typed: tests narrow what they read. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly [field: string]: unknown;
}

export interface PolicyRule {
  readonly apiGroups?: string[];
  readonly resources?: string[];
  readonly resourceNames?: string[];
  readonly nonResourceURLs?: string[];
  readonly verbs: string[];
}

export interface RenderOptions {
  readonly release?: string;
  readonly namespace?: string;
  /** Merged over the chart defaults, passed as a values file. */
  readonly values?: Values;
  /** Extra command-line arguments (e.g. --set) after the values file. */
  readonly args?: readonly string[];
  /**
   * Render a copy of the chart whose kubexa.implementedFeatures lists these features, as the
   * chart will once the executor implements them: RBAC for a gate renders only then.
   */
  readonly implementedFeatures?: readonly ChartFeature[];
}

/** The privileged features, as the chart's kubexa.implementedFeatures names them. */
export type ChartFeature = 'exec' | 'nodeShell' | 'nodeOps' | 'write';

/** The body of kubexa.implementedFeatures in _guards.tpl: one `list ... | toJson` line. */
const IMPLEMENTED_FEATURES_RE =
  /(\{\{- define "kubexa\.implementedFeatures" -\}\}\n)\{\{- list[^}]*\| toJson -\}\}/;
const chartCopies = new Map<string, Promise<string>>();

/**
 * A copy of the chart (in a temp dir, one per feature set and process) whose list of implemented
 * features is replaced: the RBAC a gate renders once its feature exists, tested today.
 */
export function chartWithFeatures(features: readonly ChartFeature[]): Promise<string> {
  const key = [...features].sort().join(',');
  let copy = chartCopies.get(key);
  if (copy === undefined) {
    copy = (async () => {
      const dir = await mkdtemp(join(tmpdir(), 'kubexa-chart-'));
      const chart = join(dir, 'kubexa-agent');
      await cp(CHART_DIR, chart, { recursive: true });
      const guards = join(chart, 'templates', '_guards.tpl');
      const text = await readFile(guards, 'utf8');
      if (!IMPLEMENTED_FEATURES_RE.test(text)) {
        throw new Error('_guards.tpl: kubexa.implementedFeatures changed shape; update helm.ts');
      }
      const list = features.map((feature) => ` ${JSON.stringify(feature)}`).join('');
      await writeFile(
        guards,
        text.replace(
          IMPLEMENTED_FEATURES_RE,
          (_all, head: string) => `${head}{{- list${list} | toJson -}}`,
        ),
      );
      process.once('exit', () => {
        try {
          rmSync(dir, { recursive: true, force: true });
        } catch {
          // best effort: a temp dir
        }
      });
      return chart;
    })();
    chartCopies.set(key, copy);
  }
  return copy;
}

/** Values every render needs: the tenant token is required when the chart creates its Secret. */
export const BASE_VALUES: Values = { secret: { tenantToken: 'test-token' } };

export class HelmError extends Error {
  readonly stderr: string;

  constructor(message: string, stderr: string) {
    super(message);
    this.name = 'HelmError';
    this.stderr = stderr;
  }
}

/** Runs helm with arguments; resolves stdout, rejects with a HelmError carrying stderr. */
export async function runHelm(helmPath: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(helmPath, [...args], {
      maxBuffer: 32 * 1024 * 1024,
      env: { ...process.env, HELM_CACHE_HOME: join(tmpdir(), 'kubexa-helm-cache') },
    });
    return stdout;
  } catch (err: unknown) {
    const stderr = (err as { stderr?: unknown }).stderr;
    const text = typeof stderr === 'string' ? stderr : String(err);
    throw new HelmError(`helm ${args.join(' ')} failed:\n${text}`, text);
  }
}

async function withValuesFile<T>(values: Values, use: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-values-'));
  try {
    const path = join(dir, 'values.json');
    // JSON is YAML: helm reads it as a values file with every type intact.
    await writeFile(path, JSON.stringify(values));
    return await use(path);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function templateArgs(valuesPath: string, options: RenderOptions, chartDir: string): string[] {
  return [
    'template',
    options.release ?? 'kubexa-agent',
    chartDir,
    '--namespace',
    options.namespace ?? 'kubexa',
    '--values',
    valuesPath,
    ...(options.args ?? []),
  ];
}

/** `helm template` output as text. */
export async function renderText(helmPath: string, options: RenderOptions = {}): Promise<string> {
  const values = deepMerge(BASE_VALUES, options.values ?? {});
  const chartDir =
    options.implementedFeatures === undefined
      ? CHART_DIR
      : await chartWithFeatures(options.implementedFeatures);
  return withValuesFile(values, (path) => runHelm(helmPath, templateArgs(path, options, chartDir)));
}

/** `helm template` output parsed into objects (empty documents dropped). */
export async function render(helmPath: string, options: RenderOptions = {}): Promise<KubeObject[]> {
  return parseManifest(await renderText(helmPath, options));
}

/** The stderr of a render that must fail; throws if it succeeds. */
export async function renderError(helmPath: string, options: RenderOptions): Promise<string> {
  try {
    await renderText(helmPath, options);
  } catch (err: unknown) {
    if (err instanceof HelmError) return err.stderr;
    throw err;
  }
  throw new Error(`expected helm template to fail for ${JSON.stringify(options)}`);
}

export function parseManifest(text: string): KubeObject[] {
  return parseAllDocuments(text)
    .map((doc) => {
      if (doc.errors.length > 0)
        throw new Error(`rendered YAML does not parse: ${doc.errors[0]?.message ?? ''}`);
      return doc.toJS() as unknown;
    })
    .filter((doc): doc is KubeObject => typeof doc === 'object' && doc !== null);
}

export function deepMerge(base: Values, over: Values): Values {
  const out: Values = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isPlainObject(current) && isPlainObject(value) ? deepMerge(current, value) : value;
  }
  return out;
}

function isPlainObject(value: unknown): value is Values {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The one object of a kind (and name, if given); throws with the list when absent or ambiguous. */
export function findOne(objects: readonly KubeObject[], kind: string, name?: string): KubeObject {
  const found = objects.filter(
    (o) => o.kind === kind && (name === undefined || o.metadata.name === name),
  );
  if (found.length !== 1) {
    const have = objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ');
    throw new Error(
      `expected one ${kind}${name ? `/${name}` : ''}, found ${String(found.length)} in: ${have}`,
    );
  }
  return found[0]!;
}

export function rulesOf(role: KubeObject): PolicyRule[] {
  return (role['rules'] ?? []) as PolicyRule[];
}

/** Every (apiGroup, resource, verb) triple a rule list grants, as "group/resource:verb". */
export function grants(rules: readonly PolicyRule[]): Set<string> {
  const out = new Set<string>();
  for (const rule of rules) {
    for (const verb of rule.verbs) {
      for (const url of rule.nonResourceURLs ?? []) out.add(`url:${url}:${verb}`);
      for (const group of rule.apiGroups ?? []) {
        for (const resource of rule.resources ?? []) out.add(`${group}/${resource}:${verb}`);
      }
    }
  }
  return out;
}

export interface GateValues {
  readonly exec?: boolean;
  readonly nodeShell?: boolean;
  readonly nodeOps?: boolean;
  readonly write?: boolean;
  readonly readAll?: boolean;
}

/** The gate combinations of the RBAC matrix. */
export const GATE_MATRIX: readonly { readonly name: string; readonly rbac: GateValues }[] = [
  { name: 'off', rbac: {} },
  { name: 'exec', rbac: { exec: true } },
  { name: 'nodeshell', rbac: { nodeShell: true } },
  { name: 'nodeops', rbac: { nodeOps: true } },
  { name: 'write', rbac: { write: true } },
  { name: 'all', rbac: { exec: true, nodeShell: true, nodeOps: true, write: true } },
  { name: 'readall', rbac: { readAll: true } },
];
