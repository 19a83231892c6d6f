import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { classifyEvent } from "../../shared/app/cloudevents.js";
import { FUNCTION_SETTING_KEYS, loadFunctionSettings, requireStore } from "../../shared/app/function-options.js";
import { envName } from "../../shared/core/settings/settings.js";
import { awsCredentialEnvNames, envNamesInSources, functionsFrameworkEnvNames } from "../support/infra-code.js";
import { runCommand } from "../support/infra-dockerfile.js";
import { REPO } from "../support/infra-manifests.js";
import { bundledModules, developmentOnly, filesUnder } from "../support/shipped.js";

// serverless.yml checked without the Serverless Framework (v3 with its Google plugin is ~500
// packages): the plugin's own rules (serverless-google-cloudfunctions 4.6: package/googlePackage.js,
// shared/validate.js, package/lib/compileFunctions.js), then agreement with the code.

interface SlsFunction {
  handler: string;
  maxInstances?: number;
  events: Array<{
    http?: string;
    event?: { eventType: string; resource: string; path?: string; failurePolicy?: unknown };
  }>;
  environment?: Record<string, string>;
  secrets?: Record<string, { secret: string; version: string }>;
}

interface Sls {
  service: string;
  frameworkVersion: string;
  configValidationMode?: "error" | "warn" | "off";
  plugins: string[];
  params: { default: Record<string, string> };
  provider: { name: string; runtime: string; environment?: Record<string, string>; secrets?: Record<string, unknown> };
  package: { patterns: string[] };
  functions: Record<string, SlsFunction>;
}

// serverless-google-cloudfunctions 4.6, provider/googleProvider.js: the runtimes its config schema
// lists. Serverless v3 checks serverless.yml against it (and against the function properties it
// lists, which leave out maxInstances, although package/lib/compileFunctions.js passes it on).
const PLUGIN_RUNTIMES = [
  "nodejs6",
  "nodejs8",
  "nodejs10",
  "nodejs12",
  "nodejs14",
  "nodejs16",
  "python37",
  "python38",
  "python39",
  "go111",
  "go113",
  "go116",
  "java11",
  "dotnet3",
  "ruby26",
  "ruby27",
];

const require = createRequire(import.meta.url);
const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
  main?: string;
};

/** serverless.yml with ${param:...} resolved from its defaults and the --param values a deploy gives. */
/**
 * serverless.yml with its variables resolved as Serverless v3 resolves them: `${param:…}`, then
 * `${file(<path>):<key>}`, which fails when the file or the key is missing ("Value not found at
 * "file" source").
 */
function load(given: Record<string, string>): Sls {
  const raw = parse(readFileSync(join(REPO, "serverless.yml"), "utf8")) as Sls;
  const params = { ...raw.params.default, ...given };
  const text = JSON.stringify(raw)
    .replace(/\$\{param:([A-Za-z]+)\}/g, (_, name: string) => {
      if (params[name] === undefined)
        throw new Error(`serverless.yml: \${param:${name}} has no default; deploy must give --param ${name}=...`);
      return params[name];
    })
    .replace(/\$\{file\(([^)]+)\):([A-Za-z]+)\}/g, (_, path: string, key: string) => {
      const file = resolve(REPO, path);
      const value = existsSync(file)
        ? (parse(readFileSync(file, "utf8")) as Record<string, unknown> | null)?.[key]
        : undefined;
      if (typeof value !== "string")
        throw new Error(`Cannot resolve variable: Value not found at "file" source (${path}:${key})`);
      return value;
    });
  expect(text).not.toMatch(/\$\{/);
  return JSON.parse(text) as Sls;
}

/** Serverless's package patterns: glob lines in order, "!" excludes, the last match wins. */
function packaged(patterns: readonly string[], path: string): boolean {
  let included = false;
  for (const p of patterns) {
    const negated = p.startsWith("!");
    const glob = negated ? p.slice(1) : p;
    const re = new RegExp(
      `^${glob
        .replace(/[.+^$()|[\]{}]/g, "\\$&")
        .replace(/\*\*/g, "\u0000")
        .replace(/\*/g, "[^/]*")
        .replace(/\u0000/g, ".*")}$`,
    );
    if (re.test(path)) included = !negated;
  }
  return included;
}

/** Every file of the service directory that `serverless package` considers (node_modules and .git aside: no pattern takes them). */
function serviceFiles(dir = REPO): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory())
      return dir === REPO && (e.name === "node_modules" || e.name === ".git") ? [] : serviceFiles(path);
    return [relative(REPO, path)];
  });
}

/** The file of functions/ that registers `name`, and how. */
function registration(name: string): { file: string; kind: "http" | "cloudEvent" } | undefined {
  for (const file of ["render.ts", "reconcile.ts", "agent.ts", "cli.ts"]) {
    const text = readFileSync(join(REPO, "functions", file), "utf8");
    const m = new RegExp(`functions\\.(http|cloudEvent)\\("${name}"`).exec(text);
    if (m) return { file, kind: m[1] as "http" | "cloudEvent" };
  }
  return undefined;
}

/** A kubeconfig as `--param kubeconfig` names one (the default, kubeconfig.gcf.yaml, is git-ignored). */
const KUBECONFIG = join(mkdtempSync(join(tmpdir(), "servicelb-sls-")), "kubeconfig.yaml");
writeFileSync(
  KUBECONFIG,
  "apiVersion: v1\nkind: Config\nclusters: [{ name: demo, cluster: { server: 'https://127.0.0.1:6443' } }]\n",
);
const sls = load({ project: "demo-project", store: "s3://demo-bucket/servicelb", kubeconfig: KUBECONFIG });

describe("serverless.yml", () => {
  // Which Node runtime: node-support.test.ts, against docs/deploying.md.
  it("is a Serverless Framework v3 service for the Google plugin, on a Node runtime", () => {
    expect(sls.frameworkVersion).toBe("3");
    expect(sls.plugins).toEqual(["serverless-google-cloudfunctions"]);
    expect(sls.provider.name).toBe("google");
    // The plugin forbids "goog" and underscores in the service name.
    expect(sls.service).not.toMatch(/goog|_/);
    expect(sls.provider.runtime).toMatch(/^nodejs\d+$/);
  });

  // Cloud Functions runs nodejs22, and the plugin passes provider.runtime on unchanged
  // (provider/googleProvider.js getRuntime); only its schema predates it. In "error" mode
  // Serverless v3 would refuse the deploy for that.
  it("deploys although the plugin's schema predates the runtime", () => {
    expect(PLUGIN_RUNTIMES).not.toContain(sls.provider.runtime);
    expect(sls.configValidationMode).toBe("warn");
  });

  it("names as each handler the function the code registers, with a trigger of the matching kind", () => {
    expect(Object.keys(sls.functions).sort()).toEqual(["reconcile", "render"]);
    for (const [name, fn] of Object.entries(sls.functions)) {
      // The plugin refuses "file.export" handlers: Cloud Functions looks the name up in the main module.
      expect(fn.handler, name).toMatch(/^[A-Za-z0-9_]+$/);
      expect(fn.events, name).toHaveLength(1);
      const reg = registration(fn.handler);
      expect(reg, `nothing in functions/ registers "${fn.handler}"`).toBeDefined();
      const event = fn.events[0]!;
      expect(reg!.kind, name).toBe(event.http !== undefined ? "http" : "cloudEvent");
      if (event.event)
        expect(
          Object.keys(event.event).every((k) => ["eventType", "resource", "path", "failurePolicy"].includes(k)),
        ).toBe(true);
    }
  });

  it("sets only variables the code reads, and the functions start with them", () => {
    const readable = new Set([
      ...FUNCTION_SETTING_KEYS.map(envName),
      ...envNamesInSources(),
      ...functionsFrameworkEnvNames(),
      ...awsCredentialEnvNames(),
    ]);
    for (const [name, fn] of Object.entries(sls.functions)) {
      const env: Record<string, string> = { ...sls.provider.environment, ...fn.environment };
      for (const secret of Object.keys({ ...sls.provider.secrets, ...fn.secrets })) env[secret] = "from-secret-manager";
      for (const variable of Object.keys(env)) expect(readable.has(variable), `${name}: ${variable}`).toBe(true);
      const settings = loadFunctionSettings(env);
      if (name === "reconcile") expect(requireStore(settings).url).toBe("s3://demo-bucket/servicelb");
    }
  });

  it("packages the compiled functions, the templates, and what `npm ci` needs to rebuild them", () => {
    const { patterns } = sls.package;
    for (const path of [
      "package.json",
      "package-lock.json",
      "tsconfig.json",
      "templates/haproxy.cfg.liquid",
      "dist/functions/render.js",
      "dist/functions/reconcile.js",
      "dist/shared/app/reconcile.js",
      "functions/render.ts",
      "shared/app/reconcile.ts",
    ]) {
      expect(packaged(patterns, path), path).toBe(true);
    }
    for (const path of [
      "node_modules/zod/package.json",
      "test/infra/serverless.test.ts",
      "infra/base/agent.yaml",
      ".git/config",
    ])
      expect(packaged(patterns, path), path).toBe(false);
  });

  it("packages no local-stack, test or benchmark code, as source or compiled by either build", () => {
    const { patterns } = sls.package;
    for (const path of [
      "shared/dev/kube-api-emulator.ts",
      "dist/shared/dev/kube-api-emulator.js",
      "dist/dev/shared/dev/stack.js",
      "dist/dev/shared/app/reconcile.js",
      "dist/dev/bench/e2e.js",
      "dist/test/support/s3.js",
      "bench/delivery-policy.ts",
      "test/support/kube-api.ts",
    ]) {
      expect(developmentOnly(path), path).toBe(true);
      expect(packaged(patterns, path), path).toBe(false);
    }
    expect(serviceFiles().filter((f) => packaged(patterns, f) && developmentOnly(f))).toEqual([]);
  });

  // Cloud Functions runs `npm ci` (with its lifecycle scripts: `prepare` builds) and then `gcp-build`
  // on exactly the uploaded files; the main module must then register each handler.
  it("builds and loads from exactly the files it packages", () => {
    const dir = mkdtempSync(join(tmpdir(), "servicelb-gcf-"));
    for (const file of serviceFiles().filter((f) => packaged(sls.package.patterns, f))) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      cpSync(join(REPO, file), join(dir, file));
    }
    const output = ["npm ci", "npm run gcp-build"].map((step) => runCommand(step, dir, {}, REPO)).join("");
    expect(output).not.toMatch(/unrecognized|unknown option/i);
    // What Cloud Functions builds there holds no development code either, bundles included.
    expect(filesUnder(join(dir, "dist")).filter((f) => developmentOnly(`dist/${f}`))).toEqual([]);
    const maps = filesUnder(join(dir, "dist", "bundle")).filter((f) => f.endsWith(".mjs.map"));
    for (const name of Object.keys(sls.functions)) expect(maps).toContain(`${name}.mjs.map`);
    for (const map of maps)
      expect(bundledModules(join(dir, "dist", "bundle", map)).filter(developmentOnly), map).toEqual([]);
    // Each function runs from its bundle: the main module registers it with the rest of the
    // compiled modules gone.
    for (const f of filesUnder(join(dir, "dist")))
      if (f.endsWith(".js") && join("dist", f) !== pkg.main) rmSync(join(dir, "dist", f));
    for (const [name, fn] of Object.entries(sls.functions)) {
      const script = `await import("./${pkg.main}"); const { getFunction } = await import("@google-cloud/functions-framework/testing"); if (!getFunction(${JSON.stringify(fn.handler)})) process.exit(3);`;
      const env: Record<string, string> = {
        ...sls.provider.environment,
        ...fn.environment,
        FUNCTION_TARGET: fn.handler,
      };
      for (const secret of Object.keys({ ...sls.provider.secrets, ...fn.secrets })) env[secret] = "from-secret-manager";
      const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
        cwd: dir,
        env: { ...process.env, ...env },
        encoding: "utf8",
      });
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
    }
  }, 180_000);

  // Cloud Functions loads package.json "main", which registers the function FUNCTION_TARGET names.
  it("deploys a main module that Cloud Functions can load", () => {
    const main = pkg.main ?? "index.js";
    expect(packaged(sls.package.patterns, main), main).toBe(true);
    expect(existsSync(join(REPO, main.replace(/^dist\//, "").replace(/\.js$/, ".ts")))).toBe(true);
  });

  // Overlapping passes are survived (view markers), but one instance narrows the window further (issue 11).
  it("fails to package without the kubeconfig it ships, or with a file that is no kubeconfig, and packages the one it names", () => {
    const params = { project: "demo-project", store: "s3://demo-bucket/servicelb" };
    expect(() => load({ ...params, kubeconfig: "kubeconfig.missing.yaml" })).toThrow(
      /Value not found at "file" source/,
    );
    expect(() => load({ ...params, kubeconfig: "package.json" })).toThrow(/Value not found at "file" source/);
    expect(sls.provider.environment?.SERVICELB_KUBECONFIG).toBe(KUBECONFIG);
    expect(packaged(sls.package.patterns, KUBECONFIG)).toBe(true);
  });

  it("runs reconcile on one instance at most", () => {
    expect(sls.functions.reconcile!.maxInstances).toBe(1);
  });

  // functions-framework turns the Pub/Sub trigger into a google.cloud.pubsub.topic.v1.messagePublished
  // CloudEvent; reconcile must take it as a resync.
  it("triggers reconcile with events it acts on", () => {
    const middleware = join(
      dirname(require.resolve("@google-cloud/functions-framework")),
      "middleware/background_event_to_cloud_event.js",
    );
    const { eventType } = sls.functions.reconcile!.events[0]!.event!;
    const ceType = new RegExp(`'${eventType.replace(/[./]/g, "\\$&")}': '([^']+)'`).exec(
      readFileSync(middleware, "utf8"),
    )?.[1];
    expect(ceType, `functions-framework converts ${eventType}`).toBeDefined();
    const event = {
      specversion: "1.0",
      id: "1",
      type: ceType!,
      source: "//pubsub.googleapis.com/projects/demo-project/topics/servicelb-reconcile",
      data: { message: { data: "" } },
    };
    expect(classifyEvent(event, loadFunctionSettings({}).options).verdict).toMatch(/^(resync|relevant)$/);
  });
});
