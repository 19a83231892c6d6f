/* The node agent as the benchmarks run it — its own process (dist/functions/agent.js) on an s3rver store, its log in a file — and the cluster it serves. */

import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../shared/adapters/templates.js";
import { service, slice } from "../test/support/fixtures.js";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";

export interface AgentProcessOptions {
  /** s3://bucket/prefix */
  store: string;
  storeEndpoint: string;
  port: number;
  configPath: string;
  masterSocket: string;
  token: string;
  /** Where its stderr (and HAProxy's, through it) goes: thousands of health-check lines would bury the tables. */
  logFile: string;
  /** More SERVICELB_* variables. */
  env?: Record<string, string>;
}

export function spawnAgent(o: AgentProcessOptions): ChildProcess {
  // The agent as the image runs it: the production build's entry, not the development build's copy.
  const entry = join(packageRoot(), "dist", "functions", "agent.js");
  const log = openSync(o.logFile, "w");
  try {
    return spawn(process.execPath, [entry], {
      stdio: ["ignore", "ignore", log],
      env: {
        PATH: process.env.PATH,
        LOG_LEVEL: "warn",
        AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
        SERVICELB_STORE: o.store,
        SERVICELB_STORE_ENDPOINT: o.storeEndpoint,
        SERVICELB_STORE_PATH_STYLE: "true",
        SERVICELB_NODE_NAME: "bench",
        SERVICELB_LISTEN: `127.0.0.1:${o.port}`,
        SERVICELB_CONFIG_PATH: o.configPath,
        SERVICELB_MASTER_SOCKET: o.masterSocket,
        SERVICELB_POLL_INTERVAL: "60s",
        SERVICELB_NOTIFY_TOKEN: o.token,
        ...(process.env.SERVICELB_TRACE_FILE ? { SERVICELB_TRACE_FILE: process.env.SERVICELB_TRACE_FILE } : {}),
        ...o.env,
      },
    });
  } finally {
    closeSync(log);
  }
}

/**
 * `services - 1` filler Services of `endpoints` loopback endpoints each, on a closed port (health
 * checks fail fast, nothing leaves the machine), plus the objects the measurement needs.
 */
export function fillerCluster(services: number, endpoints: number, closedPort: number, extra: unknown[]): unknown[] {
  const items: unknown[] = [];
  for (let i = 0; i < services - 1; i++) {
    const hosts = Array.from(
      { length: endpoints },
      (_, j) => `127.${1 + (Math.floor(i / 256) % 250)}.${i % 256}.${j + 10}`,
    );
    items.push(
      service(`svc-${i}`, [{ port: 80, targetPort: closedPort }]),
      slice(`svc-${i}`, [{ port: closedPort }], hosts),
    );
  }
  return [...items, ...extra];
}
