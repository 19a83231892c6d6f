import { optionSpecs, parseRenderOptions, pickRenderOptions, type RenderOptions } from "../core/options.js";
import { mergeOptionSources } from "../adapters/option-sources.js";

/** Settings only the deployed functions read (same SERVICELB_* convention as the render options). */
export interface FunctionSettings {
  options: RenderOptions;
  template?: string;
  kubeconfig?: string;
  context?: string;
  /** Largest snapshot the HTTP dry run accepts. */
  maxBodyBytes: number;
}

const EXTRA_KEYS = ["template", "kubeconfig", "context", "maxBodyBytes"];
const DEFAULT_MAX_BODY = 32 * 1024 * 1024;

/**
 * Reads the functions' settings from SERVICELB_* variables and the optional SERVICELB_CONFIG
 * file. Called at start-up, so a bad setting stops the instance with a message naming it
 * instead of failing every request.
 */
export function loadFunctionSettings(env: Readonly<Record<string, string | undefined>> = process.env): FunctionSettings {
  const merged = mergeOptionSources({ keys: [...Object.keys(optionSpecs), ...EXTRA_KEYS], configFile: env.SERVICELB_CONFIG, env });
  const maxBody = merged.maxBodyBytes === undefined ? DEFAULT_MAX_BODY : Number(merged.maxBodyBytes);
  if (!Number.isInteger(maxBody) || maxBody < 1024) throw new Error(`SERVICELB_MAX_BODY_BYTES: ${String(merged.maxBodyBytes)} is not a whole number of bytes ≥ 1024`);
  return {
    options: parseRenderOptions(pickRenderOptions(merged)),
    template: merged.template as string | undefined,
    kubeconfig: merged.kubeconfig as string | undefined,
    context: merged.context as string | undefined,
    maxBodyBytes: maxBody,
  };
}
