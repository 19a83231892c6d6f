import { roundMs } from "./milliseconds.js";
import { buildModel, type BuildInputs, type ModelCache } from "./build-model.js";
import type { Skipped, Warning } from "./model.js";
import type { RenderOptions } from "./options.js";
import type { Renderer } from "./render.js";
import { scopeReport } from "./scope-report.js";
import type { Snapshot } from "./snapshot.js";

export interface RenderResult {
  /** The config as published: what is hashed, uploaded and compared. */
  bytes: Buffer;
  /** The same config as text, decoded when first read (dry runs, diffs). */
  readonly config: string;
  revision: string;
  warnings: Warning[];
  skipped: Skipped[];
  stats: { services: number; backends: number; servers: number; bytes: number; buildMs: number; renderMs: number };
}

/** Snapshot → model → config: the one path every way in (CLI, render, reconcile) goes through. */
export function renderSnapshot(
  snapshot: Snapshot,
  options: RenderOptions,
  renderer: Renderer,
  inputs: BuildInputs = {},
  cache?: ModelCache,
): RenderResult {
  const t0 = performance.now();
  const model = buildModel(snapshot, options, inputs, cache);
  const t1 = performance.now();
  const bytes = renderer.renderBytes(model);
  const t2 = performance.now();
  let servers = 0;
  for (const b of model.backends) for (const s of b.servers) if (s.address !== null) servers++;
  // Beside the model, not in it: the model (and a warm cache's copy of it) stays the same.
  const scope = scopeReport(snapshot, options);
  let text: string | undefined;
  return {
    bytes,
    get config() {
      return (text ??= bytes.toString("utf8"));
    },
    revision: model.revision,
    warnings: scope.warnings.length > 0 ? [...scope.warnings, ...model.warnings] : model.warnings,
    skipped: scope.skipped.length > 0 ? [...model.skipped, ...scope.skipped] : model.skipped,
    stats: {
      services: snapshot.services.length,
      backends: model.backends.length,
      servers,
      bytes: bytes.length,
      buildMs: roundMs(t1 - t0),
      renderMs: roundMs(t2 - t1),
    },
  };
}
