/*
 * The answer to a delivery functions-framework could not read (adapters/framework-rejections.ts):
 * a binary event whose data is not JSON (text/plain, or no body and no content type, as a
 * PingSource without data sends), invalid JSON or `null` in either mode, an empty POST. It is
 * acknowledged (204) like any other event the function does not understand: the Broker would retry
 * it five times for nothing and then dead-letter it. It is logged at warn with the reason; the
 * resync covers whatever it was about. Other methods than POST get 405.
 *
 * Apart from the events' reading (app/cloudevents.ts), so that the module on functions-framework's
 * thread (functions/reconcile.ts) loads neither zod nor the schemas.
 */

import { answerJson, type RejectionAnswer } from "../adapters/framework-rejections.js";
import type { Logger } from "../adapters/log.js";

export function acknowledgeUnreadableDelivery(log: Logger): RejectionAnswer {
  return (rejection, req, res) => {
    if (req.method !== "POST") {
      answerJson({ status: 405, reason: `${req.method ?? "this method"} delivers no event: POST one` }, req, res);
      return;
    }
    const header = (name: string) => (typeof req.headers[name] === "string" ? req.headers[name] : undefined);
    log.warn(
      {
        eventId: header("ce-id"),
        eventType: header("ce-type"),
        contentType: header("content-type"),
        verdict: "malformed",
        reason: rejection.reason,
      },
      "event ignored: not understood",
    );
    res.statusCode = 204;
    res.end();
  };
}
