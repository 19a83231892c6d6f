import { execFileSync, execSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { KUSTOMIZATIONS, REPO, type K8sObject } from "../support/infra-manifests.js";
import { podSpecOf } from "../support/infra-pods.js";

// The deploy steps of docs/deploying.md, run as written on a copy of infra/.

const DOC = readFileSync(join(REPO, "docs", "deploying.md"), "utf8");
const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
const REGISTRY = "registry.example.net/team";

/** The one line of the document that starts with `command` (indented: a code block). */
function readmeLine(command: string): string {
  const lines = DOC.split("\n").filter((l) => l.trimStart().startsWith(`${command} `));
  expect(lines, `docs/deploying.md lines starting with ${command}`).toHaveLength(1);
  return lines[0]!.trim();
}

function images(objects: readonly K8sObject[]): string[] {
  return objects.flatMap((o) => {
    const pod = podSpecOf(o);
    return [
      ...(pod?.containers ?? []),
      ...((pod as { initContainers?: Array<{ image: string }> } | undefined)?.initContainers ?? []),
    ].map((c) => c.image);
  });
}

describe("docs/deploying.md", () => {
  it("points every overlay at the operator's registry in one step that kubectl's kustomize honours", () => {
    const root = mkdtempSync(join(tmpdir(), "servicelb-deploying-"));
    cpSync(join(REPO, "infra"), join(root, "infra"), { recursive: true });
    execSync(readmeLine("sed -i").replaceAll("REGISTRY", REGISTRY), { cwd: root, stdio: "pipe" });
    for (const dir of KUSTOMIZATIONS) {
      const yaml = execFileSync("kubectl", ["kustomize", dir], {
        cwd: root,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
      const used = images(parseAllDocuments(yaml).map((d) => d.toJS() as K8sObject));
      const ours = used.filter((i) => /(^|\/)servicelb\//.test(i));
      expect(new Set(ours), dir).toEqual(
        new Set(["function", "agent"].map((name) => `${REGISTRY}/servicelb/${name}:${pkg.version}`)),
      );
    }
  });

  it("builds the images under the names and tag the manifests pull", () => {
    for (const name of ["function", "agent"]) {
      expect(DOC).toContain(`docker build -f infra/images/Dockerfile.${name}`);
      expect(DOC).toMatch(new RegExp(`-t REGISTRY/servicelb/${name}:${pkg.version.replace(/\./g, "\\.")} \\.`));
    }
  });
});
