// The seam between the reflector and the API server: one resource's list and watch. The real
// one is kube-list-watch.ts; tests script it.

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

/** One page of a list; `continue` is set while more pages follow. */
export interface ListPage<T> {
  readonly items: T[];
  readonly resourceVersion: string;
  readonly continue?: string | undefined;
}

export interface ListOptions {
  readonly limit?: number;
  readonly continue?: string | undefined;
}

export interface ListWatch<T> {
  list(signal: AbortSignal, options?: ListOptions): Promise<ListPage<T>>;
  /**
   * Watches from `resourceVersion`; calls `onEvent` per event and resolves when the watch ends
   * (server timeout, idle watchdog, or abort). Rejects with an error carrying `code` (410,
   * 403, ...). An ERROR event (410 inside the stream) rejects with code 410.
   */
  watch(
    resourceVersion: string,
    // A string, not WatchEventType: the type comes off the wire, and the reflector checks it.
    onEvent: (type: string, object: T) => void,
    signal: AbortSignal,
  ): Promise<void>;
}
