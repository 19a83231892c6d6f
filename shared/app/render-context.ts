import { ModelCache, type BuildInputs } from "../core/build-model.js";
import type { RenderOptions } from "../core/options.js";
import { renderSnapshot, type RenderResult } from "../core/pipeline.js";
import { Renderer } from "../core/render.js";
import { ParsedItems, type Snapshot } from "../core/snapshot.js";
import { readErrorPage } from "../adapters/option-sources.js";
import { loadTemplates } from "../adapters/templates.js";

/**
 * Everything a render needs besides the snapshot, loaded once per process: a warm function
 * instance reuses the parsed templates and compiled fragments for every invocation.
 */
export class RenderContext {
  readonly renderer: Renderer;
  readonly inputs: BuildInputs;
  /** Plans of unchanged Services between renders of live snapshots (a warm function instance). */
  private readonly cache = new ModelCache();
  /** Validated items of live lists, for `readLiveSnapshot` on a warm instance. */
  readonly liveItems = new ParsedItems();

  constructor(
    readonly options: RenderOptions,
    files: { template?: string } = {},
  ) {
    this.renderer = new Renderer(loadTemplates(files.template));
    this.inputs = { errorPageBody: readErrorPage(options.errorPage) };
  }

  render(snapshot: Snapshot): RenderResult {
    return renderSnapshot(snapshot, this.options, this.renderer, this.inputs, this.cache);
  }
}

/** The JSON form of a render, as `render --format json` and the HTTP dry run print it. */
export function renderJson(result: RenderResult, extra: Record<string, unknown> = {}): string {
  return `${JSON.stringify({ config: result.config, warnings: result.warnings, skipped: result.skipped, revision: result.revision, stats: { ...result.stats, ...extra } }, null, 2)}\n`;
}
