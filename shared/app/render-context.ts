import type { BuildInputs } from "../core/model/build-model.js";
import { ModelCache } from "../core/model/model-cache.js";
import { type BackendLayout, LayoutState } from "../core/model/layout-record.js";
import type { RenderOptions } from "../core/settings/options.js";
import { renderSnapshot, type RenderResult } from "../core/render/pipeline.js";
import { Renderer } from "../core/render/render.js";
import type { SettingsRecord } from "../core/settings/settings-record.js";
import { type ConfigHasher, configHasher, type DigestKind } from "../core/publish/config-digest.js";
import { sha256 } from "../core/publish/sha256.js";
import { ParsedItems, type Snapshot } from "../core/kubernetes/snapshot.js";
import { readErrorPage } from "../adapters/error-page.js";
import { loadTemplates } from "../adapters/templates.js";
import type { TemplateSet } from "../core/render/template-views.js";
import type { HeldCertificates } from "../core/gateway/certificates.js";

/**
 * Everything a render needs besides the snapshot, loaded once per process: a warm function
 * instance reuses the parsed templates and compiled fragments for every invocation.
 */
export class RenderContext {
  readonly renderer: Renderer;
  readonly inputs: BuildInputs;
  /** Which templates render: recorded with each published config. */
  readonly template: SettingsRecord["template"];
  /** Plans of unchanged Services between renders of live snapshots (a warm function instance). */
  private cache = new ModelCache();
  private items = new ParsedItems();
  /** What the last config's digest left: a warm pass hashes only what changed (config-digest.ts). */
  private hasher: ConfigHasher = configHasher("sha256");
  /** Which backend serves which Service port in the last config (backend-layout.ts). */
  private layout = new LayoutState();

  constructor(
    readonly options: RenderOptions,
    files: { template?: string } = {},
  ) {
    const templates = loadTemplates(files.template);
    this.renderer = new Renderer(templates);
    this.template = templateRecord(files.template, templates);
    this.inputs = { errorPageBody: readErrorPage(options.errorPage) };
  }

  /** Validated items of live lists, for `readLiveSnapshot` on a warm instance. */
  get liveItems(): ParsedItems {
    return this.items;
  }

  /**
   * Forgets what was cached by resourceVersion. After the cluster's revisions went back (a restore),
   * a name and resourceVersion seen before may now hold other content.
   */
  forgetLiveState(): void {
    this.cache = new ModelCache();
    this.items = new ParsedItems();
  }

  /** Whether renders place Services into a previous layout (a warm instance's, or one read from the store). */
  get hasLayout(): boolean {
    return this.layout.layout !== null;
  }

  /** The layout the newest published config was rendered with: a cold instance places Services into it. */
  useLayout(layout: BackendLayout): void {
    const { room } = this.layout;
    this.layout = new LayoutState(layout);
    this.layout.room = room;
  }

  /** The descriptors the smallest node has for a config (app/agent-reports.ts): placement keeps within them. */
  useRoom(room: number | null): void {
    this.layout.room = room;
  }

  /** The Gateway certificates the nodes hold (app/fleet-certificates.ts): HTTPS listeners bind those. */
  useCertificates(held: HeldCertificates): void {
    this.inputs.gatewayCertificates = held;
  }

  /** Renders from now on are digested by `kind` (app/agent-reports.ts). */
  useDigest(kind: DigestKind): void {
    if (kind !== this.hasher.kind) this.hasher = configHasher(kind);
  }

  render(snapshot: Snapshot): RenderResult {
    return renderSnapshot(snapshot, this.options, this.renderer, this.inputs, this.cache, this.hasher, this.layout);
  }
}

/** Which templates a config was rendered with: the main template's path (or built-in) and a digest of every file. */
export function templateRecord(
  path: string | undefined,
  templates: TemplateSet = loadTemplates(path),
): SettingsRecord["template"] {
  return {
    source: path ?? "built-in",
    sha256: sha256(
      Object.entries(templates)
        .map(([name, text]) => `${name}\0${text}`)
        .join("\0"),
    ),
  };
}

/** The JSON form of a render, as `render --format json` and the HTTP dry run print it. */
export function renderJson(result: RenderResult, extra: Record<string, unknown> = {}): string {
  return `${JSON.stringify({ config: result.config, warnings: result.warnings, skipped: result.skipped, revision: result.revision, stats: { ...result.stats, ...extra } }, null, 2)}\n`;
}
