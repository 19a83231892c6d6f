/*
 * The three everyday changes, made to a rendered config's text as the renderer would make them, for
 * measuring what a change costs to publish and to pull (bench/store-delta, the chunked-config tests):
 * an endpoint moved (one server line's address), a Service added (its backend, and its lines in the
 * route maps), an annotation changed (one more setting line in a backend).
 */
import { loadTemplates } from "../shared/adapters/templates.js";
import { buildModel } from "../shared/core/model/build-model.js";
import { parseRenderOptions } from "../shared/core/settings/options.js";
import { Renderer } from "../shared/core/render/render.js";
import { syntheticSnapshot } from "./synthetic.js";

export type Change = "endpoint moved" | "Service added" | "annotation changed";
export const CHANGES: readonly Change[] = ["endpoint moved", "Service added", "annotation changed"];

export function renderConfig(services: number): string {
  const rendered = new Renderer(loadTemplates()).renderChunks(
    buildModel(syntheticSnapshot(services, 10), parseRenderOptions({})),
  );
  return Buffer.concat(rendered.chunks).toString("utf8");
}

/** `config` with `change` made to the Service at about `at` (0..1) of the config. */
export function changed(config: string, change: Change, at = 0.5, n = 1): string {
  const backend = config.indexOf("\nbackend ", Math.floor(config.length * at * 0.9)) + 1;
  const lineEnd = config.indexOf("\n", backend);
  if (change === "endpoint moved") {
    const server = config.indexOf("    server s1 ", backend);
    const end = config.indexOf("\n", server);
    return `${config.slice(0, server)}    server s1 10.250.${n % 250}.${(n * 7) % 250}:8080${config.slice(end)}`;
  }
  if (change === "annotation changed")
    return `${config.slice(0, lineEnd + 1)}    timeout server ${n + 1}s\n${config.slice(lineEnd + 1)}`;
  const name = `default_svc-new-${n}_80`;
  const block = [
    `backend ${name} from http_defaults`,
    "    balance roundrobin",
    ...Array.from({ length: 10 }, (_, j) => `    server s${j + 1} 10.251.${n % 250}.${j}:8080`),
    "",
    "",
  ].join("\n");
  const hosts = config.indexOf("#> maps/http.hosts.map\n");
  const hostLine = config.indexOf("\n", hosts + 30) + 1;
  const withBackend = `${config.slice(0, backend)}${block}${config.slice(backend, hostLine)}`;
  return `${withBackend}#| svc-new-${n}.example.com ${name}\n${config.slice(hostLine)}`;
}
