/* Whether a config may go live on this node: `haproxy -c` and the node's own preconditions. */

import type { CheckOptions, CheckResult } from "../adapters/haproxy/check.js";
import type { Logger } from "../adapters/log.js";
import { configDescriptors, descriptorsNeeded, type NodeFiles } from "../core/model/descriptors.js";
import { STATS_PASSWORD_REF, STATS_PASSWORD_VARIABLE } from "../core/render/template-views.js";
import type { AgentError } from "./node-state.js";
import { type HaproxyEnv, unsetNodeVariables } from "../core/haproxy-config/environment.js";
import { errorMessage } from "../core/error-message.js";

/** `unavailable`: the check could not run to a verdict (timeout, spawn or temp-dir failure, killed): nothing is known about the config. */
export type Admission =
  | { ok: true }
  | { ok: false; stage: AgentError["stage"]; message: string; unavailable?: boolean };

/** `haproxy -c`, as adapters/haproxy/check.ts runs it; injected so a test can decide the verdict and its timing. */
export type ConfigChecker = (text: string, opts: CheckOptions) => Promise<CheckResult>;

export interface AdmissionOptions {
  check: ConfigChecker;
  haproxyBin: string;
  /** Longest the check may take. */
  timeoutMs: number;
  /** Where the check's temporary config goes: beside the live one, so relative paths resolve alike. */
  workDir: string;
  log: Logger;
  /** HAProxy's environment, its `haproxy -c` too (default: the agent's own, which HAProxy inherits). */
  env?: HaproxyEnv;
  /** The descriptors HAProxy may open on this node, or null when they cannot be told (then not checked). */
  openFiles?: () => NodeFiles | null;
}

/** Never rejects; nothing is recorded. */
export async function admitConfig(
  config: { key: string; config: string },
  options: AdmissionOptions,
  signal?: AbortSignal,
): Promise<Admission> {
  const env = options.env ?? process.env;
  if (config.config.includes(STATS_PASSWORD_REF) && !env[STATS_PASSWORD_VARIABLE]) {
    return {
      ok: false,
      stage: "check",
      message: `the config protects the stats page (--stats-user) but ${STATS_PASSWORD_VARIABLE} is not set for HAProxy on this node`,
    };
  }
  // HAProxy makes an unset one empty, and `haproxy -c` passes: a bind on every interface, a socket at the root.
  const unset = unsetNodeVariables(config.config, env);
  if (unset.length > 0)
    return {
      ok: false,
      stage: "check",
      message: `the config takes ${unset.map((n) => `\${${n}}`).join(", ")} from HAProxy's environment, which does not set ${unset.length > 1 ? "them" : "it"} on this node (--node-address sets SERVICELB_NODE_ADDRESS, --gateway-cert-dir SERVICELB_GATEWAY_CERT_DIR)`,
    };
  const files = options.openFiles?.() ?? null;
  if (files !== null) {
    const count = configDescriptors(config.config);
    const need = descriptorsNeeded(count, files.cpus);
    // `haproxy -c` passes such a config; HAProxy would fail to reload on it, and go on failing.
    if (need > files.limit)
      return {
        ok: false,
        stage: "check",
        message: `the config needs ${need} file descriptors (${count.own} for its listeners and servers, ${need - count.own} for HAProxy itself), more than HAProxy may open on this node (its hard limit, ulimit -Hn: ${files.limit}): HAProxy would not start or reload on it`,
      };
  }
  let check: CheckResult;
  try {
    check = await options.check(config.config, {
      haproxyBin: options.haproxyBin,
      env,
      timeoutMs: options.timeoutMs,
      workDir: options.workDir,
      signal,
    });
  } catch (err) {
    return { ok: false, stage: "check", unavailable: true, message: `haproxy -c could not run: ${errorMessage(err)}` };
  }
  if (!check.ok && !check.alerted)
    return {
      ok: false,
      stage: "check",
      unavailable: true,
      message: `haproxy -c could not run: ${check.errors.join("; ")}`,
    };
  if (!check.ok)
    return { ok: false, stage: "check", message: `haproxy -c rejected the config: ${check.errors.join("; ")}` };
  if (check.warnings.length > 0)
    options.log.warn({ key: config.key, warnings: check.warnings }, "haproxy -c accepted the config with warnings");
  return { ok: true };
}
