import * as functions from "@google-cloud/functions-framework";
import { createLogger } from "../shared/adapters/log.js";

/**
 * CloudEvent function `deadLetter`: the Trigger's dead-letter sink. Logs each event the Broker
 * gave up on (with Knative's knativeerror* extensions: why, and from where), so that an operator
 * can see what was dropped. It runs from the function image, so it is pinned with servicelb's
 * own version rather than a third-party image.
 */
const log = createLogger("dead-letter");
functions.cloudEvent("deadLetter", (event: functions.CloudEvent<unknown>) => {
  log.warn({ event }, "event dropped: the Broker gave up delivering it to reconcile");
});
