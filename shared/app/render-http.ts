import type { Request, Response } from "@google-cloud/functions-framework";
import { SnapshotError, parseSnapshot, type Snapshot } from "../core/kubernetes/snapshot.js";
import { OptionsError } from "../core/settings/settings.js";
import { nodeFiles } from "../core/haproxy-config/pattern-files.js";
import { ClusterError } from "../adapters/cluster-error.js";
import { NoKubeconfigError } from "../adapters/kube-config.js";
import { checkConfig } from "../adapters/haproxy/check.js";
import { readLiveSnapshot } from "../adapters/snapshot-source.js";
import type { Logger } from "../adapters/log.js";
import type { FunctionSettings } from "./function-options.js";
import { RenderContext, renderJson } from "./render-context.js";
import { renderMetrics } from "./render-metrics.js";

function answerError(res: Response, status: number, error: string): void {
  res
    .status(status)
    .type("application/json")
    .send(`${JSON.stringify({ error })}\n`);
}

/** `?format=files`: what `render --out` writes, the files the agent would put on disk, by path. */
function filesJson(config: string): string {
  const files = nodeFiles(config);
  // The renderer wrote the section; a split that fails is a bug, answered 500 like any other.
  if ("error" in files) throw new Error(`the rendered config's ${files.error}`);
  return `${JSON.stringify({ files: Object.fromEntries(files.map((f) => [f.path, f.text])) })}\n`;
}

/**
 * The manual dry run over HTTP: POST a snapshot (JSON or YAML List) to render it, GET to render
 * the live cluster. Publishes nothing. `?format=json` adds warnings and stats, `?format=files` gives
 * the files the agent would write (haproxy.cfg, maps/, patterns/); `?check=1` runs
 * `haproxy -c` where HAProxy is installed; `GET /metrics` gives the warnings as Prometheus metrics.
 */
export function createRenderHandler(
  settings: FunctionSettings,
  log: Logger,
): (req: Request, res: Response) => Promise<void> {
  const ctx = new RenderContext(settings.options, { template: settings.template });
  return async (req, res) => {
    if (req.method !== "GET" && req.method !== "POST") {
      res.setHeader("Allow", "GET, POST");
      answerError(res, 405, `method ${req.method} not allowed: POST a snapshot or GET the live cluster`);
      return;
    }
    // GET /metrics: the live cluster's render warnings, for Prometheus.
    const metrics = req.method === "GET" && req.path === "/metrics";
    let snapshot: Snapshot;
    try {
      if (req.method === "POST") {
        const declared = Number(req.headers["content-length"] ?? 0);
        const body = req.rawBody ?? Buffer.alloc(0);
        if (declared > settings.maxBodyBytes || body.length > settings.maxBodyBytes) {
          answerError(res, 413, `snapshot is larger than ${settings.maxBodyBytes} bytes (SERVICELB_MAX_BODY_BYTES)`);
          return;
        }
        if (body.length === 0) {
          answerError(res, 400, "empty body: POST a Kubernetes List (kubectl get services,endpointslices -A -o json)");
          return;
        }
        snapshot = parseSnapshot(body.toString("utf8"));
      } else {
        snapshot = await readLiveSnapshot(
          settings.options,
          { kubeconfig: settings.kubeconfig, context: settings.context },
          ctx.liveItems,
        );
      }
      const result = ctx.render(snapshot);
      if (metrics) {
        res.status(200).type("text/plain; version=0.0.4; charset=utf-8").send(renderMetrics(result));
        return;
      }
      if (req.query.check === "1" || req.query.check === "true") {
        // No HAProxy on this instance (the function image has none), or it hung: not the config's fault.
        const check = await checkConfig(result.bytes).catch((err: Error) => err);
        if (check instanceof Error) {
          answerError(res, 501, `?check=1 cannot run here: ${check.message}`);
          return;
        }
        if (!check.ok) {
          answerError(res, 422, `haproxy -c rejected the rendered config: ${check.errors.join("; ")}`);
          return;
        }
      }
      log.info(
        { method: req.method, revision: result.revision, ...result.stats, warnings: result.warnings.length },
        "dry run rendered",
      );
      if (req.query.format === "json") res.status(200).type("application/json").send(renderJson(result));
      else if (req.query.format === "files") res.status(200).type("application/json").send(filesJson(result.config));
      else res.status(200).type("text/plain; charset=utf-8").send(result.bytes);
    } catch (err) {
      if (err instanceof NoKubeconfigError) {
        // The server's setup, not the request: the caller can still POST a snapshot.
        answerError(
          res,
          501,
          `GET renders the live cluster, and this server has no kubeconfig (it looked in ${err.looked}): set SERVICELB_KUBECONFIG in its environment, or POST a snapshot (kubectl get services,endpointslices -A -o json)`,
        );
      } else if (err instanceof SnapshotError || err instanceof OptionsError) {
        answerError(res, 400, err.message);
      } else if (err instanceof ClusterError) {
        log.warn({ err: err.message, kind: err.kind }, "dry run could not list the cluster");
        answerError(res, err.transient ? 503 : 502, err.message);
      } else {
        // The details (paths, template internals) go to the log, not to the caller.
        log.error({ err }, "dry run failed");
        answerError(res, 500, "the dry run failed; the function's log has the details");
      }
    }
  };
}
