/*
 * Certificates renewed on the node, served without a reload. Every tick the watcher looks at the
 * file of each certificate HAProxy loaded (`show ssl cert`: the files of `--ssl-cert`, its
 * directory or its crt-list) and `<file>.key` beside it; a file whose contents changed is checked
 * (certificate-pem.ts) and, when HAProxy serves another certificate under that name, swapped in
 * through the runtime API (`set ssl cert` + `commit ssl cert`). No reload, so no handshake is
 * dropped and no connection moves to a new worker.
 *
 * Changes are seen by polling, not fs.watch: a Kubernetes Secret volume renews its files by
 * pointing the `..data` symlink at a new directory, which no watch on the file (or its old
 * inode) reports. stat() follows the links, so a new inode, size or mtime is a change; the
 * contents are then hashed, and only new contents are checked and compared with what HAProxy
 * serves (its SHA-1 fingerprint). After a reload (a new config) every file is compared with what
 * HAProxy serves again: a swap sent as the reload started may have reached the old worker only.
 *
 * A file that fails the check, or that is gone, leaves the certificate HAProxy serves as it is
 * and is reported (log, servicelb_certificate_refused, the node's status) until its contents
 * change. A certificate HAProxy did not load (a file added to the directory or the crt-list) is
 * served from the next reload, as HAProxy reads the list then; so is one whose contents are too
 * large for one runtime command.
 */

import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { isAbsolute } from "node:path";
import type { Counter, Gauge } from "prom-client";
import {
  CertificatePayloadTooLarge,
  certificateNames,
  replaceCertificate,
  servedFingerprint,
} from "../adapters/haproxy/certificates.js";
import type { Logger } from "../adapters/log.js";
import { statsSocketOf } from "../core/haproxy-config/globals.js";
import type { HaproxyEnv } from "../core/haproxy-config/environment.js";
import { checkCertificate } from "./certificate-pem.js";
import { errorMessage } from "../core/error-message.js";

/** The runtime API as the watcher uses it (adapters/haproxy/certificates.ts). */
export interface CertificateRuntime {
  names(socket: string): Promise<string[]>;
  fingerprint(socket: string, name: string): Promise<string>;
  replace(socket: string, name: string, pem: readonly string[]): Promise<void>;
}

export const REAL_CERTIFICATE_RUNTIME: CertificateRuntime = {
  names: (socket) => certificateNames(socket),
  fingerprint: (socket, name) => servedFingerprint(socket, name),
  replace: (socket, name, pem) => replaceCertificate(socket, name, pem),
};

/** Whether a config has HAProxy load certificates: a `bind … ssl … crt|crt-list <path>` line. */
export function loadsCertificates(text: string): boolean {
  return /^[ \t]*bind[ \t].*[ \t]ssl[ \t](.*[ \t])?crt(-list)?[ \t]/m.test(text);
}

/** The node's files as the watcher reads them. */
export interface CertificateFiles {
  /** What changes when the file does (following links), or null when there is no file. */
  signature(path: string): Promise<string | null>;
  /** The contents, or null when there is no file. */
  read(path: string): Promise<string | null>;
}

function missing(err: unknown): boolean {
  return ["ENOENT", "ENOTDIR"].includes((err as NodeJS.ErrnoException).code ?? "");
}

export const NODE_FILES: CertificateFiles = {
  async signature(path) {
    try {
      const s = await stat(path, { bigint: true });
      return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
    } catch (err) {
      if (missing(err)) return null;
      throw err;
    }
  },
  async read(path) {
    try {
      return await readFile(path, "utf8");
    } catch (err) {
      if (missing(err)) return null;
      throw err;
    }
  },
};

export interface CertificateWatchMetrics {
  certificateUpdates: Counter<"result">;
  certificateRefused: Gauge<"certificate">;
}

export interface CertificateWatchOptions {
  /** The config HAProxy runs (its stats socket is the runtime API); null before the first, or while HAProxy is down. */
  running: () => { text: string } | null;
  /** HAProxy's environment, with which the config's socket path is read (default: the agent's own). */
  env?: HaproxyEnv;
  metrics: CertificateWatchMetrics;
  log: Logger;
  runtime?: CertificateRuntime;
  files?: CertificateFiles;
  now?: () => Date;
  /** How long the list of loaded certificates is trusted for one config (default 60 s). */
  namesTtlMs?: number;
}

/** A file whose contents are not served, and why. */
export interface RefusedCertificate {
  certificate: string;
  reason: string;
  since: string;
}

/** What the node's status says of its certificates. */
export interface CertificateWatchStatus {
  /** The end of the last check that listed HAProxy's certificates; null before the first. */
  checkedAt: string | null;
  /** Certificates swapped in through the runtime API since the agent started. */
  swapped: number;
  lastSwap: { certificate: string; at: string; serial: string; notAfter: string } | null;
  refused: RefusedCertificate[];
}

interface Seen {
  signature: string;
  /** sha256 of the contents settled: served, or refused with a reason. */
  hash: string | null;
}

export class CertificateWatch {
  private readonly runtime: CertificateRuntime;
  private readonly files: CertificateFiles;
  private readonly now: () => Date;
  private readonly seen = new Map<string, Seen>();
  private readonly refused = new Map<string, RefusedCertificate>();
  private names: { text: string; at: number; list: string[] } | null = null;
  /** The running config's stats socket when it loads certificates: a search of the whole text, once per config, not every tick. */
  private socketOf: { text: string; socket: string | undefined } | null = null;
  private swapped = 0;
  private checkedAt: string | null = null;
  private lastSwap: CertificateWatchStatus["lastSwap"] = null;
  private readonly skipped = new Set<string>();

  constructor(private readonly options: CertificateWatchOptions) {
    this.runtime = options.runtime ?? REAL_CERTIFICATE_RUNTIME;
    this.files = options.files ?? NODE_FILES;
    this.now = options.now ?? (() => new Date());
    for (const result of ["swapped", "refused", "failed"]) options.metrics.certificateUpdates.inc({ result }, 0);
  }

  status(): CertificateWatchStatus {
    return {
      checkedAt: this.checkedAt,
      swapped: this.swapped,
      lastSwap: this.lastSwap,
      refused: [...this.refused.values()],
    };
  }

  /**
   * One look at every certificate HAProxy loaded. A certificate that cannot be swapped in is
   * logged and counted, and looked at again at the next check; only a list HAProxy does not give
   * fails the check.
   */
  async check(): Promise<void> {
    const running = this.options.running();
    if (running === null) return;
    // A node without --ssl-cert asks HAProxy nothing (nor do agents in front of a fake HAProxy).
    if (this.socketOf?.text !== running.text)
      this.socketOf = {
        text: running.text,
        socket: loadsCertificates(running.text)
          ? statsSocketOf(running.text, this.options.env ?? process.env)
          : undefined,
      };
    const { socket } = this.socketOf;
    if (socket === undefined) {
      this.seen.clear();
      for (const name of [...this.refused.keys()]) this.clearRefusal(name);
      this.checkedAt = this.now().toISOString();
      return;
    }
    const names = await this.loadedNames(socket, running.text);
    const loaded = new Set(names);
    for (const name of [...this.seen.keys()]) if (!loaded.has(name)) this.seen.delete(name);
    for (const name of [...this.refused.keys()]) if (!loaded.has(name)) this.clearRefusal(name);
    for (const name of names) {
      try {
        await this.checkOne(socket, name);
      } catch (err) {
        this.options.metrics.certificateUpdates.inc({ result: "failed" });
        this.options.log.warn(
          { certificate: name, err: errorMessage(err) },
          "cannot swap the renewed certificate in through the runtime API; tried again at the next check",
        );
      }
    }
    this.checkedAt = this.now().toISOString();
  }

  private async loadedNames(socket: string, text: string): Promise<string[]> {
    const ttl = this.options.namesTtlMs ?? 60_000;
    if (this.names?.text !== text || Date.now() - this.names.at >= ttl) {
      const list = (await this.runtime.names(socket)).filter((name) => {
        // The runtime API names a certificate by the path in the config; a relative one is HAProxy's cwd's.
        if (isAbsolute(name)) return true;
        if (!this.skipped.has(name)) {
          this.skipped.add(name);
          this.options.log.warn({ certificate: name }, "a certificate with a relative path is not watched");
        }
        return false;
      });
      // A reload read every file again, and a swap sent while it started may have reached the
      // old worker only: each file is compared with what HAProxy serves once more.
      if (this.names !== null && this.names.text !== text) this.seen.clear();
      this.names = { text, at: Date.now(), list };
    }
    return this.names.list;
  }

  private async checkOne(socket: string, name: string): Promise<void> {
    const keyPath = `${name}.key`;
    const [certSig, keySig] = await Promise.all([this.files.signature(name), this.files.signature(keyPath)]);
    const signature = `${certSig}|${keySig}`;
    const seen = this.seen.get(name);
    if (seen?.signature === signature) return;
    const cert = certSig === null ? null : await this.files.read(name);
    if (cert === null) {
      this.seen.set(name, { signature, hash: null });
      this.refuse(name, `${name}: the file is gone; HAProxy serves what it loaded until the next reload`);
      return;
    }
    const key = keySig === null ? null : await this.files.read(keyPath);
    const hash = createHash("sha256")
      .update(cert)
      .update("\0")
      .update(key ?? "")
      .digest("hex");
    if (seen?.hash === hash) {
      this.seen.set(name, { signature, hash });
      return;
    }
    const verdict = checkCertificate(name, { cert, key }, this.now());
    if (!verdict.ok) {
      this.seen.set(name, { signature, hash });
      this.refuse(name, verdict.reason);
      return;
    }
    if ((await this.runtime.fingerprint(socket, name)) !== verdict.fingerprint) {
      try {
        await this.runtime.replace(socket, name, verdict.pem);
      } catch (err) {
        if (!(err instanceof CertificatePayloadTooLarge)) throw err;
        this.seen.set(name, { signature, hash });
        this.refuse(name, `${name}: ${err.message}; served from the next reload`);
        return;
      }
      this.swapped++;
      this.lastSwap = {
        certificate: name,
        at: this.now().toISOString(),
        serial: verdict.serial,
        notAfter: verdict.notAfter.toISOString(),
      };
      this.options.metrics.certificateUpdates.inc({ result: "swapped" });
      this.options.log.info(
        { certificate: name, serial: verdict.serial, notAfter: verdict.notAfter.toISOString() },
        "renewed certificate served (runtime API, no reload)",
      );
    }
    this.seen.set(name, { signature, hash });
    this.clearRefusal(name);
  }

  private refuse(name: string, reason: string): void {
    if (this.refused.get(name)?.reason === reason) return;
    this.refused.set(name, { certificate: name, reason, since: this.now().toISOString() });
    this.options.metrics.certificateUpdates.inc({ result: "refused" });
    this.options.metrics.certificateRefused.set({ certificate: name }, 1);
    this.options.log.error({ certificate: name, reason }, "certificate file not served; HAProxy keeps the one it has");
  }

  private clearRefusal(name: string): void {
    if (!this.refused.delete(name)) return;
    this.options.metrics.certificateRefused.remove({ certificate: name });
  }
}
