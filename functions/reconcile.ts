import * as functions from "@google-cloud/functions-framework";
import { createLogger } from "../shared/adapters/log.js";
import { loadFunctionSettings } from "../shared/app/function-options.js";
import { createReconcileHandler, createReconciler } from "../shared/app/reconcile.js";

/** CloudEvent function `reconcile`: cluster → object store → agents. Bad settings stop the instance at start. */
functions.cloudEvent("reconcile", createReconcileHandler(createReconciler(loadFunctionSettings(), { log: createLogger("reconcile") })));
