import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real HAProxy and servers on loopback ports; two cores.
    maxWorkers: 2,
    // The AWS SDK's Node 22 notice, once per process that creates a client (it accepts only "true").
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
