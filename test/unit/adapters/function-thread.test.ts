import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { type FunctionThread, startFunctionThread } from "../../../shared/adapters/function-thread.js";

// The worker side as it ships (tsc's output: a worker thread cannot load TypeScript).
const SERVE = pathToFileURL(
  join(import.meta.dirname, "..", "..", "..", "dist", "shared", "adapters", "function-thread.js"),
);

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.terminate()));
});

/** Module source of a worker whose handler is `handler` (source of an async function of the event). */
function workerSource(handler: string, before = ""): string {
  return `import { parentPort } from "node:worker_threads";
     import { serveOnThread } from ${JSON.stringify(SERVE.href)};
     ${before}
     serveOnThread(parentPort, ${handler});`;
}

function workerWith(handler: string, before = ""): Worker {
  const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(workerSource(handler, before))}`));
  workers.push(w);
  return w;
}

function started(w: Worker): Promise<{ thread: FunctionThread; lost: Error[] }> {
  const lost: Error[] = [];
  return startFunctionThread(w, (err) => lost.push(err)).then((thread) => ({ thread, lost }));
}

describe("a function's handler on a worker thread", () => {
  it("settles each call as the handler did, matched to its own event when they finish out of order", async () => {
    const { thread, lost } = await started(
      workerWith(`async (event) => {
        await new Promise((r) => setTimeout(r, event.delayMs));
        if (event.fail) throw new Error("refused " + event.name);
      }`),
    );
    const outcomes = await Promise.allSettled([
      thread.call({ name: "slow", delayMs: 60 }),
      thread.call({ name: "failing", delayMs: 30, fail: true }),
      thread.call({ name: "fast", delayMs: 0 }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const refused = (outcomes[1] as PromiseRejectedResult).reason as Error;
    expect(refused.message).toBe("refused failing");
    // The stack is the handler's, not the message port's.
    expect(refused.stack).toMatch(/^Error: refused failing\n\s+at .*data:text\/javascript/);
    expect(lost).toEqual([]);
  });

  it("says what the worker says of its work, and hands events over to its joiner in order, with no answer", async () => {
    const joiner = `{ join: (event) => joined.push(event.name), onBusy: (listener) => { tell = listener; } }`;
    const { thread } = await started(
      workerWith(
        `async (event) => {
          if (event.busy !== undefined) tell(event.busy);
          if (event.report) throw new Error(joined.join(","));
        }, ${joiner}`,
        "const joined = []; let tell = () => {};",
      ),
    );
    expect(thread.busy).toBe(false);
    // The worker tells before it answers: the caller's side knows by then.
    await thread.call({ busy: true });
    expect(thread.busy).toBe(true);
    thread.join({ name: "a" });
    thread.join({ name: "b" });
    await expect(thread.call({ report: true })).rejects.toThrow(/^a,b$/);
    await thread.call({ busy: false });
    expect(thread.busy).toBe(false);
  });

  it("hands the handler the event as sent: nested objects, and bytes as a Uint8Array", async () => {
    const { thread } = await started(
      workerWith(`async (event) => {
        const ok = event.data.metadata.name === "web" && event.body instanceof Uint8Array && event.body[1] === 2;
        if (!ok) throw new Error("got " + JSON.stringify(event));
      }`),
    );
    await expect(thread.call({ data: { metadata: { name: "web" } }, body: Buffer.from([1, 2]) })).resolves.toBe(
      undefined,
    );
  });

  it("fails to start with the error that stopped the worker (bad settings say what is wrong)", async () => {
    await expect(
      started(workerWith("async () => {}", `throw new Error("SERVICELB_STORE is required");`)),
    ).rejects.toThrow(/^SERVICELB_STORE is required$/);
  });

  it("fails the calls under way, tells `lost` once, and refuses later calls when the worker dies", async () => {
    const { thread, lost } = await started(
      workerWith(`async (event) => {
        if (event.crash) setTimeout(() => { throw new Error("boom"); });
        await new Promise(() => {});
      }`),
    );
    const waiting = thread.call({ crash: false });
    const crashing = thread.call({ crash: true });
    await expect(waiting).rejects.toThrow("the function's worker thread is gone: boom");
    await expect(crashing).rejects.toThrow("the function's worker thread is gone: boom");
    await expect(thread.call({})).rejects.toThrow("gone: boom");
    expect(lost.map((e) => e.message)).toEqual(["the function's worker thread is gone: boom"]);
  });

  it("counts a worker that exits as gone, with its exit code", async () => {
    const { thread, lost } = await started(workerWith(`async () => { process.exit(3); }`));
    await expect(thread.call({})).rejects.toThrow("the function's worker thread is gone: it exited with code 3");
    expect(lost).toHaveLength(1);
  });

  it("holds the process open while a call is under way, and not once it is answered", () => {
    const script = `
      import { Worker } from "node:worker_threads";
      import { startFunctionThread } from ${JSON.stringify(SERVE.href)};
      const source = ${JSON.stringify(workerSource("async () => { await new Promise((r) => setTimeout(r, 300)); }"))};
      const worker = new Worker(new URL("data:text/javascript," + encodeURIComponent(source)));
      const thread = await startFunctionThread(worker, () => process.exit(5));
      await thread.call({});
      console.log("answered");`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 10_000 });
    // An unref'd worker would let Node end with the call unsettled (exit 13); a ref'd idle one never ends.
    expect({ status: r.status, stdout: r.stdout.trim(), stderr: r.stderr }).toEqual({
      status: 0,
      stdout: "answered",
      stderr: "",
    });
  });

  it("rejects an event that cannot cross to the thread, and keeps serving", async () => {
    const { thread, lost } = await started(workerWith("async () => {}"));
    await expect(thread.call({ callback: () => 1 })).rejects.toThrow(/could not be cloned/);
    await expect(thread.call({ fine: true })).resolves.toBe(undefined);
    expect(lost).toEqual([]);
  });
});
