import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { allowedByDockerignore, argsOf, contextCopies, envOf, execForm, parseDockerfile, type Stage } from "../support/infra-dockerfile.js";
import { findObject, kustomize, REPO } from "../support/infra-manifests.js";
import { containerOf } from "../support/infra-pods.js";

// No Docker engine here: the Dockerfiles are read instead, and their build stage is rehearsed
// with the same files the build context would hold (tsc on a copy of exactly those files).

const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
  version: string;
  engines: { node: string };
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const OBJECTS = kustomize("infra/base");
const ksvcContainer = (name: string) => containerOf(findObject(OBJECTS, "Service", name, "serving.knative.dev"), name);
const agentContainer = containerOf(findObject(OBJECTS, "DaemonSet", "agent"), "agent");

const IMAGES = {
  function: {
    manifests: [ksvcContainer("reconcile"), ksvcContainer("render")],
    entryPoints: (runtime: Stage) => [
      envOf(runtime).FUNCTION_SOURCE!,
      ...[ksvcContainer("reconcile"), ksvcContainer("render")].map(({ container }) => container.env!.find((e) => e.name === "FUNCTION_SOURCE")!.value!),
    ],
  },
  agent: {
    manifests: [agentContainer],
    entryPoints: (runtime: Stage) => execForm(runtime, "ENTRYPOINT")!.filter((a) => a.startsWith("dist/")),
  },
} as const;

const rehearsals = new Map<string, string>();

/** Compiles a copy of exactly the files the build context holds; returns its directory. */
function rehearseBuild(allowed: Set<string>): string {
  const key = [...allowed].sort().join(",");
  const done = rehearsals.get(key);
  if (done) return done;
  const dir = mkdtempSync(join(tmpdir(), "servicelb-image-"));
  for (const name of allowed) if (existsSync(join(REPO, name))) cpSync(join(REPO, name), join(dir, name), { recursive: true });
  // `npm ci` in the build stage installs what package-lock.json pins, i.e. this node_modules.
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"), "dir");
  execFileSync(process.execPath, [join(REPO, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], { cwd: dir, stdio: "pipe" });
  if (existsSync(join(dir, "rolldown.config.mjs"))) execFileSync(process.execPath, [join(REPO, "node_modules/rolldown/bin/cli.mjs"), "-c", "rolldown.config.mjs", "--silent"], { cwd: dir, stdio: "pipe" });
  rehearsals.set(key, dir);
  return dir;
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
    const declarations = text.matchAll(/(?:^|[;\n}])\s*(?:import|export)\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+)["']/g);
    const dynamic = text.matchAll(/\bimport\s*\(\s*["']([^"']+)["']\s*\)/g);
    for (const m of [...declarations, ...dynamic]) {
      const spec = m[1]!;
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec));
      else if (!spec.startsWith("node:") && !builtinModules.includes(spec)) packages.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!);
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

  it("builds on Node 20 (package.json engines, @types/node) and Debian bookworm (HAProxy 2.6)", () => {
    const major = /^>=\s*(\d+)/.exec(pkg.engines.node)![1];
    expect(pkg.devDependencies["@types/node"]).toMatch(new RegExp(`^${major}\\.`));
    for (const s of stages) expect(s.from).toBe(`node:${major}-bookworm-slim`);
  });

  it("copies from the build context only files that exist and that its .dockerignore lets in", () => {
    for (const s of stages) {
      for (const src of contextCopies(s)) {
        expect(existsSync(join(REPO, src)), src).toBe(true);
        expect(allowed.has(src.split("/")[0]!), `${src} is kept out by the .dockerignore`).toBe(true);
      }
    }
  });

  it("compiles from that context alone, and its entry points exist afterwards", () => {
    const dir = rehearseBuild(allowed);
    const build = stages[0]!;
    expect(argsOf(build, "RUN")).toContain("npm run build");
    for (const entry of IMAGES[image].entryPoints(runtime)) expect(existsSync(join(dir, entry)), entry).toBe(true);
  }, 120_000);

  it("installs every package its entry points import, without the dev dependencies", () => {
    const dir = rehearseBuild(allowed);
    expect(argsOf(runtime, "RUN").some((r) => /npm ci --omit=dev --ignore-scripts/.test(r))).toBe(true);
    // The runtime reads package.json ("type": "module") and the templates (packageRoot()).
    const copied = contextCopies(runtime);
    expect(copied).toEqual(expect.arrayContaining(["package.json", "package-lock.json", "templates"]));
    const imported = new Set(IMAGES[image].entryPoints(runtime).flatMap((entry) => [...packagesImported(join(dir, entry))]));
    // The walker found the imports: the function bundle keeps functions-framework external, the agent imports zod.
    expect(imported).toContain(image === "function" ? "@google-cloud/functions-framework" : "zod");
    for (const name of imported) expect(pkg.dependencies[name], `imported: ${name}`).toBeDefined();
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
    const framework = JSON.parse(readFileSync(join(REPO, "node_modules/@google-cloud/functions-framework/package.json"), "utf8")) as { bin: Record<string, string> };
    expect(framework.bin["functions-framework"]).toBeDefined();
    expect(envOf(runtime)).toMatchObject({ FUNCTION_SOURCE: "dist/bundle/render.mjs", FUNCTION_TARGET: "render", FUNCTION_SIGNATURE_TYPE: "http" });
    expect(readFileSync(join(REPO, "functions/render.ts"), "utf8")).toContain('functions.http("render"');
  });

  it("agent: the agent's process entry under tini, with HAProxy and tini from Debian", () => {
    const runtime = parseDockerfile(join(REPO, "infra/images/Dockerfile.agent")).at(-1)!;
    expect(execForm(runtime, "ENTRYPOINT")).toEqual(["tini", "--", "node", "dist/functions/agent.js"]);
    expect(existsSync(join(REPO, "functions/agent.ts"))).toBe(true);
    expect(argsOf(runtime, "RUN").some((r) => /apt-get install -y --no-install-recommends haproxy tini/.test(r))).toBe(true);
  });
});
