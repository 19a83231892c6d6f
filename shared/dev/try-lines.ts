/*
 * The banner's "Try:" lines, from the cluster file as it is when the stack starts: a request by
 * path to the first Service routed by path, and one with a Host header to the first routed by a
 * host name, so that the printed commands reach a pod whatever the file holds (fixed lines 404
 * once the file is edited).
 */
import { readSnapshotFile } from "../adapters/snapshot-file.js";
import { buildModel } from "../core/model/build-model.js";
import type { HttpRoute } from "../core/model/model.js";
import { parseRenderOptions } from "../core/settings/options.js";

type Routed<K extends HttpRoute["match"]["kind"]> = HttpRoute & { match: Extract<HttpRoute["match"], { kind: K }> };

const plain = (r: HttpRoute) => r.action !== "https-redirect";

/** `host`: the address of the node the lines ask. */
export function tryLines(clusterFile: string, httpPort: number, host = "127.0.0.1"): string[] {
  let routes: readonly HttpRoute[];
  try {
    routes = buildModel(readSnapshotFile(clusterFile, "--cluster"), parseRenderOptions({})).httpRoutes;
  } catch {
    // The stack says what is wrong with the file where it loads it; the banner just has no lines.
    return [];
  }
  const byPath = routes.find((r): r is Routed<"path"> => r.match.kind === "path" && plain(r));
  const byHost = routes.find((r): r is Routed<"host"> => r.match.kind === "host" && !r.match.host.wildcard && plain(r));
  return [
    ...(byPath ? [`  curl http://${host}:${httpPort}${byPath.match.prefix === "/" ? "" : byPath.match.prefix}/`] : []),
    ...(byHost ? [`  curl -H 'Host: ${byHost.match.host.name}' http://${host}:${httpPort}/`] : []),
  ];
}
