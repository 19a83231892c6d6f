/*
 * The one error every store operation fails with, whichever blob store is underneath: callers
 * decide by `transient` whether to retry later (a pass fails and the Broker retries it; an agent
 * tries again at its next poll) or to skip what they asked for (a config that does not verify).
 */

export class StoreError extends Error {
  override readonly name = "StoreError";
  /** True when retrying later may succeed: store unreachable, timed out, 5xx or throttled. */
  readonly transient: boolean;

  constructor(message: string, options: { transient: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.transient = options.transient;
  }
}

/** An error as a message says it: its text, then its code and HTTP status (an SDK error has both). */
export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const details = [typeof code === "string" ? code : error.name, status ? `HTTP ${status}` : ""]
    .filter(Boolean)
    .join(", ");
  return error.message ? `${error.message} (${details})` : details;
}
