import { showProc } from "../adapters/haproxy/master.js";
import { isHaproxy, processAlive } from "../adapters/haproxy/proc-info.js";
import type { Logger } from "../adapters/log.js";

/**
 * An HAProxy master that answers on our master socket before ours starts was left by an agent
 * that died without stopping it (kill -9 outside a container leaves children running). Ours
 * takes over without a gap: it starts beside the orphan (listeners use SO_REUSEPORT), then the
 * orphan is soft-stopped, so it stops accepting and leaves once its connections are done.
 */
export async function findOrphanMaster(masterSocket: string): Promise<number | null> {
  try {
    const { master } = await showProc(masterSocket, { timeoutMs: 1000 });
    return processAlive(master.pid) ? master.pid : null;
  } catch {
    return null;
  }
}

export function retireOrphanMaster(pid: number, ourPid: number | undefined, log: Logger): void {
  // The pid may have been reused since we read it from the socket.
  if (pid === ourPid || !processAlive(pid) || !isHaproxy(pid)) return;
  log.warn(
    { pid },
    "an HAProxy master left by an earlier agent was still running; soft-stopping it now that ours serves",
  );
  process.kill(pid, "SIGUSR1");
}
