import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createObjectStore, type ObjectStore } from "../../shared/adapters/store.js";
import { initialRecord, type RolloutRecord } from "../../shared/core/rollout/rollout-record.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

// `servicelb rollout status | promote | abort` as an operator runs them, against s3rver.

const bin = join(import.meta.dirname, "..", "..", "bin", "servicelb.js");

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: "/nonexistent-home",
        LOG_LEVEL: "silent",
        AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

let s3: TestS3;
let store: ObjectStore;
let storeArgs: string[];

beforeAll(async () => {
  s3 = await startS3();
  const url = `s3://${s3.bucket}/rollout`;
  storeArgs = ["--store", url, "--store-endpoint", s3.endpoint, "--store-path-style"];
  store = createObjectStore({ url, endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
});

afterAll(async () => {
  store.close();
  await s3.stop();
});

const key = (n: number) => `rollout/configs/000000-${String(n).padStart(20, "0")}-0000000000-${"a".repeat(16)}.cfg`;

function failed(): RolloutRecord {
  const at = "2026-12-02T10:00:00.000Z";
  return {
    ...initialRecord({ key: key(1), sha256: "1".repeat(64) }, new Date(at)),
    rollout: {
      id: key(2),
      candidate: { key: key(2), sha256: "2".repeat(64) },
      state: "failed",
      wave: 0,
      sizes: [1, 3],
      order: ["edge-b", "edge-a", "edge-c"],
      startedAt: at,
      waveStartedAt: at,
      reason: "default_shop_80: 5xx rate 100.00% on the canary against 0.00% on the control (at most +0.50%)",
      gate: null,
    },
    rejected: [{ key: key(2), sha256: "2".repeat(64) }],
  };
}

describe("servicelb rollout", () => {
  it("says there is no rollout without rollout.json, and refuses to promote or abort nothing", async () => {
    const status = await cli(["rollout", "status", ...storeArgs]);
    expect(status).toMatchObject({
      code: 0,
      stdout: "no rollout.json: canary rollouts are off, every node follows the newest config\n",
    });
    const promote = await cli(["rollout", "promote", ...storeArgs]);
    expect(promote.code).not.toBe(0);
    expect(promote.stderr).toMatch(/no rollout\.json: canary rollouts are off \(SERVICELB_CANARY\)/);
  });

  it("prints a failed rollout and exits 3; abort closes it and leaves every node on the stable config", async () => {
    await store.putRollout(failed());
    const status = await cli(["rollout", "status", ...storeArgs]);
    expect(status.code).toBe(3);
    expect(status.stdout).toContain(`candidate  ${key(2)}\nstate      failed: default_shop_80: 5xx rate 100.00%`);
    const json = await cli(["rollout", "status", "--format", "json", ...storeArgs]);
    expect(JSON.parse(json.stdout)).toMatchObject({ rollout: { state: "failed" } });
    const abort = await cli(["rollout", "abort", ...storeArgs]);
    expect(abort).toMatchObject({ code: 0 });
    expect(abort.stdout).toMatch(/closed by an operator: new structural configs roll out again/);
    expect(await store.getRollout()).toMatchObject({
      stable: { key: key(1) },
      rollout: null,
      rejected: [{ key: key(2) }],
    });
    expect((await cli(["rollout", "abort", ...storeArgs])).stderr).toMatch(/no rollout to abort: every node runs/);
  });

  it("promote after a failure runs the candidate on every node", async () => {
    await store.putRollout(failed());
    const promote = await cli(["rollout", "promote", ...storeArgs]);
    expect(promote).toMatchObject({ code: 0 });
    expect(await store.getRollout()).toMatchObject({ stable: { key: key(2) }, rollout: null, rejected: [] });
    expect((await cli(["rollout", "status", ...storeArgs])).stdout).toMatch(
      /history {4}\S+ promoted .*after its gate failed/,
    );
  });
});
