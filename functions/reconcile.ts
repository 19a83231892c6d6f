import { extname } from "node:path";
import { Worker } from "node:worker_threads";
import * as functions from "@google-cloud/functions-framework";
import { answerFrameworkRejections } from "../shared/adapters/framework-rejections.js";
import { startFunctionThread } from "../shared/adapters/function-thread.js";
import { createLogger } from "../shared/adapters/log.js";
import { eventHint } from "../shared/app/event-hint.js";
import { acknowledgeUnreadableDelivery } from "../shared/app/unreadable-delivery.js";

/**
 * CloudEvent function `reconcile`: cluster → object store → agents, on a worker thread
 * (functions/reconcile-worker.ts). The worker sits beside this module under the same extension:
 * dist/functions/*.js from tsc, dist/bundle/*.mjs from rolldown. Bad settings stop the instance
 * at start; a worker that dies later stops it too, with the framework's exit code for a crash.
 * An exception a pass leaves uncaught (a timer's, an emitter's without a listener) stops it as
 * well, where the framework's domain would have answered 500 and kept the instance: a pipeline
 * in an unknown state should not go on publishing, and the Broker retries on the next instance.
 */
const log = createLogger("reconcile");
// Of the process's command-line flags, only the one that matters on the thread: a worker would
// take them all, and it refuses --input-type (an instance started by `node -e`) and would run
// --import preloads again (the local stack's exit-with-parent guard). NODE_OPTIONS still applies.
const execArgv = process.execArgv.includes("--enable-source-maps") ? ["--enable-source-maps"] : [];
const here = new URL(import.meta.url);
const worker = new Worker(new URL(`./reconcile-worker${extname(here.pathname)}`, here), { execArgv });
const thread = await startFunctionThread(worker, (err) => {
  log.fatal({ err }, "the reconcile pipeline is gone; the instance stops");
  setImmediate(() => process.exit(16));
});
// Only what the pipeline reads crosses to the thread: a structured clone of any data the event
// carried could fail on its depth alone, and cost its size every time.
// While a pass runs or waits on the thread, an event joins the next one
// (docs/design.md#the-reconcile-function) and is answered here, 204, without waiting for the
// thread's turn.
functions.cloudEvent("reconcile", (event: functions.CloudEvent<unknown>) => {
  const hint = eventHint(event);
  if (!thread.busy) return thread.call(hint);
  thread.join(hint);
});
answerFrameworkRejections(acknowledgeUnreadableDelivery(log));
