/**
 * Socket error codes that say nothing about the request itself: the next attempt may succeed.
 * ENOTFOUND counts: in a cluster, DNS for a just-created Service or a restarted CoreDNS
 * answers "not found" for a while.
 */
export const TRANSIENT_NETWORK_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
  "ERR_STREAM_PREMATURE_CLOSE",
]);
