// The navigation: one entry per data kind. A later feature plugs its view in by giving its entry
// a component; until then the entry shows what it will hold and which issue brings it.
import type { ComponentType } from 'preact';
import type { Overview } from '../../api-types.js';
import { AgentsView } from './views/agents.js';
import { ConsolesView } from './views/consoles.js';
import { LogsView } from './views/logs.js';
import { NodesView } from './views/nodes.js';
import { MetricsView } from './views/metrics.js';
import { QueryView } from './views/query.js';
import { EventsView } from './views/events.js';
import { StateView } from './views/state.js';

/** What every view receives from the frame. */
export interface ViewProps {
  /** The last overview the gateway answered, undefined before the first. */
  readonly overview: Overview | undefined;
  /** False while the gateway does not answer: views keep their data and mark it stale. */
  readonly reachable: boolean;
}

export interface ViewDefinition {
  readonly id: string;
  readonly title: string;
  /** One glyph for the navigation. */
  readonly icon: string;
  /** The message kinds this view shows, for the count beside its name. */
  readonly kinds: readonly string[];
  /** A count of its own instead (the Logs view counts lines, not batches). */
  readonly count?: (overview: Overview) => number;
  readonly component?: ComponentType<ViewProps>;
  /** For a placeholder: what the view will show. */
  readonly planned?: string;
}

export const VIEWS: readonly ViewDefinition[] = [
  {
    id: 'agents',
    title: 'Agents',
    icon: '◉',
    kinds: [],
    count: (o) => o.sessions.filter((s) => s.state === 'connected').length,
    component: AgentsView,
  },
  {
    id: 'logs',
    title: 'Logs',
    icon: '≡',
    kinds: ['logs'],
    count: (o) => o.logs.totalLines,
    component: LogsView,
  },
  {
    id: 'state',
    title: 'State',
    icon: '◇',
    kinds: ['state'],
    component: StateView,
  },
  {
    id: 'events',
    title: 'Events',
    icon: '⚑',
    kinds: ['kubeEvent', 'podLifecycle'],
    component: EventsView,
  },
  {
    id: 'metrics',
    title: 'Metrics',
    icon: '∿',
    kinds: ['kubeMetrics', 'prometheusMetrics'],
    component: MetricsView,
  },
  {
    id: 'query',
    title: 'Query',
    icon: '?',
    kinds: ['resourceQueryResult', 'catalog'],
    component: QueryView,
  },
  {
    id: 'consoles',
    title: 'Consoles',
    icon: '›_',
    kinds: ['auditRecord'],
    component: ConsolesView,
  },
  {
    id: 'nodes',
    title: 'Nodes',
    icon: '▦',
    kinds: ['nodeJobEvent'],
    component: NodesView,
  },
];

export const DEFAULT_VIEW = 'logs';
