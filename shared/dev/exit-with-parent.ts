/**
 * Loaded with `node --import` into every process the local stack starts. They run in their own
 * process group, so that Ctrl-C reaches only the stack, which stops them in order (the agent, which
 * stops HAProxy and reports its final status, before the store it reports to). Should the stack
 * die without stopping them (kill -9, a crash), its end of their stdin closes: each then stops as
 * if the stack had asked, instead of holding its ports forever.
 */
process.stdin.once("end", () => process.kill(process.pid, "SIGTERM"));
process.stdin.resume();
// Only a watch: it must not keep a process alive that would otherwise end.
(process.stdin as { unref?: () => void }).unref?.();
