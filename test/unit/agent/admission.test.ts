import { describe, expect, it } from "vitest";
import { createLogger } from "../../../shared/adapters/log.js";
import type { CheckOptions } from "../../../shared/adapters/haproxy/check.js";
import { admitConfig } from "../../../shared/agent/admission.js";

const config = 'global\n    master-worker\nfrontend http\n    bind "${SERVICELB_NODE_ADDRESS}":80\n';

/** Admission with a `haproxy -c` that passes every config, remembering the environment it was given. */
function admit(env: Record<string, string>) {
  const seen: Array<CheckOptions["env"]> = [];
  const verdict = admitConfig(
    { key: "k", config },
    {
      check: async (_text, opts) => {
        seen.push(opts.env);
        return { ok: true, warnings: [] };
      },
      haproxyBin: "haproxy",
      timeoutMs: 1000,
      workDir: "/tmp",
      log: createLogger("admission-test", "silent"),
      env,
    },
  );
  return { verdict, seen };
}

describe("admitConfig", () => {
  it("refuses a config that takes a SERVICELB_ variable the node's HAProxy environment does not set, unchecked", async () => {
    const { verdict, seen } = admit({ PATH: "/bin" });
    expect(await verdict).toEqual({
      ok: false,
      stage: "check",
      message: expect.stringContaining("${SERVICELB_NODE_ADDRESS} from HAProxy's environment, which does not set it"),
    });
    expect(seen).toEqual([]);
  });

  it("checks it with HAProxy's environment when the node sets them", async () => {
    const env = { PATH: "/bin", SERVICELB_NODE_ADDRESS: "127.0.0.2" };
    const { verdict, seen } = admit(env);
    expect(await verdict).toEqual({ ok: true });
    expect(seen).toEqual([env]);
  });
});
