/*
 * Values a node gives its config through HAProxy's environment. HAProxy expands `${NAME}` inside
 * double quotes while it parses (configuration manual §2.3), so one published config — the same
 * bytes, the same digest — can bind each node's own address and keep each node's own sockets:
 * several nodes on one machine (the local stack's --nodes) or a node address from the downward
 * API. The renderer quotes a setting that names a variable (nodeWord); the agent reads such a word
 * as its HAProxy does (expandWord), with the environment it gives HAProxy.
 * Pure: text in, value out.
 */

/** The variable the agent sets to its --node-address in HAProxy's environment. */
export const NODE_ADDRESS_VARIABLE = "SERVICELB_NODE_ADDRESS";
/** The variable the agent sets to the directory of the config HAProxy runs, for a config's per-node paths. */
export const CONFIG_DIR_VARIABLE = "SERVICELB_CONFIG_DIR";
/** The variable the agent sets to its --gateway-cert-dir: where a Gateway listener's certificate files are. */
export const GATEWAY_CERT_DIR_VARIABLE = "SERVICELB_GATEWAY_CERT_DIR";

/** The environment HAProxy runs with, as process.env types it. */
export type HaproxyEnv = Readonly<Record<string, string | undefined>>;

/** A setting value that names one variable, e.g. `${SERVICELB_NODE_ADDRESS}`. */
export const VARIABLE = /\$\{[A-Za-z_][A-Za-z0-9_]*\}/;

/**
 * A setting's word as the config says it: double-quoted when it names a variable (HAProxy expands
 * only there), else as it is, so a config that names none reads as it always did.
 */
export function nodeWord(value: string): string {
  return VARIABLE.test(value) ? `"${value}"` : value;
}

/**
 * One config word as HAProxy reads it: quotes removed, `$NAME`, `${NAME}` and `${NAME-default}`
 * expanded inside double quotes (an unset variable is empty, as HAProxy makes it), single quotes
 * and backslash-escaped characters kept literally.
 */
export function expandWord(word: string, env: HaproxyEnv): string {
  let out = "";
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < word.length; i++) {
    const c = word[i]!;
    if (c === "\\" && quote !== "'" && i + 1 < word.length) {
      out += word[++i];
    } else if ((c === '"' || c === "'") && (quote === null || quote === c)) {
      quote = quote === null ? c : null;
    } else if (c === "$" && quote === '"') {
      const m = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/.exec(word.slice(i));
      if (!m) {
        out += c;
        continue;
      }
      const name = m[1] ?? m[3]!;
      out += env[name] ?? m[2] ?? "";
      i += m[0].length - 1;
    } else {
      out += c;
    }
  }
  return out;
}

/** Variables of servicelb's own a config names without a default. */
const NODE_VARIABLE = /\$\{(SERVICELB_[A-Z0-9_]+)\}/g;

/**
 * The SERVICELB_ variables a config takes from HAProxy's environment that `env` leaves unset or
 * empty, each once: HAProxy would run with them empty.
 */
export function unsetNodeVariables(text: string, env: HaproxyEnv): string[] {
  const unset = new Set<string>();
  for (const m of text.matchAll(NODE_VARIABLE)) if (!env[m[1]!]) unset.add(m[1]!);
  return [...unset];
}
