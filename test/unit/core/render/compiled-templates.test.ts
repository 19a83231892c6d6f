import { describe, expect, it } from "vitest";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import { compileTemplates } from "../../../../shared/core/render/compiled-templates.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { list, service, slice } from "../../../support/fixtures.js";

const options = parseRenderOptions({});
const model = (ip: string) =>
  buildModel(
    snapshotFromDocuments([
      list([service("web", [{ port: 80, name: "p" }]), slice("web", [{ name: "p", port: 8080 }], [ip])]),
    ]),
    options,
  );

describe("compileTemplates", () => {
  it("parses a template set once per set object, and another object of the same texts anew", () => {
    const templates = loadTemplates();
    expect(compileTemplates(templates)).toBe(compileTemplates(templates));
    expect(compileTemplates(loadTemplates())).not.toBe(compileTemplates(templates));
  });

  it("keeps no render's state: renderers sharing a parse each render what a renderer of their own gives", () => {
    const templates = loadTemplates();
    const a = new Renderer(templates);
    const b = new Renderer(templates);
    a.renderBytes(model("10.0.0.1"));
    const fromB = b.renderBytes(model("10.0.0.2"));
    expect(a.renderBytes(model("10.0.0.2")).equals(fromB)).toBe(true);
    expect(fromB.equals(new Renderer(loadTemplates()).renderBytes(model("10.0.0.2")))).toBe(true);
    expect(fromB.toString()).toContain("10.0.0.2:8080");
  });
});
