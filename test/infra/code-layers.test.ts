import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "../support/infra-manifests.js";

// The layering docs/development.md states, checked on every import of the shipped code: core
// imports nothing above it and does no I/O, no import runs back up a layer, nothing shipped
// imports the local stack, and no two modules import each other, directly or around a loop.

/** What each folder may import, as docs/development.md#layout states it. */
const MAY_IMPORT = {
  core: ["core"],
  adapters: ["core", "adapters"],
  agent: ["core", "adapters", "agent"],
  app: ["core", "adapters", "agent", "app"],
  dev: ["core", "adapters", "dev"],
  functions: ["core", "adapters", "agent", "app"],
} as const;
type Layer = keyof typeof MAY_IMPORT;

/** Node modules core may use: hashing and address parsing, which do no I/O. */
const CORE_BUILTINS = new Set(["node:crypto", "node:net"]);

function sources(dir: string): string[] {
  return readdirSync(join(REPO, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(REPO, path)).isDirectory()) return sources(path);
    return /\.(ts|mts)$/.test(name) ? [path] : [];
  });
}

function layerOf(file: string): Layer {
  if (file.startsWith("functions/")) return "functions";
  const layer = file.split("/")[1] ?? "";
  if (!(layer in MAY_IMPORT) || layer === "functions") throw new Error(`${file} is in no layer`);
  return layer as Layer;
}

function importsOf(file: string): string[] {
  const text = readFileSync(join(REPO, file), "utf8");
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*"([^"]+)"|import\("([^"]+)"\)/g)].map(
    (m) => m[1] ?? m[2] ?? "",
  );
}

function mayImport(from: Layer, to: Layer): boolean {
  return (MAY_IMPORT[from] as readonly Layer[]).includes(to);
}

const files = [...sources("shared"), ...sources("functions")];
const graph = new Map<string, string[]>();
for (const file of files) {
  const local = importsOf(file)
    .filter((spec) => spec.startsWith("."))
    .map((spec) => normalize(join(dirname(file), spec)).replace(/\.js$/, ".ts"));
  graph.set(
    file,
    local.filter((to) => graph.has(to) || files.includes(to)),
  );
}

/** Strongly connected components of more than one module (Tarjan). */
function cycles(): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    order.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!order.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, order.get(w) ?? 0));
    }
    if (low.get(v) === order.get(v)) {
      const component: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!order.has(v)) visit(v);
  return found;
}

describe("the code's layers", () => {
  it("finds the modules it checks", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files).toContain("shared/app/reconcile.ts");
  });

  it("no import runs back up a layer, and nothing shipped imports the local stack", () => {
    const wrong = [...graph].flatMap(([from, tos]) =>
      tos.filter((to) => !mayImport(layerOf(from), layerOf(to))).map((to) => `${from} → ${to}`),
    );
    expect(wrong).toEqual([]);
  });

  it("core does no I/O: of Node's modules it imports only hashing and address parsing", () => {
    const wrong = files
      .filter((file) => layerOf(file) === "core")
      .flatMap((file) =>
        importsOf(file)
          .filter((spec) => !spec.startsWith(".") && !CORE_BUILTINS.has(spec) && spec.startsWith("node:"))
          .map((spec) => `${relative("shared/core", file)} imports ${spec}`),
      );
    expect(wrong).toEqual([]);
  });

  it("no module imports itself around a loop", () => {
    expect(cycles()).toEqual([]);
  });

  it("the check itself catches a loop and a climb", () => {
    graph.set("shared/core/a.ts", ["shared/core/b.ts"]);
    graph.set("shared/core/b.ts", ["shared/core/a.ts", "shared/app/reconcile.ts"]);
    try {
      expect(cycles()).toContainEqual(["shared/core/a.ts", "shared/core/b.ts"]);
      expect(mayImport(layerOf("shared/core/b.ts"), layerOf("shared/app/reconcile.ts"))).toBe(false);
    } finally {
      graph.delete("shared/core/a.ts");
      graph.delete("shared/core/b.ts");
    }
  });
});
