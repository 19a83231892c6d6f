import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";

/** A process that listens on a TCP port, as far as /proc tells (Linux; the same user's processes). */
export interface PortHolder {
  pid: number;
  /** Its command line, shortened. */
  command: string;
}

const LISTEN = "0A";

/** Inodes of the sockets listening on `port`, any address, IPv4 or IPv6 (/proc/net/tcp{,6}). */
function listeningInodes(port: number, proc: string): Set<string> {
  const inodes = new Set<string>();
  for (const table of ["tcp", "tcp6"]) {
    let text: string;
    try {
      text = readFileSync(`${proc}/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const row of text.split("\n").slice(1)) {
      const cols = row.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const local = cols[1];
      if (!local || cols[3] !== LISTEN) continue;
      if (parseInt(local.slice(local.lastIndexOf(":") + 1), 16) === port && cols[9] && cols[9] !== "0")
        inodes.add(cols[9]);
    }
  }
  return inodes;
}

/**
 * Who listens on `port`: the socket's inode from /proc/net/tcp, then the process with a file
 * descriptor on that socket. Undefined when /proc cannot tell (another OS, another user's process).
 */
export function portHolder(port: number, proc = "/proc"): PortHolder | undefined {
  const inodes = listeningInodes(port, proc);
  if (inodes.size === 0) return undefined;
  const wanted = new Set([...inodes].map((i) => `socket:[${i}]`));
  let pids: string[];
  try {
    pids = readdirSync(proc).filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`${proc}/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`${proc}/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (wanted.has(target)) return { pid: Number(pid), command: commandOf(`${proc}/${pid}`) };
    }
  }
  return undefined;
}

function commandOf(dir: string): string {
  try {
    const argv = readFileSync(`${dir}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
    return argv.length > 160 ? `${argv.slice(0, 157)}...` : argv;
  } catch {
    return "?";
  }
}

/** Whether 127.0.0.1:port can be bound now (a listener on any address of that port takes it); other bind errors (EACCES) reject. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? resolve(false) : reject(err)));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/** "port 8080 (--http-port) is in use by pid 42 (python3 -m http.server 8080)", or as much of it as is known. */
export function describePortInUse(port: number, flag: string, holder: PortHolder | undefined): string {
  const by = holder ? ` by pid ${holder.pid} (${holder.command})` : "";
  return `port ${port} (${flag}) is in use${by}: stop it, or pass ${flag} with a free port`;
}
