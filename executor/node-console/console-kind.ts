// Which console an open asks for: a node console when its target is kind "node", a pod console
// otherwise (pod-consoles.ts refuses any other kind). Without node consoles wired (no cluster
// identity for them), a node open is refused as GATE_DISABLED.
import { RefusalCode, type ConsoleOpen } from '../../proto/index.js';
import type { ConsoleSink } from '../sessions/console-session.js';
import type { OpenOutcome, PodConsoles } from '../sessions/pod-consoles.js';
import type { NodeConsoles } from './node-consoles.js';

interface ConsoleOpener {
  open(request: ConsoleOpen, sink: ConsoleSink): Promise<OpenOutcome>;
}

const NO_NODE_CONSOLES: ConsoleOpener = {
  open: () =>
    Promise.resolve({
      opened: false,
      refusal: {
        code: RefusalCode.REFUSAL_CODE_GATE_DISABLED,
        reason: 'node consoles are off in the executor (exec.node.enabled is false)',
      },
      principal: '',
      rule: '',
    }),
};

export function openerFor(
  request: ConsoleOpen,
  deps: { readonly pods: PodConsoles; readonly nodes?: Pick<NodeConsoles, 'open'> },
): ConsoleOpener {
  if (request.target?.kind !== 'node') return deps.pods;
  return deps.nodes ?? NO_NODE_CONSOLES;
}
