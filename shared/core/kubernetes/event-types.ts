/* CloudEvent types that mean "resync": the event sources send them, the event bridge of the local stack too. */

/** Knative's PingSource. */
export const PING_EVENT_TYPE = "dev.knative.sources.ping";
/** Cloud Functions: a Cloud Scheduler tick through Pub/Sub, as functions-framework presents it. */
export const PUBSUB_TICK_TYPE = "google.cloud.pubsub.topic.v1.messagePublished";
