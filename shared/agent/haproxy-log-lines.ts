/**
 * The level at which one of HAProxy's stderr lines goes into the agent's log. HAProxy tags its
 * own transitions WARNING or ALERT even when the agent caused them on purpose: every endpoint
 * move puts a slot into maintenance, every reload ends the former worker, every stop ends the
 * current one. Those are routine (info); WARN and ERROR stay for what someone must look at.
 */
export type LineLevel = "debug" | "info" | "warn" | "error";

// Every reload makes the old worker list each of its proxies as stopped: one line per backend.
const RELOAD_CHATTER = /: Proxy \S+ stopped \(cumulated conns|: Stopping (proxy|frontend|backend) /;

/** Transitions the agent or a deliberate stop causes. */
const ROUTINE = [
  // The runtime API frees or fills a slot (make before break; a slot is drained before it is freed).
  /: Server \S+ enters drain state\b/,
  /: Server \S+ is going DOWN for maintenance\b/,
  /: Server \S+ .*is UP\/READY \(leaving forced maintenance\)/,
  // A health check that passes again is good news.
  /: Server \S+ is UP, reason:/,
  // After a reload, the old worker leaves once its connections are done.
  /: Former worker \(\d+\) exited with code 0\b/,
  /: Reexecuting Master process/,
  /: Exiting Master process/,
  // A stop (the agent's SIGUSR1: code 0) or asked to stop (SIGINT 130, SIGTERM 143): not a crash.
  /: Current worker \(\d+\) exited with code (0|130|143)\b/,
  /: All workers exited\. Exiting\.\.\. \((0|130|143)\)/,
];

/**
 * A backend with no server up answers 503: its Service has no ready endpoint. That is the
 * application's state, worth a warning, not an error of the load balancer.
 */
const NO_SERVER = /: backend '\S+' has no server available!/;

export function haproxyLineLevel(line: string): LineLevel {
  if (RELOAD_CHATTER.test(line)) return "debug";
  if (ROUTINE.some((re) => re.test(line))) return "info";
  if (NO_SERVER.test(line)) return "warn";
  const tag = /^\[(\w+)\]/.exec(line)?.[1];
  if (tag === "ALERT" || tag === "EMERG") return "error";
  if (tag === "WARNING") return "warn";
  return "info";
}

const TAG_LEVEL: Readonly<Record<string, LineLevel>> = {
  EMERG: "error",
  ALERT: "error",
  WARNING: "warn",
  NOTICE: "info",
};

/**
 * The line as logged at `level`: HAProxy's own tag is dropped where it says another level (a
 * routine `[WARNING]` logged at info), so that no record reads as two levels at once.
 */
export function haproxyLogText(line: string, level: LineLevel): string {
  const tag = /^\[(\w+)\]\s*/.exec(line);
  return tag && TAG_LEVEL[tag[1]!] !== level ? line.slice(tag[0].length) : line;
}
