import { describe, expect, it } from "vitest";
import { LiveView } from "../../../../shared/core/kubernetes/live-view.js";
import type { FreshReads } from "../../../../shared/core/kubernetes/snapshot-overlay.js";
import type { Snapshot } from "../../../../shared/core/kubernetes/snapshot.js";
import { endpointSliceSchema } from "../../../../shared/core/kubernetes/snapshot-schemas.js";
import { slice } from "../../../support/fixtures.js";

const web = (ip: string, rv: string) =>
  endpointSliceSchema.parse(slice("web", [{ name: "http", port: 8080 }], [ip], { name: "web-a", resourceVersion: rv }));
const listOf = (ip: string, revision: string): Snapshot => ({
  services: [],
  endpointSlices: [web(ip, revision)],
  endpoints: [],
  revision,
  problems: [],
});
const readOf = (ip: string, rv: string): FreshReads => ({
  services: [],
  endpointSlices: [{ namespace: "default", name: "web-a", item: web(ip, rv) }],
  slicesOf: [],
  problems: [],
});
const ipOf = (s: Snapshot | undefined) => s?.endpointSlices[0]?.readyAddresses[0];

describe("LiveView", () => {
  it("has nothing to lay a read over before its first list", () => {
    const view = new LiveView<Snapshot>();
    expect(view.read(view.ticket(), readOf("10.0.0.2", "11"))).toBeUndefined();
    expect(view.snapshot).toBeUndefined();
  });

  it("lays a read over the list it started after, at the revision of what it read", () => {
    const view = new LiveView<Snapshot>();
    view.listed(view.ticket(), listOf("10.0.0.1", "10"));
    const out = view.read(view.ticket(), readOf("10.0.0.2", "11"));
    expect(ipOf(out)).toBe("10.0.0.2");
    expect(out?.revision).toBe("11");
    expect(view.snapshot).toBe(out);
  });

  it("lets a list subsume the reads that started before it", () => {
    const view = new LiveView<Snapshot>();
    view.listed(view.ticket(), listOf("10.0.0.1", "10"));
    const early = view.ticket();
    const list = view.ticket();
    view.listed(list, listOf("10.0.0.3", "12"));
    // The read's event came before the list started: the list holds that change or a newer one.
    expect(ipOf(view.read(early, readOf("10.0.0.2", "11")))).toBe("10.0.0.3");
  });

  it("keeps a read that started after a list on its way laid over that list when it arrives", () => {
    const view = new LiveView<Snapshot>();
    view.listed(view.ticket(), listOf("10.0.0.1", "10"));
    const list = view.ticket();
    view.read(view.ticket(), readOf("10.0.0.2", "11"));
    // The list was served before the change the read saw.
    const out = view.listed(list, listOf("10.0.0.1", "10"));
    expect(ipOf(out)).toBe("10.0.0.2");
    expect(out.revision).toBe("11");
    // A later list subsumes the read.
    expect(ipOf(view.listed(view.ticket(), listOf("10.0.0.4", "13")))).toBe("10.0.0.4");
  });

  it("ignores a list that started before the one it holds, and forgets everything after a restore", () => {
    const view = new LiveView<Snapshot>();
    const older = view.ticket();
    view.listed(view.ticket(), listOf("10.0.0.5", "20"));
    expect(ipOf(view.listed(older, listOf("10.0.0.1", "10")))).toBe("10.0.0.5");
    view.forget();
    expect(view.snapshot).toBeUndefined();
  });
});
