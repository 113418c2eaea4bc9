/** The contract of every long-lived component: started in order, closed in reverse. */
export interface Service {
  readonly name: string;
  /** Resolves when the service is ready; it keeps running until `signal` aborts or close(). */
  start(signal: AbortSignal): Promise<void>;
  /** Graceful and idempotent. */
  close(): Promise<void>;
}

/**
 * Starts services one after another and returns a function that closes the started ones in
 * reverse order. If a start fails, what already started is closed before the error is rethrown.
 */
export async function startServices(
  services: readonly Service[],
  signal: AbortSignal,
): Promise<() => Promise<void>> {
  const started: Service[] = [];
  const closeAll = async (): Promise<void> => {
    const errors: unknown[] = [];
    for (const service of [...started].reverse()) {
      try {
        await service.close();
      } catch (err: unknown) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, 'services failed to close');
  };
  for (const service of services) {
    try {
      await service.start(signal);
    } catch (err: unknown) {
      await closeAll().catch(() => undefined);
      throw err;
    }
    started.push(service);
  }
  return closeAll;
}
