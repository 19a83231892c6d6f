import { parseServiceRef } from "./k8s-names.js";
import { formatLabelSelector, matchesSelector } from "./label-selector.js";
import type { Skipped, Warning } from "../model/model.js";
import type { RenderOptions } from "../settings/options.js";
import type { Snapshot } from "./snapshot.js";
import type { Service } from "./snapshot-schemas.js";

/**
 * What the scoping options did: each Service that --namespace or --target-service left out is
 * listed in `skipped` (as --selector's are), and a filter that matches nothing, or a
 * --tcp-services entry that names no Service or a port the Service does not have, is a warning.
 * Without this a typo rendered an empty or partial config with exit 0 and not a word.
 */
export function scopeReport(snapshot: Snapshot, options: RenderOptions): { warnings: Warning[]; skipped: Skipped[] } {
  const warnings: Warning[] = [];
  const skipped: Skipped[] = [];
  const { namespace, targetService: target, selector, tcpServices } = options;
  if (!namespace && !target && !selector && tcpServices.length === 0) return { warnings, skipped };

  const outOfScope = (svc: Service): string | undefined => {
    const { namespace: ns, name } = svc.metadata;
    if (namespace && ns !== namespace) return `outside --namespace ${namespace}`;
    if (target && !(target.includes("/") ? target === `${ns}/${name}` : target === name))
      return `not --target-service ${target}`;
    return undefined;
  };

  let inNamespace = 0;
  let inScope = 0;
  let selected = 0;
  for (const svc of snapshot.services) {
    if (!namespace || svc.metadata.namespace === namespace) inNamespace++;
    const why = outOfScope(svc);
    if (why) {
      skipped.push({ service: `${svc.metadata.namespace}/${svc.metadata.name}`, reason: why });
      continue;
    }
    inScope++;
    if (!selector || matchesSelector(selector, svc.metadata.labels)) selected++;
  }
  if (namespace && inNamespace === 0)
    warnings.push({ service: "-", message: `--namespace ${namespace} matches no Service${namespacesOf(snapshot)}` });
  else if (target && inScope === 0)
    warnings.push({
      service: "-",
      message: `--target-service ${target} matches no Service${namespace ? ` in namespace ${namespace}` : ""}`,
    });
  else if (selector && inScope > 0 && selected === 0)
    warnings.push({ service: "-", message: `--selector ${formatLabelSelector(selector)} matches no Service` });

  for (const { ref, port } of tcpServices) {
    const { namespace: ns, name } = parseServiceRef(ref, namespace ?? "default")!;
    const id = `${ns}/${name}`;
    const svc = snapshot.services.find((s) => s.metadata.namespace === ns && s.metadata.name === name);
    const problem = !svc
      ? "names no such Service"
      : outOfScope(svc) !== undefined
        ? `names a Service ${outOfScope(svc)}`
        : !svc.spec.ports.some((p) => p.port === port && p.protocol === "TCP")
          ? `names a port the Service does not have (its TCP ports: ${tcpPorts(svc) || "none"})`
          : undefined;
    if (problem) warnings.push({ service: id, port, message: `--tcp-services ${problem}` });
  }
  return { warnings, skipped };
}

function tcpPorts(svc: Service): string {
  return svc.spec.ports
    .filter((p) => p.protocol === "TCP")
    .map((p) => p.port)
    .join(", ");
}

/** Where the Services are, for a --namespace that matches none (a typo, most often). */
function namespacesOf(snapshot: Snapshot): string {
  const names = [...new Set(snapshot.services.map((s) => s.metadata.namespace))].sort();
  if (names.length === 0) return " (the cluster has none)";
  const shown = names.slice(0, MAX_NAMESPACES_SHOWN).join(", ");
  return ` (namespaces with Services: ${shown}${names.length > MAX_NAMESPACES_SHOWN ? `, and ${names.length - MAX_NAMESPACES_SHOWN} more` : ""})`;
}

const MAX_NAMESPACES_SHOWN = 10;
