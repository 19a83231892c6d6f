import * as functions from "@google-cloud/functions-framework";
import { answerFrameworkRejections } from "../shared/adapters/framework-rejections.js";
import { createLogger } from "../shared/adapters/log.js";
import { tracerFromEnv } from "../shared/adapters/stage-trace.js";
import { loadFunctionSettings } from "../shared/app/function-options.js";
import { acknowledgeUnreadableDelivery } from "../shared/app/cloudevents.js";
import { createReconcileHandler, createReconciler } from "../shared/app/reconcile.js";

/** CloudEvent function `reconcile`: cluster → object store → agents. Bad settings stop the instance at start. */
const log = createLogger("reconcile");
const trace = tracerFromEnv(process.env)?.("reconcile");
functions.cloudEvent("reconcile", createReconcileHandler(createReconciler(loadFunctionSettings(), { log, trace })));
answerFrameworkRejections(acknowledgeUnreadableDelivery(log));
