import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { OptionsError } from "../../../shared/core/settings/settings.js";
import {
  agentOptionSpecs,
  haproxyEnvironment,
  parseAgentOptions,
  stateFilePath,
} from "../../../shared/agent/options.js";

const env = { SERVICELB_STORE: "s3://configs/prod", SERVICELB_NOTIFY_TOKEN: "t" };

describe("parseAgentOptions", () => {
  it("applies the documented defaults", () => {
    const o = parseAgentOptions(env);
    expect(o).toMatchObject({
      store: "s3://configs/prod",
      storePathStyle: false,
      listen: { host: "0.0.0.0", port: 8081 },
      configPath: "/etc/haproxy/haproxy.cfg",
      stateDir: "/etc/haproxy",
      masterSocket: "/var/run/haproxy/master.sock",
      haproxyBin: "haproxy",
      pollInterval: 30_000,
      minReloadInterval: 1000,
      statusInterval: 60_000,
      certificateInterval: 2000,
      stopGrace: 330_000,
      storeTimeout: 20_000,
      maxConfigSize: 64 * 1024 * 1024,
      stalePullPeriods: 3,
      notifyToken: "t",
    });
    expect(o.nodeName).toBe(hostname().toLowerCase());
    expect(stateFilePath(o)).toBe("/etc/haproxy/servicelb-agent.json");
  });

  it("reads SERVICELB_* variables, and flags win over them", () => {
    const o = parseAgentOptions(
      {
        ...env,
        SERVICELB_POLL_INTERVAL: "5m",
        SERVICELB_LISTEN: "[::1]:9000",
        SERVICELB_STORE_PATH_STYLE: "true",
        SERVICELB_NODE_NAME: "node-a",
        AWS_REGION: "eu-west-1",
      },
      { pollInterval: "250ms", minReloadInterval: "0ms", stateDir: "/var/lib/agent", storePathStyle: undefined },
    );
    expect(o).toMatchObject({
      pollInterval: 250,
      minReloadInterval: 0,
      listen: { host: "::1", port: 9000 },
      storePathStyle: true,
      nodeName: "node-a",
      stateDir: "/var/lib/agent",
      storeRegion: "eu-west-1",
    });
  });

  it("reads sizes with binary units and whole numbers of periods", () => {
    expect(
      parseAgentOptions(
        { ...env, SERVICELB_MAX_CONFIG_SIZE: "8Mi", SERVICELB_STALE_PULL_PERIODS: "5" },
        { storeTimeout: "2m" },
      ),
    ).toMatchObject({ maxConfigSize: 8 * 1024 * 1024, stalePullPeriods: 5, storeTimeout: 120_000 });
    expect(parseAgentOptions(env, { maxConfigSize: "65536" }).maxConfigSize).toBe(65536);
    expect(() => parseAgentOptions({ ...env, SERVICELB_MAX_CONFIG_SIZE: "64MB" })).toThrow(
      /--max-config-size \/ SERVICELB_MAX_CONFIG_SIZE: a size in bytes, or with Ki, Mi or Gi/,
    );
    expect(() => parseAgentOptions({ ...env, SERVICELB_MAX_CONFIG_SIZE: "10" })).toThrow(/at least 1024 bytes/);
    expect(() => parseAgentOptions({ ...env, SERVICELB_STALE_PULL_PERIODS: "0" })).toThrow(/--stale-pull-periods/);
  });

  it("never takes the token from a flag (it would show in ps)", () => {
    expect(agentOptionSpecs.notifyToken).toMatchObject({ envOnly: true });
    expect(() => parseAgentOptions({ SERVICELB_STORE: "s3://configs" }, { notifyToken: "x" })).toThrow(
      /--notify-token-file \/ SERVICELB_NOTIFY_TOKEN_FILE or SERVICELB_NOTIFY_TOKEN is required/,
    );
  });

  it("names each bad setting by flag and variable", () => {
    const bad = () =>
      parseAgentOptions(
        { ...env, SERVICELB_POLL_INTERVAL: "soon" },
        { listen: "8081", store: "http://x", nodeName: "Node_A" },
      );
    expect(bad).toThrow(OptionsError);
    expect(bad).toThrow(/--poll-interval \/ SERVICELB_POLL_INTERVAL: a duration/);
    expect(bad).toThrow(/--listen \/ SERVICELB_LISTEN: host:port/);
    expect(bad).toThrow(/--store \/ SERVICELB_STORE: s3:\/\/bucket/);
    expect(bad).toThrow(/--node-name \/ SERVICELB_NODE_NAME: a DNS-1123 subdomain/);
    expect(() => parseAgentOptions({ SERVICELB_NOTIFY_TOKEN: "t" })).toThrow(/--store \/ SERVICELB_STORE is required/);
    expect(() => parseAgentOptions({ ...env, SERVICELB_POLL_INTERVAL: "10ms" })).toThrow(/at least 100 ms/);
    expect(() => parseAgentOptions({ ...env, SERVICELB_MASTER_SOCKET: `/${"x".repeat(120)}` })).toThrow(/unix socket/);
  });
});

describe("haproxyEnvironment", () => {
  it("gives HAProxy the agent's environment with the node's address and its config's directory", () => {
    const o = parseAgentOptions(
      { ...env, SERVICELB_CONFIG_PATH: "/data/node-2/haproxy/haproxy.cfg" },
      { nodeAddress: "127.0.0.2" },
    );
    expect(haproxyEnvironment(o, { PATH: "/bin", SERVICELB_NODE_ADDRESS: "10.0.0.9" })).toEqual({
      PATH: "/bin",
      SERVICELB_NODE_ADDRESS: "127.0.0.2",
      SERVICELB_CONFIG_DIR: "/data/node-2/haproxy",
    });
    // Without --node-address, the variable is the agent's own (set from the downward API, say), or unset.
    const plain = parseAgentOptions(env);
    expect(haproxyEnvironment(plain, { PATH: "/bin" })).toEqual({ PATH: "/bin", SERVICELB_CONFIG_DIR: "/etc/haproxy" });
    expect(() => parseAgentOptions(env, { nodeAddress: "node-2" })).toThrow(/--node-address.*IPv4/);
  });

  it("gives HAProxy the node's --gateway-cert-dir, where a config's Gateway certificates are", () => {
    const o = parseAgentOptions({ ...env, SERVICELB_GATEWAY_CERT_DIR: "/etc/servicelb/gateway-certs" });
    expect(haproxyEnvironment(o, { PATH: "/bin" })).toEqual({
      PATH: "/bin",
      SERVICELB_CONFIG_DIR: "/etc/haproxy",
      SERVICELB_GATEWAY_CERT_DIR: "/etc/servicelb/gateway-certs",
    });
  });
});
