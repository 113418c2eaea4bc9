// The agent's configuration file: the one definition of its keys (snake_case, as the Go agent
// spells them, so existing config files keep working), defaults, bounds and cross-field rules.
// The loader, `config check`, docs/configuration.md and the chart's values.schema.json all
// derive from this file. Durations are Go duration strings in the file and milliseconds in
// Config; byte sizes are integers.
import * as z from 'zod';
import { HOST_PATTERN, listenPort, PORT_PATTERN } from './address.js';
import {
  byteSize,
  duration,
  durationField,
  flag,
  gatewayAddress,
  globList,
  integer,
  labelMap,
  listenAddress,
  nameList,
  nameText,
  patternList,
  patternText,
  requiredPatternText,
  text,
} from './fields.js';
import type { NameRule } from './kube-names.js';
import { normalizeConfig } from './normalize.js';
import { resourceList } from './resource-fields.js';
import {
  checkExecPod,
  checkUniqueIds,
  NAMESPACE_REQUIRED_MESSAGE,
  type AddIssue,
} from './rule-checks.js';
import { markField } from './schema-markers.js';

const MIB = 1024 * 1024;

const NAMESPACE = { noun: 'namespace', kind: 'label' } as const satisfies NameRule;
const POD: NameRule = { noun: 'pod name', kind: 'subdomain' };
const NODE: NameRule = { noun: 'node name', kind: 'subdomain' };
const CONTAINER: NameRule = { noun: 'container name', kind: 'label' };
const OBJECT: NameRule = { noun: 'object name', kind: 'subdomain' };

/**
 * Runs a cross-field check as soon as the keys it reads are valid, even when other keys are not,
 * so one load reports every problem. A key is valid when no issue sits on it, inside it, or on
 * a parent of it.
 */
function whenValid(...paths: readonly (readonly string[])[]): z.core.$ZodSuperRefineParams {
  // A path ending in '#' asks only that the container itself be readable: issues inside it
  // (deeper than the '#') do not count.
  const overlaps = (issuePath: readonly PropertyKey[], path: readonly string[]): boolean => {
    const shallow = path.at(-1) === '#';
    const target = shallow ? path.slice(0, -1) : path;
    if (shallow && issuePath.length > target.length) return false;
    const length = Math.min(issuePath.length, target.length);
    return issuePath.slice(0, length).every((segment, index) => segment === target[index]);
  };
  return {
    when: (payload) =>
      !payload.issues.some((issue) => paths.some((path) => overlaps(issue.path ?? [], path))),
  };
}

function adder(ctx: z.RefinementCtx): AddIssue {
  return (path, message) => {
    ctx.addIssue({ code: 'custom', path: [...path], message });
  };
}

// ---------------------------------------------------------------------------------------------
// agent, gateway

/**
 * The gateway credentials are required of the collector only: the executor reads the same file,
 * never talks to the gateway, and its container gets no token.
 */
interface SchemaOptions {
  readonly requireGatewayCredentials: boolean;
}

function notBlankUnless(optional: boolean, message: string) {
  return z.string().refine((value) => optional || value.trim() !== '', { error: message });
}

function agentSection({ requireGatewayCredentials }: SchemaOptions) {
  return z.object({
    /** Injected through KUBEXA_TENANT_TOKEN; never printed, never a chart value. */
    tenant_token: markField(
      notBlankUnless(
        !requireGatewayCredentials,
        'must not be empty: set KUBEXA_TENANT_TOKEN (the chart sets it from secret.tenantToken or secret.existingSecret)',
      ),
      'secret',
    ).prefault(''),
    /** Empty: main.ts generates one per process start, as the Go agent does. */
    agent_id: text(),
  });
}

function gatewaySection({ requireGatewayCredentials }: SchemaOptions) {
  return z
    .object({
      address: gatewayAddress(
        !requireGatewayCredentials,
        'must not be empty: write host:port of the Kubexa gateway, e.g. gateway.kubexa.dev:443 (or set KUBEXA_GATEWAY_ADDRESS)',
      ),
      tls: flag(true),
      /** Development only; warned at startup. */
      insecure_skip_verify: flag(false),
      /**
       * The operator's acknowledgement of tls=false or insecure_skip_verify=true. The chart
       * refuses either without it; security.profile strict refuses all three.
       */
      allow_insecure: flag(false),
      ca_cert_path: text(),
      reconnect_initial_delay: duration('1s', { positive: true }),
      reconnect_max_delay: duration('15s', { positive: true }),
      dial_timeout: duration('10s', { positive: true }),
      handshake_timeout: duration('10s', { positive: true }),
    })
    .superRefine(
      (gateway, ctx) => {
        if (gateway.reconnect_max_delay < gateway.reconnect_initial_delay) {
          adder(ctx)(
            ['reconnect_max_delay'],
            'must not be shorter than gateway.reconnect_initial_delay',
          );
        }
      },
      whenValid(['reconnect_initial_delay'], ['reconnect_max_delay']),
    );
}

// ---------------------------------------------------------------------------------------------
// collect.*

const LogRule = z.object({
  id: text(),
  namespace: nameText(NAMESPACE),
  /** minimatch globs. */
  pod_names: globList(POD),
  label_selector: text(),
  field_selector: text(),
  labels: labelMap(),
  /** minimatch globs. */
  containers: globList(CONTAINER),
  /** Unset: collect.logs.follow. */
  follow: z.boolean().optional(),
  /** Unset: collect.logs.tail_lines. */
  tail_lines: z.int().min(0).optional(),
});

const LogsSection = z
  .object({
    enabled: flag(true),
    tail_lines: integer(100, { min: 0 }),
    follow: flag(true),
    /** Empty: no checkpoints (every restart starts from tail_lines). */
    checkpoint_dir: text(),
    exclude_namespaces: nameList(NAMESPACE),
    /** Empty while enabled: one rule matching every namespace. */
    rules: z.array(LogRule).default([]),
  })
  .superRefine(
    (logs, ctx) => {
      if (!logs.enabled) return;
      const add = adder(ctx);
      if (logs.checkpoint_dir.split(/[\\/]/).includes('..')) {
        add(
          ['checkpoint_dir'],
          'must not contain ".."; write a plain path such as /var/lib/kubexa/log-checkpoints',
        );
      }
      checkUniqueIds(logs.rules, ['rules'], add);
    },
    whenValid(['enabled'], ['checkpoint_dir'], ['rules']),
  );

const StateRule = z.object({
  id: text(),
  namespace: nameText(NAMESPACE),
  /** Concrete resources only: a watch cannot watch "*". */
  resources: resourceList('watch'),
  label_selector: text(),
  field_selector: text(),
  /** Unset: collect.state.resync_period. */
  resync_period: durationField().optional(),
});

const StateSection = z.object({
  enabled: flag(true),
  /** "0" turns the periodic resync off. */
  resync_period: duration('5m'),
  /** Strip Secret data/stringData before state leaves the cluster. */
  redact_secrets: flag(false),
  /** Empty while enabled: pods, services, secrets, deployments in every namespace. */
  rules: z.array(StateRule).default([]),
});

/** The Go agent's body cap for a Prometheus page. */
const DEFAULT_SCRAPE_BODY_BYTES = 32 * MIB;

/** Regular expressions, each refused by name when it does not compile. */
function regexList() {
  return z
    .array(
      z.string().refine(
        (pattern) => {
          try {
            new RegExp(pattern, 'u');
            return true;
          } catch {
            return false;
          }
        },
        {
          error: (issue) =>
            `"${String(issue.input)}" is not a regular expression (JavaScript syntax, matched against the whole family name)`,
        },
      ),
    )
    .default([]);
}

const MetricsRule = z.object({
  id: text(),
  namespace: nameText(NAMESPACE),
  /** metrics.k8s.io serves pods and nodes only. */
  resources: resourceList('metrics'),
  pod_names: globList(POD),
  node_names: globList(NODE),
  label_selector: text(),
  field_selector: text(),
  labels: labelMap(),
  pod_interval: durationField().optional(),
  node_interval: durationField().optional(),
});

/**
 * An http(s) URL with a host (a DNS name, IPv4 or [IPv6]), optional credentials and a port from
 * 1 to 65535: what URL.canParse accepts among those, as a pattern the values schema carries too.
 */
const SCRAPE_URL_PATTERN = `^[Hh][Tt][Tt][Pp][Ss]?://(?:[^\\s/?#@[\\]]*@)?(?:${HOST_PATTERN}|\\[[0-9A-Fa-f:.]+\\])(?::${PORT_PATTERN})?(?:[/?#]\\S*)?$`;

const CustomEndpoint = z.object({
  name: text(),
  /** The URL is never quoted back: it may carry credentials. */
  url: markField(
    z
      .string()
      .regex(new RegExp(SCRAPE_URL_PATTERN), { error: 'must be an http:// or https:// URL' })
      .refine((url) => URL.canParse(url), { error: 'must be an http:// or https:// URL' }),
    'credential-url',
  ).prefault(''),
  interval: durationField().optional(),
  extra_labels: labelMap(),
  /** Unset: 10s. */
  timeout: durationField({ positive: true }).optional(),
  max_body_bytes: byteSize(DEFAULT_SCRAPE_BODY_BYTES, 1024),
  /** PEM bundle for https targets; empty: the system's roots. */
  ca_file: text(),
  /** Re-read at every scrape, so a rotated token is used without a restart. */
  bearer_token_file: text(),
  /** Regular expressions over family names, matched whole; deny first, then allow. */
  allow_metrics: regexList(),
  deny_metrics: regexList(),
});

/** Pods whose prometheus.io/* annotations ask to be scraped, at their pod IP. */
const AnnotationDiscovery = z.object({
  enabled: flag(false),
  namespace: nameText(NAMESPACE),
  label_selector: text(),
  pod_names: globList(POD),
  interval: duration('30s', { positive: true }),
  timeout: duration('10s', { positive: true }),
  max_body_bytes: byteSize(DEFAULT_SCRAPE_BODY_BYTES, 1024),
  /** How often the pod list is read again to find new and gone pods. */
  refresh: duration('30s', { positive: true }),
  allow_metrics: regexList(),
  deny_metrics: regexList(),
});

const PROFILE_TYPES = ['cpu', 'heap', 'goroutine'] as const;

/** A pprof endpoint named in the config (annotated pods are found by discovery instead). */
const ProfileTarget = z.object({
  name: text(),
  /** The base of net/http/pprof, e.g. http://10.0.0.7:6060/debug/pprof */
  url: markField(
    z
      .string()
      .regex(new RegExp(SCRAPE_URL_PATTERN), { error: 'must be an http:// or https:// URL' })
      .refine((url) => URL.canParse(url), { error: 'must be an http:// or https:// URL' }),
    'credential-url',
  ).prefault(''),
  namespace: text(),
  pod: text(),
  container: text(),
  workload: text(),
});

const ProfilesSection = z.object({
  enabled: flag(false),
  interval: duration('60s', { positive: true }),
  /** The CPU profile's length (pprof's ?seconds=). */
  cpu_duration: duration('10s', { positive: true }),
  /** For one profile request, on top of cpu_duration for CPU profiles. */
  timeout: duration('10s', { positive: true }),
  types: z.array(z.enum(PROFILE_TYPES)).default([...PROFILE_TYPES]),
  /** Profiles taken at once across all targets (one per target at a time, always). */
  max_concurrent: integer(2, { min: 1, max: 16 }),
  max_profile_bytes: byteSize(8 * MIB, 1024),
  targets: z.array(ProfileTarget).default([]),
  /** Also profile pods annotated kubexa.io/pprof-port (and -path, -container), at their pod IP. */
  annotation_discovery: flag(false),
  namespace: nameText(NAMESPACE),
  label_selector: text(),
});

const MetricsSection = z
  .object({
    enabled: flag(true),
    /** "0": 30s. */
    pod_interval: duration('0'),
    /** "0": 30s. */
    node_interval: duration('0'),
    /** Deprecated (Go agent): with no rules, scrape pods and nodes. */
    kube_metrics: flag(false),
    rules: z.array(MetricsRule).default([]),
    custom_endpoints: z.array(CustomEndpoint).default([]),
    annotation_discovery: AnnotationDiscovery.prefault({}),
    profiles: ProfilesSection.prefault({}),
  })
  .superRefine(
    (metrics, ctx) => {
      if (!metrics.enabled) return;
      const add = adder(ctx);
      checkUniqueIds(metrics.rules, ['rules'], add);
    },
    whenValid(['enabled'], ['rules']),
  );

const EventsSection = z.object({
  enabled: flag(true),
  /** The cluster's Event objects (kubectl get events). */
  kubernetes_events: flag(true),
  /** Pod transitions the agent derives: OOMKilled, CrashLoopBackOff, Evicted, ImagePullBackOff. */
  pod_lifecycle: flag(true),
  exclude_namespaces: nameList(NAMESPACE),
});

const CollectSection = z.object({
  logs: LogsSection.prefault({}),
  state: StateSection.prefault({}),
  metrics: MetricsSection.prefault({}),
  events: EventsSection.prefault({}),
});

// ---------------------------------------------------------------------------------------------
// query, mutate, exec

const QUERY_VERB_RE = /^\s*([Ll][Ii][Ss][Tt]|[Gg][Ee][Tt])\s*$/;

const QueryRule = z.object({
  id: text(),
  /** Empty: every namespace. */
  namespace: patternText(NAMESPACE).default(''),
  resources: resourceList('query'),
  /** Empty: every name. */
  names: patternList(OBJECT),
  /** Empty: list and get. */
  verbs: z
    .array(
      z.string().regex(QUERY_VERB_RE, {
        error: (issue) => `"${String(issue.input)}" is not a query verb; use list or get`,
      }),
    )
    .default([]),
  label_selector: text(),
  field_selector: text(),
});

/** Every field optional: an unset field inherits from collect.state (see normalize.ts). */
const QuerySection = z
  .object({
    enabled: z.boolean().optional(),
    redact_secrets: z.boolean().optional(),
    rules: z.array(QueryRule).optional(),
  })
  .superRefine(
    (query, ctx) => {
      checkUniqueIds(query.rules ?? [], ['rules'], adder(ctx));
    },
    whenValid(['rules']),
  );

export const MUTATE_VERBS = ['create', 'patch', 'update', 'delete', 'scale'] as const;
export const NODE_JOB_VERBS = ['cordon', 'uncordon', 'drain'] as const;

const MutateRule = z.object({
  id: text(),
  /** Required: "*" for every namespace. */
  namespace: requiredPatternText(NAMESPACE, NAMESPACE_REQUIRED_MESSAGE),
  resources: resourceList('mutate'),
  /** Empty: every name. */
  names: patternList(OBJECT),
  verbs: z
    .array(z.enum(MUTATE_VERBS))
    .min(1, 'list the operations to allow, e.g. [scale, patch] (an empty list grants nothing)')
    .prefault([]),
});

const MutateNodeSection = z
  .object({
    enabled: flag(false),
    /** Node name patterns; an empty list matches no node. */
    nodes: patternList(NODE),
    /** Which jobs may run; empty grants nothing and is refused while enabled. */
    verbs: z.array(z.enum(NODE_JOB_VERBS)).default([]),
    /** Upper bound of a drain's timeout. */
    max_timeout_sec: integer(3600, { min: 30, max: 86_400 }),
  })
  .superRefine(
    (node, ctx) => {
      if (node.enabled && node.verbs.length === 0) {
        adder(ctx)(
          ['verbs'],
          'list the node jobs to allow, a subset of [cordon, uncordon, drain] (an empty list grants nothing)',
        );
      }
    },
    whenValid(['enabled'], ['verbs']),
  );

/** mutate.rules are checked whether enabled or not: a wildcard write rule is never valid. */
const MutateSection = z
  .object({
    enabled: flag(false),
    rules: z.array(MutateRule).default([]),
    node: MutateNodeSection.prefault({}),
  })
  .superRefine(
    (mutate, ctx) => {
      checkUniqueIds(mutate.rules, ['rules'], adder(ctx));
    },
    whenValid(['rules']),
  );

const ExecPodRule = z.object({
  id: text(),
  /** Required while a console is enabled: "*" for every namespace. */
  namespace: patternText(NAMESPACE).default(''),
  /** Empty: every pod in the namespace. */
  names: patternList(POD),
  /** Empty: every container of the pod. */
  containers: patternList(CONTAINER),
});

/** Bounds are checked at the root: they are errors only while a console is enabled. */
const ExecPodSection = z.object({
  enabled: flag(false),
  rules: z.array(ExecPodRule).default([]),
  default_shell: text('/bin/sh'),
  /** [10, 86400]. */
  max_session_sec: integer(3600),
  /** [1, 64]; shared by pod and node consoles. */
  max_sessions: integer(4),
  /** 0 = 60, negative = no resume, at most 600; also the node consoles' window. */
  resume_window_sec: integer(0),
});

/** The node-shell helper image, pinned: a tag can be moved to another image, a digest cannot. */
export const HELPER_IMAGE_DIGEST_RE = /^[^\s@]+@sha256:[0-9a-f]{64}$/;
export const HELPER_IMAGE_DIGEST_MESSAGE =
  'must be pinned by digest, e.g. registry.example.com/tools/nsenter@sha256:<64 hex digits>: the helper runs as root on the node, and a tag can be moved to another image';

const ExecNodeSection = z
  .object({
    enabled: flag(false),
    /**
     * No default on purpose: any image with sleep and nsenter. Required while enabled, and always
     * pinned by digest (image@sha256:...): the helper runs as root on the node.
     */
    image: text(),
    /** Empty: the agent's own namespace. */
    namespace: nameText(NAMESPACE),
    /** How long the helper Pod may take to become ready, image pull included. */
    helper_ready_timeout_sec: integer(120, { min: 1, max: 3600 }),
    max_session_sec: integer(3600, { min: 10, max: 86_400 }),
    /** Node name patterns a console may open on; "*" every node. Empty is refused while enabled. */
    nodes: z.array(patternText(NODE)).default(['*']),
    /**
     * The host process whose namespaces nsenter enters. 1 (the host's init) is the standard; a
     * host whose PID 1 cannot be entered (some VMs) names another long-lived host process.
     */
    nsenter_target_pid: integer(1, { min: 1, max: 4_194_304 }),
  })
  .superRefine(
    (node, ctx) => {
      if (!node.enabled || node.nodes.length > 0) return;
      adder(ctx)(
        ['nodes'],
        'list the nodes a console may open on, e.g. ["*"] for every node (an empty list grants nothing)',
      );
    },
    whenValid(['enabled'], ['nodes']),
  )
  .superRefine(
    (node, ctx) => {
      if (!node.enabled || node.image.trim() !== '') return;
      adder(ctx)(
        ['image'],
        'is required while exec.node is enabled: any image with sleep and nsenter',
      );
    },
    whenValid(['enabled'], ['image']),
  )
  .superRefine(
    (node, ctx) => {
      const image = node.image.trim();
      if (image === '' || HELPER_IMAGE_DIGEST_RE.test(image)) return;
      adder(ctx)(['image'], HELPER_IMAGE_DIGEST_MESSAGE);
    },
    whenValid(['image']),
  )
  .superRefine(
    (node, ctx) => {
      if (!node.enabled || node.max_session_sec >= node.helper_ready_timeout_sec) return;
      adder(ctx)(
        ['max_session_sec'],
        `must be at least exec.node.helper_ready_timeout_sec (${node.helper_ready_timeout_sec}): the session clock includes the helper wait`,
      );
    },
    whenValid(['enabled'], ['max_session_sec'], ['helper_ready_timeout_sec']),
  );

const ExecSection = z.object({
  pod: ExecPodSection.prefault({}),
  node: ExecNodeSection.prefault({}),
});

// ---------------------------------------------------------------------------------------------
// buffer, observability, log

const BufferSection = z.object({
  max_memory_bytes: byteSize(64 * MIB, 1),
  /** Empty: memory only. */
  spill_dir: text(),
  max_disk_bytes: byteSize(512 * MIB, 0),
  /** The gateway's ConfigUpdate is clamped to the same range (collector/gateway/settings.ts). */
  batch_size: integer(100, { min: 1, max: 10_000 }),
  flush_interval: duration('1s', { positive: true, max: '1h' }),
});

/** Listeners that would bind the same port: the second one fails at start (EADDRINUSE). */
const ObservabilitySection = z
  .object({
    metrics_addr: listenAddress(':9090', false),
    health_addr: listenAddress(':8080', false),
    /** Empty: no pprof listener. */
    pprof_addr: listenAddress('', true),
  })
  .superRefine(
    (observability, ctx) => {
      const add = adder(ctx);
      const metricsPort = listenPort(observability.metrics_addr);
      const healthPort = listenPort(observability.health_addr);
      // Port 0 is a free port of the system's choosing, never the same one twice.
      if (healthPort === metricsPort && healthPort !== 0) {
        add(
          ['health_addr'],
          `uses port ${healthPort}, as observability.metrics_addr does: give each listener its own port, e.g. ":8080" and ":9090"`,
        );
      }
      if (observability.pprof_addr === '') return;
      const pprofPort = listenPort(observability.pprof_addr);
      if (pprofPort !== 0 && (pprofPort === metricsPort || pprofPort === healthPort)) {
        add(
          ['pprof_addr'],
          `uses port ${pprofPort}, as observability.${pprofPort === metricsPort ? 'metrics_addr' : 'health_addr'} does: give pprof its own port, e.g. "127.0.0.1:6060"`,
        );
      }
    },
    whenValid(['metrics_addr'], ['health_addr'], ['pprof_addr']),
  );

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

const LogSection = z.object({
  level: z.enum(LOG_LEVELS).default('info'),
  format: z.enum(['json', 'console']).default('json'),
});

// ---------------------------------------------------------------------------------------------
// security

export const SECURITY_PROFILES = ['default', 'strict'] as const;

/** One public key the executor accepts signed commands from (docs/security.md). */
const CommandKey = z.object({
  /** The JWS "kid" that selects this key. */
  id: z.string().regex(/\S/, { error: 'must not be empty: the JWS kid' }),
  /** Ed25519 public key, PEM (SPKI). */
  public_key: z.string().regex(/-----BEGIN PUBLIC KEY-----/, {
    error: 'must be an Ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----)',
  }),
});

const SecuritySection = z
  .object({
    /**
     * default: the seed's behaviour. strict: Secret values redacted everywhere, Secrets read as
     * metadata only, every insecure gateway transport option refused.
     */
    profile: z.enum(SECURITY_PROFILES).default('default'),
    /** Keys the executor verifies signed commands with; several during a rotation. */
    command_keys: z.array(CommandKey).default([]),
  })
  .superRefine(
    (security, ctx) => {
      const seen = new Set<string>();
      security.command_keys.forEach((key, index) => {
        if (key.id.trim() === '') {
          adder(ctx)(['command_keys', String(index), 'id'], 'must not be empty: the JWS kid');
        } else if (seen.has(key.id)) {
          adder(ctx)(['command_keys', String(index), 'id'], `repeats the id "${key.id}"`);
        }
        seen.add(key.id);
        if (!key.public_key.includes('BEGIN PUBLIC KEY')) {
          adder(ctx)(
            ['command_keys', String(index), 'public_key'],
            'must be an Ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----)',
          );
        }
      });
    },
    whenValid(['command_keys']),
  );

// ---------------------------------------------------------------------------------------------
// root

function configObjectSchema(options: SchemaOptions) {
  return (
    z
      .object({
        agent: agentSection(options).prefault({}),
        gateway: gatewaySection(options).prefault({}),
        collect: CollectSection.prefault({}),
        query: QuerySection.prefault({}),
        mutate: MutateSection.prefault({}),
        exec: ExecSection.prefault({}),
        buffer: BufferSection.prefault({}),
        observability: ObservabilitySection.prefault({}),
        log: LogSection.prefault({}),
        security: SecuritySection.prefault({}),
      })
      .superRefine(
        ({ security, gateway }, ctx) => {
          if (security.profile !== 'strict') return;
          const add = adder(ctx);
          const why = 'is refused by security.profile strict: connect over verified TLS';
          if (!gateway.tls) add(['gateway', 'tls'], why);
          if (gateway.insecure_skip_verify) add(['gateway', 'insecure_skip_verify'], why);
          if (gateway.allow_insecure) add(['gateway', 'allow_insecure'], why);
        },
        whenValid(['security', 'profile'], ['gateway']),
      )
      // Cross-section rules run as soon as the sections they read are valid, so one pass reports
      // them alongside type errors elsewhere.
      .superRefine(
        ({ collect }, ctx) => {
          const { logs, state, metrics, events } = collect;
          if (!logs.enabled && !state.enabled && !metrics.enabled && !events.enabled) {
            adder(ctx)(
              ['collect'],
              'enable at least one of collect.logs, collect.state, collect.metrics, collect.events',
            );
          }
        },
        whenValid(
          ['collect', 'logs', 'enabled'],
          ['collect', 'state', 'enabled'],
          ['collect', 'metrics', 'enabled'],
          ['collect', 'events', 'enabled'],
        ),
      )
      .superRefine(
        ({ collect, query }, ctx) => {
          // query.rules inherits collect.state.rules when empty, so their ids are checked then too.
          const queryInherits = (query.rules ?? []).length === 0;
          if (collect.state.enabled || queryInherits) {
            checkUniqueIds(collect.state.rules, ['collect', 'state', 'rules'], adder(ctx));
          }
        },
        // Only whether query.rules is empty matters here, so problems inside its entries do not
        // hold this check back.
        whenValid(
          ['collect', 'state', 'enabled'],
          ['collect', 'state', 'rules'],
          ['query', 'rules', '#'],
        ),
      )
      .superRefine(
        ({ exec }, ctx) => {
          if (!exec.pod.enabled && !exec.node.enabled) return; // warnings only: see configWarnings
          const why = exec.pod.enabled
            ? ''
            : " (exec.node is enabled, and node consoles share exec.pod's session settings)";
          const add = adder(ctx);
          checkExecPod(exec.pod, ['exec', 'pod'], (path, message) => {
            add(path, message + why);
          });
        },
        // Entries whose names are malformed are still checked for a missing namespace, so one
        // pass reports both (checkExecPod reads only fields that are strings).
        whenValid(
          ['exec', 'pod', 'enabled'],
          ['exec', 'pod', 'max_session_sec'],
          ['exec', 'pod', 'max_sessions'],
          ['exec', 'pod', 'resume_window_sec'],
          ['exec', 'pod', 'default_shell'],
          ['exec', 'pod', 'rules', '#'],
          ['exec', 'node', 'enabled'],
        ),
      )
  );
}

/** The file as zod reads it, before defaults that depend on other keys are resolved. */
export type RawConfig = z.output<ReturnType<typeof configObjectSchema>>;

/** The config file schema (as the collector reads it): YAML-decoded data in, Config out. */
export const ConfigSchema = configObjectSchema({ requireGatewayCredentials: true }).transform(
  normalizeConfig,
);

/** The same schema without the gateway credentials required, for the executor. */
export const ExecutorConfigSchema = configObjectSchema({
  requireGatewayCredentials: false,
}).transform(normalizeConfig);

/** The agent's configuration: durations in milliseconds, inherited fields resolved. */
export type Config = z.output<typeof ConfigSchema>;
