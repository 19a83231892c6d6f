/*
 * The reconcile pipeline, on the worker thread that functions/reconcile.ts starts
 * (shared/adapters/function-thread.ts says why it is not on the framework's thread). Bad
 * settings throw here, and the instance stops at start.
 */

import { parentPort } from "node:worker_threads";
import { serveOnThread } from "../shared/adapters/function-thread.js";
import { createLogger } from "../shared/adapters/log.js";
import { tracerFromEnv } from "../shared/adapters/stage-trace.js";
import { loadFunctionSettings } from "../shared/app/function-options.js";
import { tracedReconciler } from "../shared/app/pass-trace.js";
import { createReconcileHandler, createReconciler } from "../shared/app/reconcile.js";

if (!parentPort) throw new Error("reconcile-worker runs as functions/reconcile.ts's worker thread, not on its own");
const log = createLogger("reconcile");
const settings = loadFunctionSettings();
// bench/e2e's stage trace, when SERVICELB_TRACE_FILE names a file: wrapped around the parts, never inside them.
const trace = tracerFromEnv(process.env)?.("reconcile");
const reconciler = trace ? tracedReconciler(settings, { log }, trace) : createReconciler(settings, { log });
const handle = createReconcileHandler(reconciler);
serveOnThread(parentPort, (event) => handle(event as Parameters<typeof handle>[0]), reconciler);
