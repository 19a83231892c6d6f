/** A request the agent's HTTP API refuses: answered with this status, the message as `{error}`, and these headers. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}
