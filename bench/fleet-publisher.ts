/*
 * The publishing side of a fleet run: the reconcile function's own reconciler (createReconciler,
 * as the deployed function builds it from its settings: its store, its notifier with the default
 * concurrency and deadline) over the synthetic cluster held in memory instead of an API server.
 * A change moves one endpoint of one Service and runs a full pass: render, publish, ping.
 */

import { join } from "node:path";
import { createLogger } from "../shared/adapters/log.js";
import { openStore } from "../shared/adapters/open-store.js";
import { loadFunctionSettings, requireStore } from "../shared/app/function-options.js";
import type { ReconcileResult } from "../shared/app/pass.js";
import { traceSteps } from "../shared/app/pass-trace.js";
import { createReconciler } from "../shared/app/reconcile.js";
import { snapshotFromItems, validateItem } from "../shared/core/kubernetes/snapshot.js";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";
import { syntheticItems } from "./synthetic.js";

export interface FleetPublisherOptions {
  services: number;
  /** s3://bucket/prefix */
  store: string;
  /** The function's store endpoint. */
  endpoint: string;
  /** The agents' base URLs, pinged after each publish. */
  agents: readonly string[];
  token: string;
  /** Where the rendered config points HAProxy's sockets and state file (never opened: HAProxy is faked). */
  dir: string;
  /** When a pass has stored its config (before the pings), by this process's clock. */
  onPublished(key: string, at: number): void;
}

export interface FleetPublisher {
  /** A pass over the cluster as it is: the first publish. */
  publish(): Promise<ReconcileResult>;
  /** Moves one endpoint of one Service (a different one each time), then a pass. */
  moveEndpoint(): Promise<ReconcileResult>;
  close(): Promise<void>;
}

const ENDPOINTS = 10;
const BASE_REVISION = 1000;

export function fleetPublisher(o: FleetPublisherOptions): FleetPublisher {
  const settings = loadFunctionSettings(
    { SERVICELB_NOTIFY_TOKEN: o.token },
    {
      store: o.store,
      storeEndpoint: o.endpoint,
      storePathStyle: true,
      agents: [...o.agents],
      bindAddress: "127.0.0.1",
      httpPort: 8080,
      statsPort: 8081,
      statsSocket: join(o.dir, "admin.sock"),
      serverStateFile: join(o.dir, "server-state"),
    },
  );
  const store = openStore(requireStore(settings), { credentials: S3RVER_CREDENTIALS });
  let revision = BASE_REVISION;
  /** Service name → where its first endpoint has moved to, and the revision of that write. */
  const moved = new Map<string, { address: string; revision: number }>();
  // As a live list has it: an object keeps its resourceVersion until it is written.
  const snapshot = () => {
    const items = Array.from(syntheticItems(o.services, ENDPOINTS, BASE_REVISION), (item) => {
      const metadata = item.metadata as { labels?: Record<string, string>; resourceVersion: string };
      const move = moved.get(metadata.labels?.["kubernetes.io/service-name"] ?? "");
      if (item.kind === "EndpointSlice" && move !== undefined) {
        const endpoints = item.endpoints as Array<{ addresses: string[] }>;
        endpoints[0] = { ...endpoints[0]!, addresses: [move.address] };
        metadata.resourceVersion = String(move.revision);
      }
      return validateItem(item, undefined, "live list");
    });
    return { ...snapshotFromItems(items, [String(revision)]), trustedRevisions: true, listWarnings: [] };
  };
  const reconciler = createReconciler(settings, {
    log: createLogger("fleet-function", process.env.LOG_LEVEL ?? "error"),
    store,
    readSnapshot: async () => snapshot(),
    liveRevision: async () => String(revision),
    decorate: (steps) =>
      traceSteps(steps, (ev, fields) => {
        if (ev === "pass.published" && fields?.status === "published")
          o.onPublished(String(fields.key), performance.timeOrigin + performance.now());
      }),
  });
  let changes = 0;
  const pass = () => reconciler.reconcileNow({ id: `fleet-${revision}`, type: "bench.fleet" });
  return {
    publish: pass,
    moveEndpoint() {
      changes++;
      revision++;
      // Spread over the Services, so that no change moves an endpoint back.
      const service = `svc-${(changes * 7919) % o.services}`;
      moved.set(service, { address: `10.200.${Math.floor(changes / 256) % 256}.${changes % 256}`, revision });
      return pass();
    },
    close: () => reconciler.close(),
  };
}
