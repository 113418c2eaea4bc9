// Which new payload kinds the gateway of the current session can decode. An old gateway could
// not, so these kinds are sent only after an opt-in, in one of two forms:
// - HandshakeResponse.accepted_payloads (the wire field for it): the AgentMessage payload field
//   names, "kube_event" and "pod_lifecycle";
// - for gateways written before that field, a watcher with a reserved id in the config (the
//   handshake's snapshot or a ConfigUpdate): OPT_IN_LIFECYCLE, OPT_IN_EVENTS.
// Each accepted handshake starts over from what that gateway says: a session with a gateway
// that opts into nothing (an older one after a rollback) gets none of these kinds.
import type { ConfigSnapshot } from '../../../proto/index.js';

/** Watcher ids a gateway without accepted_payloads puts in its config to opt in. */
export const OPT_IN_LIFECYCLE = 'kubexa.io/pod-lifecycle-events';
export const OPT_IN_EVENTS = 'kubexa.io/kube-events';

/** accepted_payloads values: AgentMessage's payload field names. */
export const PAYLOAD_POD_LIFECYCLE = 'pod_lifecycle';
export const PAYLOAD_KUBE_EVENT = 'kube_event';

export interface EventsDelivery {
  readonly lifecycle: boolean;
  readonly events: boolean;
}

type Watchers = ConfigSnapshot['watchers'];

export class PayloadOptIn {
  #accepted: ReadonlySet<string> = new Set();
  #watchers: EventsDelivery = { lifecycle: false, events: false };

  /** A new session was accepted: its accepted_payloads replace every earlier opt-in. */
  onHandshake(acceptedPayloads: readonly string[]): EventsDelivery {
    this.#accepted = new Set(acceptedPayloads);
    this.#watchers = { lifecycle: false, events: false };
    return this.delivery();
  }

  /**
   * A config (snapshot or update) of the current session: only one carrying watchers changes
   * the watcher opt-in (an update with ingest rules only leaves it alone).
   */
  onWatchers(watchers: Watchers): EventsDelivery {
    if (watchers.length > 0) {
      this.#watchers = {
        lifecycle: watchers.some((w) => w.id === OPT_IN_LIFECYCLE),
        events: watchers.some((w) => w.id === OPT_IN_EVENTS),
      };
    }
    return this.delivery();
  }

  delivery(): EventsDelivery {
    return {
      lifecycle: this.#accepted.has(PAYLOAD_POD_LIFECYCLE) || this.#watchers.lifecycle,
      events: this.#accepted.has(PAYLOAD_KUBE_EVENT) || this.#watchers.events,
    };
  }
}
