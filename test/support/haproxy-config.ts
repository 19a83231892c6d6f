/* Config texts as the agent takes them: parsed once (core/haproxy-config/parse.ts), then decided on. */

import { type ApplyDecision, decideApply } from "../../shared/agent/decide.js";
import { type HaproxyConfig, parseConfig } from "../../shared/core/haproxy-config/parse.js";

/** The parsed value of a config that must parse. */
export function parsed(text: string): HaproxyConfig {
  const config = parseConfig(text);
  if ("error" in config) throw new Error(`the config does not parse: ${config.error}`);
  return config;
}

/** decideApply on two texts, each parsed as the agent parses them. */
export function decideTexts(live: { text: string; known: boolean } | null, next: string): ApplyDecision {
  return decideApply(live && { config: parseConfig(live.text), known: live.known }, parseConfig(next));
}
