import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  allowedByDockerignore,
  argsOf,
  contextCopies,
  envOf,
  execForm,
  parseDockerfile,
  rehearseStage,
  type RehearsedStage,
  type Stage,
} from "../support/infra-dockerfile.js";
import { findObject, kustomize, REPO } from "../support/infra-manifests.js";
import { containerOf } from "../support/infra-pods.js";
import { bundledModules, developmentOnly, filesUnder } from "../support/shipped.js";

// No Docker engine here: the Dockerfiles are read instead, and their stages are rehearsed in empty
// directories with exactly the files their COPY lines take (after the .dockerignore).

const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
  version: string;
  dependencies: Record<string, string>;
};
const OBJECTS = kustomize("infra/base");
const ksvcContainer = (name: string) => containerOf(findObject(OBJECTS, "Service", name, "serving.knative.dev"), name);
const agentContainer = containerOf(findObject(OBJECTS, "DaemonSet", "agent"), "agent");

const FUNCTION_SERVICES = ["reconcile", "render", "dead-letter"].map(ksvcContainer);
const IMAGES = {
  function: {
    manifests: FUNCTION_SERVICES,
    entryPoints: (runtime: Stage) => [
      envOf(runtime).FUNCTION_SOURCE!,
      ...FUNCTION_SERVICES.map(({ container }) => container.env!.find((e) => e.name === "FUNCTION_SOURCE")!.value!),
    ],
  },
  agent: {
    manifests: [agentContainer],
    entryPoints: (runtime: Stage) => execForm(runtime, "ENTRYPOINT")!.filter((a) => a.startsWith("dist/")),
  },
} as const;

const rehearsals = new Map<string, { runtime: string; output: string }>();

/**
 * Builds every stage of the Dockerfile as `docker build` would (see rehearseStage): each in an
 * empty directory, from exactly the files its COPY lines take from the context and earlier
 * stages. Returns the final stage's directory and what the build printed.
 */
function rehearse(dockerfile: string): { runtime: string; output: string } {
  const done = rehearsals.get(dockerfile);
  if (done) return done;
  const stages = parseDockerfile(dockerfile);
  const allowed = allowedByDockerignore(`${dockerfile}.dockerignore`);
  const built = new Map<string, RehearsedStage>();
  let output = "";
  let last: RehearsedStage | undefined;
  for (const [i, stage] of stages.entries()) {
    const dir = mkdtempSync(join(tmpdir(), `servicelb-image-${i}-`));
    const r = rehearseStage(stage, { context: REPO, allowed, dir, stages: built, runs: i < stages.length - 1 });
    output += r.output;
    built.set(stage.name ?? String(i), r);
    last = r;
  }
  const result = { runtime: last!.dir, output };
  rehearsals.set(dockerfile, result);
  return result;
}

/** Bare package names imported from `entry`, following relative imports through the compiled tree. */
function packagesImported(entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, "utf8");
    // Import and export-from declarations at statement starts, and dynamic import("x"): a bundle's
    // string literals mention packages too (the AWS SDK's "import @aws-sdk/signature-v4-crt" advice).
    const declarations = text.matchAll(
      /(?:^|[;\n}])\s*(?:import|export)\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+)["']/g,
    );
    const dynamic = text.matchAll(/\bimport\s*\(\s*["']([^"']+)["']\s*\)/g);
    for (const m of [...declarations, ...dynamic]) {
      const spec = m[1]!;
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec));
      else if (!spec.startsWith("node:") && !builtinModules.includes(spec))
        packages.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!);
    }
  };
  visit(entry);
  return packages;
}

describe.each(Object.keys(IMAGES) as Array<keyof typeof IMAGES>)("infra/images/Dockerfile.%s", (image) => {
  const dockerfile = join(REPO, "infra/images", `Dockerfile.${image}`);
  const stages = parseDockerfile(dockerfile);
  const runtime = stages.at(-1)!;
  const allowed = allowedByDockerignore(`${dockerfile}.dockerignore`);

  // Which Node line: node-support.test.ts, against docs/deploying.md.
  it("builds and runs on one Node line, on Debian bookworm (HAProxy 2.6)", () => {
    expect(new Set(stages.map((s) => s.from)).size).toBe(1);
    expect(runtime.from).toMatch(/^node:\d+-bookworm-slim$/);
  });

  it("copies from the build context only files that exist and that its .dockerignore lets in", () => {
    for (const s of stages) {
      for (const src of contextCopies(s)) {
        expect(existsSync(join(REPO, src)), src).toBe(true);
        expect(allowed.has(src.split("/")[0]!), `${src} is kept out by the .dockerignore`).toBe(true);
      }
    }
  });

  it("builds from exactly the files its COPY lines take, and its entry points exist in the image", () => {
    const { runtime: dir, output } = rehearse(dockerfile);
    expect(argsOf(stages[0]!, "RUN")).toContain("npm run build");
    for (const entry of IMAGES[image].entryPoints(runtime)) expect(existsSync(join(dir, entry)), entry).toBe(true);
    // Every option the build passes is one its tools know.
    expect(output).not.toMatch(/unrecognized|unknown option/i);
  }, 120_000);

  it("installs every package its entry points import, without the dev dependencies", () => {
    const { runtime: dir } = rehearse(dockerfile);
    expect(argsOf(runtime, "RUN").some((r) => /npm ci --omit=dev --ignore-scripts/.test(r))).toBe(true);
    // The runtime reads package.json ("type": "module") and the templates (packageRoot()).
    const copied = contextCopies(runtime);
    expect(copied).toEqual(expect.arrayContaining(["package.json", "package-lock.json", "templates"]));
    const imported = new Set(
      IMAGES[image].entryPoints(runtime).flatMap((entry) => [...packagesImported(join(dir, entry))]),
    );
    // The walker found the imports: the function bundle keeps functions-framework external, the agent imports zod.
    expect(imported).toContain(image === "function" ? "@google-cloud/functions-framework" : "zod");
    for (const name of imported) expect(pkg.dependencies[name], `imported: ${name}`).toBeDefined();
  }, 120_000);

  it("ships no local-stack, test or benchmark code, neither compiled nor bundled nor in the build context", () => {
    const { runtime: dir } = rehearse(dockerfile);
    const shipped = filesUnder(dir);
    // The predicate is the one that matters: it catches what a development build would add.
    for (const bad of ["dist/shared/dev/kube-api-emulator.js", "dist/dev/bench/e2e.js", "dist/test/support/s3.js"])
      expect(developmentOnly(bad), bad).toBe(true);
    expect(shipped).toContain("dist/shared/app/reconcile.js");
    expect(shipped.filter(developmentOnly)).toEqual([]);
    for (const map of shipped.filter((f) => /^dist\/bundle\/.*\.mjs\.map$/.test(f))) {
      const modules = bundledModules(join(dir, map));
      // Every function logs: a map the walker could not read would list nothing.
      expect(modules, map).toContain("../shared/adapters/log.js");
      expect(modules.filter(developmentOnly), map).toEqual([]);
    }
    // The local stack's sources stay out of the build context: the production build needs none of them.
    expect(allowed.admits("shared/app/reconcile.ts")).toBe(true);
    expect(allowed.admits("shared/dev/stack.ts")).toBe(false);
  }, 120_000);

  it("runs as the non-root user the manifests expect, under the name and version they pull", () => {
    expect(argsOf(runtime, "USER")).toEqual(["1000:1000"]);
    for (const { pod, container } of IMAGES[image].manifests) {
      expect(container.image).toBe(`servicelb/${image}:${pkg.version}`);
      const uid = (container.securityContext?.runAsUser ?? pod.securityContext?.runAsUser ?? 1000) as number;
      expect(uid).toBe(1000);
    }
    expect(readFileSync(dockerfile, "utf8")).toContain(`-t servicelb/${image}:${pkg.version} .`);
  });
});

describe("the process each image starts", () => {
  it("function: functions-framework itself as PID 1 (it handles SIGTERM), serving the dry run by default", () => {
    const runtime = parseDockerfile(join(REPO, "infra/images/Dockerfile.function")).at(-1)!;
    expect(execForm(runtime, "CMD")).toEqual(["node_modules/.bin/functions-framework"]);
    const framework = JSON.parse(
      readFileSync(join(REPO, "node_modules/@google-cloud/functions-framework/package.json"), "utf8"),
    ) as { bin: Record<string, string> };
    expect(framework.bin["functions-framework"]).toBeDefined();
    expect(envOf(runtime)).toMatchObject({
      FUNCTION_SOURCE: "dist/bundle/render.mjs",
      FUNCTION_TARGET: "render",
      FUNCTION_SIGNATURE_TYPE: "http",
    });
    expect(readFileSync(join(REPO, "functions/render.ts"), "utf8")).toContain('functions.http("render"');
  });

  it("agent: the agent's process entry under tini, with HAProxy and tini from Debian", () => {
    const runtime = parseDockerfile(join(REPO, "infra/images/Dockerfile.agent")).at(-1)!;
    expect(execForm(runtime, "ENTRYPOINT")).toEqual(["tini", "--", "node", "dist/functions/agent.js"]);
    expect(existsSync(join(REPO, "functions/agent.ts"))).toBe(true);
    expect(argsOf(runtime, "RUN").some((r) => /apt-get install -y --no-install-recommends haproxy tini/.test(r))).toBe(
      true,
    );
  });
});
