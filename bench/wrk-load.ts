/*
 * What the data-plane benches share: pods that are not the bottleneck (one HAProxy thread that
 * answers `200 ok` itself on each pod address, keep-alive), wrk as the load, and its output read.
 */

import { spawn, spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { haproxyAvailable } from "../shared/adapters/haproxy/check.js";
import { runtimeCommand } from "../shared/adapters/haproxy/runtime.js";

const WRK = "wrk";

/** The pods' addresses on loopback (127.0.0.0/8 is all loopback on Linux). */
export const PODS = ["127.0.0.2", "127.0.0.3"];

/** HAProxy's version, once HAProxy and wrk are both found installed. */
export async function requireLoadTools(): Promise<string> {
  const version = await haproxyAvailable();
  if (!version) throw new Error("haproxy is not installed: apt-get install -y haproxy");
  if (spawnSync(WRK, ["--version"]).error) throw new Error("wrk is not installed: apt-get install -y wrk");
  return version;
}

/** The 1-minute load average, to two decimals. */
export const load1 = (): number => Math.round(loadavg()[0]! * 100) / 100;

/** The pods: one HAProxy that answers every request itself, keeping connections alive. */
export function podConfig(port: number, socket: string): string {
  const frontends = PODS.map(
    (host, i) => `frontend pod_${i + 1}
    bind ${host}:${port}
    http-request return status 200 content-type text/plain string ok
`,
  );
  return `global
    nbthread 1
    stats socket ${socket} mode 600 level admin

defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 60s

${frontends.join("\n")}`;
}

export interface WrkResult {
  reqPerSec: number;
  /** Requests answered over the run. */
  requests: number;
  latencyMs: number;
  /** wrk's socket errors plus non-2xx/3xx answers. */
  errors: number;
}

export function parseWrk(out: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const lat = /Latency\s+([\d.]+)(us|ms|s)\b/.exec(out);
  const total = /(\d+) requests in /.exec(out);
  if (!rps || !lat || !total) throw new Error(`cannot read wrk's output:\n${out}`);
  const scale = { us: 0.001, ms: 1, s: 1000 }[lat[2] as "us" | "ms" | "s"];
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const errors = (socket ? socket.slice(1).reduce((s, n) => s + Number(n), 0) : 0) + (non2xx ? Number(non2xx[1]) : 0);
  return { reqPerSec: Number(rps[1]), requests: Number(total[1]), latencyMs: Number(lat[1]) * scale, errors };
}

/** `wrk -t1 -c<connections> -d<seconds>s [-H header]… url`; resolves with what it printed. */
export function wrk(url: string, load: { connections: number; seconds: number; headers?: string[] }): Promise<string> {
  const headers = (load.headers ?? []).flatMap((h) => ["-H", h]);
  return new Promise((resolve, reject) => {
    const child = spawn(WRK, ["-t1", `-c${load.connections}`, `-d${load.seconds}s`, ...headers, url], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited with ${code}:\n${out}`))));
  });
}

/** Connections a HAProxy has accepted since it started. */
export async function cumConns(socket: string): Promise<number> {
  const m = /^CumConns: (\d+)$/m.exec(await runtimeCommand(socket, "show info"));
  if (!m) throw new Error("no CumConns in the pods' show info");
  return Number(m[1]);
}
