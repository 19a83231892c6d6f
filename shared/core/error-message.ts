/*
 * A thrown value as the text of a message: what a log field, a status report or another error's
 * message carries. Anything may be thrown; only an Error has a message of its own.
 */

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
