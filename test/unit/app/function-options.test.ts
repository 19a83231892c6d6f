import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { OptionsError } from "../../../shared/core/settings/settings.js";
import { loadFunctionSettings, requireStore } from "../../../shared/app/function-options.js";

const dir = mkdtempSync(join(tmpdir(), "servicelb-settings-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("loadFunctionSettings: reconcile settings", () => {
  it("has defaults that publish nowhere and ping nobody", () => {
    const s = loadFunctionSettings({});
    expect(s.store).toBeUndefined();
    expect(s.notify).toEqual({
      agents: [],
      agentService: undefined,
      agentPort: "agent",
      token: undefined,
      tokenFile: undefined,
      timeoutMs: 2000,
      concurrency: 64,
      deadlineMs: 5000,
    });
    expect(() => requireStore(s)).toThrow(/--store \/ SERVICELB_STORE is required/);
  });

  it("reads the store and notifier from SERVICELB_* variables", () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "secret\n");
    const s = loadFunctionSettings({
      SERVICELB_STORE: "s3://configs/lb/prod",
      SERVICELB_STORE_ENDPOINT: "http://minio:9000",
      SERVICELB_STORE_REGION: "eu-west-1",
      SERVICELB_STORE_PATH_STYLE: "true",
      SERVICELB_STORE_RETAIN: "10",
      SERVICELB_AGENTS: "http://10.0.0.1:8081, http://10.0.0.2:8081,",
      SERVICELB_AGENT_SERVICE: "servicelb/agent",
      SERVICELB_AGENT_PORT: "8081",
      SERVICELB_NOTIFY_TOKEN_FILE: tokenFile,
      SERVICELB_NOTIFY_TIMEOUT_MS: "750",
    });
    expect(s.store).toEqual({
      url: "s3://configs/lb/prod",
      endpoint: "http://minio:9000",
      region: "eu-west-1",
      forcePathStyle: true,
      retain: 10,
    });
    expect(s.notify).toEqual({
      agents: ["http://10.0.0.1:8081", "http://10.0.0.2:8081"],
      agentService: { namespace: "servicelb", name: "agent" },
      agentPort: 8081,
      token: undefined,
      tokenFile,
      timeoutMs: 750,
      concurrency: 64,
      deadlineMs: 5000,
    });
  });

  it("falls back to AWS_REGION for the store region", () => {
    expect(loadFunctionSettings({ SERVICELB_STORE: "s3://configs", AWS_REGION: "ap-south-1" }).store?.region).toBe(
      "ap-south-1",
    );
  });

  it("takes typed values from the config file, variables and then flags winning", () => {
    const file = join(dir, "settings.yaml");
    writeFileSync(file, "store: s3://from-file\nagents: [http://a:1, http://b:2]\nstorePathStyle: true\n");
    const s = loadFunctionSettings({ SERVICELB_CONFIG: file, SERVICELB_STORE: "s3://from-env" }, { storeRetain: "3" });
    expect(s.store).toMatchObject({ url: "s3://from-env", forcePathStyle: true, retain: 3 });
    expect(s.notify.agents).toEqual(["http://a:1", "http://b:2"]);
  });

  it.each([
    ["SERVICELB_STORE", "https://bucket/x"],
    ["SERVICELB_STORE", "s3://UPPER"],
    ["SERVICELB_STORE_ENDPOINT", "minio:9000"],
    ["SERVICELB_STORE_PATH_STYLE", "sometimes"],
    ["SERVICELB_STORE_RETAIN", "0"],
    ["SERVICELB_AGENTS", "10.0.0.1:8081"],
    ["SERVICELB_AGENT_SERVICE", "agent"],
    ["SERVICELB_AGENT_PORT", "Agent_Port"],
    ["SERVICELB_AGENT_PORT", "70000"],
    ["SERVICELB_NOTIFY_TOKEN_FILE", "/nonexistent/token"],
    ["SERVICELB_NOTIFY_TIMEOUT_MS", "soon"],
    ["SERVICELB_MAX_BODY_BYTES", "12"],
  ])("refuses %s=%s at start, naming the variable", (name, value) => {
    const load = () => loadFunctionSettings({ [name]: value });
    expect(load).toThrow(OptionsError);
    expect(load).toThrow(new RegExp(`^${name}: `));
  });
});
