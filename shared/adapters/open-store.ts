/*
 * The one way a process opens the object store from its settings: the reconcile function, the
 * agent and the CLI commands differ only in the request limits they tune.
 */

import type { StoreSettings } from "../core/settings/store-settings.js";
import { createObjectStore, type ObjectStore, type ObjectStoreOptions } from "./store.js";

export type StoreTuning = Pick<ObjectStoreOptions, "credentials" | "timeoutMs" | "deadlineMs" | "maxObjectBytes">;

/** The store the settings name; credentials come from the standard AWS chain unless tuned. */
export function openStore(settings: StoreSettings, tuning: StoreTuning = {}): ObjectStore {
  return createObjectStore({
    url: settings.url,
    endpoint: settings.endpoint,
    region: settings.region,
    forcePathStyle: settings.forcePathStyle,
    retain: settings.retain,
    ...tuning,
  });
}
