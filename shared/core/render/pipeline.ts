import { roundMs } from "./milliseconds.js";
import { buildModel, type BuildInputs } from "../model/build-model.js";
import type { ModelCache } from "../model/model-cache.js";
import { placeBackends, placeGateway } from "../model/backend-layout.js";
import { type BackendLayout, LayoutState } from "../model/layout-record.js";
import type { ConfigChunks } from "../publish/chunks.js";
import type { Skipped, Warning } from "../model/model.js";
import type { RenderOptions } from "../settings/options.js";
import type { Renderer } from "./render.js";
import { scopeReport } from "../kubernetes/scope-report.js";
import { type ConfigHasher, configHasher } from "../publish/config-digest.js";
import { gatewayBinds, modelDescriptors } from "../model/descriptors.js";
import type { Snapshot } from "../kubernetes/snapshot.js";
import { withGateway } from "../gateway/attach.js";
import type { GatewayStatus } from "../gateway/status.js";

export interface RenderResult extends ConfigChunks {
  /** The config as published, as the chunks it was rendered in: what is hashed and uploaded. */
  readonly chunks: readonly Buffer[];
  readonly byteLength: number;
  /** The config's digest (config-digest.ts) in the hasher's kind, computed when first read. */
  readonly sha256: string;
  /** The config in one buffer, joined when first read (a dry run's answer, `haproxy -c`). */
  readonly bytes: Buffer;
  /** The same config as text, decoded when first read (dry runs, diffs). */
  readonly config: string;
  revision: string;
  warnings: Warning[];
  skipped: Skipped[];
  stats: {
    services: number;
    /** Backends that serve a Service port (its own or a spare it holds). */
    backends: number;
    /** Spare backends free for Services to come. */
    spares: number;
    servers: number;
    /** File descriptors the config asks of each node for its listeners and server slots (descriptors.ts). */
    descriptors: number;
    bytes: number;
    buildMs: number;
    renderMs: number;
  };
  /** Where each Service port is served (backend-layout.ts); null when the template routes by rules, not maps. */
  layout: BackendLayout | null;
  /** Why the layout started afresh (a reload on the nodes), or null when it absorbed the change. */
  layoutFresh: string | null;
  /** The status owed to the Gateway API objects of servicelb's class (gateway/status.ts); null without any. */
  gatewayStatus: GatewayStatus | null;
}

/** Snapshot → model → config: the one path every way in (CLI, render, reconcile) goes through. */
export function renderSnapshot(
  snapshot: Snapshot,
  options: RenderOptions,
  renderer: Renderer,
  inputs: BuildInputs = {},
  cache?: ModelCache,
  hasher: ConfigHasher = configHasher("sha256"),
  layout?: LayoutState,
): RenderResult {
  const t0 = performance.now();
  const built = buildModel(snapshot, options, inputs, cache);
  // A dry run without a previous layout gets a fresh one: every Service in its own backend.
  const state = layout ?? new LayoutState();
  const services = renderer.routesByMap ? placeBackends(built, state) : null;
  const routed = withGateway(services?.model ?? built, snapshot, renderer.routesByMap, inputs.gatewayCertificates);
  const placement = services ? placeGateway(services, routed, state) : null;
  const model = placement?.model ?? routed;
  const t1 = performance.now();
  const { chunks, byteLength } = renderer.renderChunks(model);
  const t2 = performance.now();
  // Beside the model, not in it: the model (and a warm cache's copy of it) stays the same.
  const scope = scopeReport(snapshot, options);
  let bytes: Buffer | undefined;
  let text: string | undefined;
  let sha: string | undefined;
  return {
    chunks,
    byteLength,
    get sha256() {
      sha ??= hasher.digest(chunks);
      return sha;
    },
    get bytes() {
      bytes ??= Buffer.concat(chunks, byteLength);
      return bytes;
    },
    get config() {
      text ??= this.bytes.toString("utf8");
      return text;
    },
    revision: model.revision,
    warnings: scope.warnings.length > 0 ? [...scope.warnings, ...model.warnings] : model.warnings,
    skipped: scope.skipped.length > 0 ? [...model.skipped, ...scope.skipped] : model.skipped,
    stats: {
      services: snapshot.services.length,
      backends: built.backends.length,
      spares: placement ? placement.layout.spares.filter((s) => s.holds === null).length : 0,
      servers: model.readyServers,
      // The layout counts the Services' part; the Gateway's frontends come on top.
      descriptors: placement ? placement.descriptors + gatewayBinds(model) : modelDescriptors(model),
      bytes: byteLength,
      buildMs: roundMs(t1 - t0),
      renderMs: roundMs(t2 - t1),
    },
    layout: placement?.layout ?? null,
    layoutFresh: placement?.fresh ?? null,
    gatewayStatus: model.gateway?.status ?? null,
  };
}
