/*
 * The part of a CloudEvent that the reconcile pipeline reads: the envelope's attributes and the
 * fields of its data that name the object (app/cloudevents.ts; the stage tracer also logs the
 * resourceVersion). Events are hints, never data, so nothing else of the data is ever used, and
 * only this crosses to the pipeline's worker thread (functions/reconcile.ts). A structured clone
 * walks the whole value on the stack: data nested a few thousand levels deep, which JSON.parse
 * takes, failed the clone and answered 500, and the Broker retried it five times.
 *
 * The hint keeps the event's shape, and keeps a value only when it is a primitive: an object or
 * array in its place becomes an empty one, which the event's schemas refuse as they refused the
 * original. So the hint is never deeper than the schemas look, and the hint of a hint is the hint
 * (classifyEvent reads events through it, so the worker classifies an event as the event itself).
 *
 * Apart from app/cloudevents.ts so that the module on functions-framework's thread loads neither
 * zod nor the schemas.
 */

export type EventHint = string | number | boolean | null | undefined | readonly never[] | HintRecord;
interface HintRecord {
  readonly [key: string]: EventHint;
}

export function eventHint(event: unknown): EventHint {
  if (!isRecord(event)) return leaf(event);
  return {
    ...pick(event, ["specversion", "id", "type", "source"]),
    ...("data" in event ? { data: dataHint(decodeData(event.data)) } : {}),
  };
}

/**
 * Binary-mode data arrives parsed only when its content type is JSON; JSON text or bytes are
 * parsed here. Text that parses to text stays the text it was, so that decoding twice (a hint's
 * data) never parses what a single decoding would not.
 */
function decodeData(data: unknown): unknown {
  const text =
    typeof data === "string" ? data : data instanceof Uint8Array ? Buffer.from(data).toString("utf8") : undefined;
  if (text === undefined) return data;
  try {
    const parsed = JSON.parse(text) as unknown;
    return typeof parsed === "string" ? text : parsed;
  } catch {
    return text;
  }
}

/** Resource mode reads apiVersion, kind and metadata's names and labels; reference mode apiVersion, kind, namespace and name. */
function dataHint(data: unknown): EventHint {
  if (!isRecord(data)) return leaf(data);
  const hint: Record<string, EventHint> = pick(data, ["apiVersion", "kind", "namespace", "name"]);
  if ("metadata" in data) hint.metadata = metadataHint(data.metadata);
  return hint;
}

function metadataHint(metadata: unknown): EventHint {
  if (!isRecord(metadata)) return leaf(metadata);
  const hint: Record<string, EventHint> = pick(metadata, ["name", "namespace", "resourceVersion"]);
  const labels = metadata.labels;
  if ("labels" in metadata) hint.labels = isRecord(labels) ? pick(labels, Object.keys(labels)) : leaf(labels);
  return hint;
}

/** Own data properties (fromEntries), so a key such as `__proto__` stays a key. */
function pick(record: Record<string, unknown>, keys: readonly string[]): Record<string, EventHint> {
  return Object.fromEntries(keys.filter((key) => key in record).map((key) => [key, leaf(record[key])]));
}

/** A primitive as it is; anything else as an empty value of its kind, which a string field refuses alike. */
function leaf(value: unknown): EventHint {
  switch (typeof value) {
    case "string":
    case "number":
    case "boolean":
    case "undefined":
      return value;
    default:
      return value === null ? null : Array.isArray(value) ? [] : {};
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
