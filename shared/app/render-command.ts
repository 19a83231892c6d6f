import { msSince } from "../core/render/milliseconds.js";
import { optionSpecs, parseRenderOptions, pickRenderOptions } from "../core/settings/options.js";
import { mergeSettingSources } from "../adapters/setting-sources.js";
import { readSnapshotFile } from "../adapters/snapshot-file.js";
import { checkRenderDir, writeRenderDir } from "../adapters/render-dir.js";
import { nodeFiles } from "../core/haproxy-config/pattern-files.js";
import { clusterSettingSpecs } from "./function-options.js";
import { assumedCertificates } from "../core/gateway/certificates.js";
import { RenderContext, renderJson } from "./render-context.js";

/** `servicelb render`: the dry run from a shell. Returns the exit code. */
/** The reasons --namespace, --target-service and --selector give a Service they leave out (core/kubernetes/scope-report.ts, service-plan.ts). */
const SCOPED = /^(outside --namespace |not --target-service |labels do not match --selector)/;
/** Services the note names; JSON lists them all. */
const NAMED = 3;

export async function runRender(flags: Record<string, unknown>): Promise<number> {
  const merged = mergeSettingSources({ specs: { ...optionSpecs, ...clusterSettingSpecs }, env: process.env, flags });
  const options = parseRenderOptions(pickRenderOptions(merged));
  if (typeof flags.out === "string") await checkRenderDir(flags.out);
  const ctx = new RenderContext(options, { template: merged.template as string | undefined });
  ctx.useCertificates(assumedCertificates(flags.gatewayCerts as string | undefined));
  const t0 = performance.now();
  const snapshot = flags.snapshot
    ? readSnapshotFile(flags.snapshot as string, "--snapshot")
    : await (await import("../adapters/snapshot-source.js")).readLiveSnapshot(options, {
        kubeconfig: merged.kubeconfig as string | undefined,
        context: merged.context as string | undefined,
      });
  const readMs = msSince(t0);
  const result = ctx.render(snapshot);
  if (flags.check) {
    const { checkConfig } = await import("../adapters/haproxy/check.js");
    const check = await checkConfig(result.bytes);
    if (!check.ok) {
      process.stderr.write(
        `servicelb: haproxy -c rejected the rendered config:\n${check.errors.map((e) => `  ${e}`).join("\n")}\n`,
      );
      return 1;
    }
  }
  if (typeof flags.out === "string") {
    const files = nodeFiles(result.config);
    // The renderer wrote the section; a split that fails is a bug, not the user's input.
    if ("error" in files) throw new Error(`the rendered config's ${files.error}`);
    await writeRenderDir(flags.out, files);
  }
  if (flags.format === "json") {
    process.stdout.write(renderJson(result, { readMs }));
  } else {
    if (flags.out === undefined) process.stdout.write(result.bytes);
    for (const w of result.warnings) {
      // "-" stands for no Service in particular (a filter, the snapshot): the line starts with the message.
      const about = w.service === "-" ? "" : `${w.service}${w.port ? `:${w.port}` : ""}`;
      const subject = [about, w.annotation].filter(Boolean).join(" ");
      process.stderr.write(`warning: ${subject ? `${subject}: ` : ""}${w.message}\n`);
    }
    const scoped = result.skipped.filter((s) => SCOPED.test(s.reason));
    if (scoped.length > 0) {
      const named = scoped.slice(0, NAMED).map((s) => s.service);
      const more = scoped.length > NAMED ? `, and ${scoped.length - NAMED} more` : "";
      process.stderr.write(
        `note: ${scoped.length} Service${scoped.length === 1 ? "" : "s"} left out by the scoping flags (${named.join(", ")}${more}); --format json lists each with its reason\n`,
      );
    }
  }
  return 0;
}
