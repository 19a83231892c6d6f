import { extname } from "node:path";
import { Worker } from "node:worker_threads";
import * as functions from "@google-cloud/functions-framework";
import { answerFrameworkRejections } from "../shared/adapters/framework-rejections.js";
import { startFunctionThread } from "../shared/adapters/function-thread.js";
import { createLogger } from "../shared/adapters/log.js";
import { acknowledgeUnreadableDelivery } from "../shared/app/cloudevents.js";

/**
 * CloudEvent function `reconcile`: cluster → object store → agents, on a worker thread
 * (functions/reconcile-worker.ts). The worker sits beside this module under the same extension:
 * dist/functions/*.js from tsc, dist/bundle/*.mjs from rolldown. Bad settings stop the instance
 * at start; a worker that dies later stops it too, with the framework's exit code for a crash.
 */
const log = createLogger("reconcile");
// Of the process's Node flags, only the one that matters on the thread: a worker would otherwise
// take them all, `-e` and `--import` included (an instance started from `node -e` would run its
// script again there).
const execArgv = process.execArgv.includes("--enable-source-maps") ? ["--enable-source-maps"] : [];
const worker = new Worker(new URL(`./reconcile-worker${extname(import.meta.url)}`, import.meta.url), { execArgv });
const thread = await startFunctionThread(worker, (err) => {
  log.fatal({ err }, "the reconcile pipeline is gone; the instance stops");
  setImmediate(() => process.exit(16));
});
// Once started, the framework's server keeps the instance alive; the worker alone does not.
worker.unref();
functions.cloudEvent("reconcile", (event: functions.CloudEvent<unknown>) => thread.call(event));
answerFrameworkRejections(acknowledgeUnreadableDelivery(log));
