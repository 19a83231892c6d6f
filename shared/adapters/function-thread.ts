/*
 * A function's event handler on a worker thread of its own, beside functions-framework's.
 *
 * functions-framework 5 runs every request in a `domain` (function_wrappers.js). Node's first
 * Domain turns on async hooks with destroy tracking for the whole isolate, for good: from then on
 * every promise costs an init and a destroy hook, whether or not it runs in a domain. The AWS SDK
 * and client-node make dozens of promises per request, so a handler that lives on the framework's
 * thread pays for them on every store and API call (BENCHMARKS.md, "The framework's domain").
 * A worker thread is an isolate where no Domain was ever made: the handler runs there, and the
 * framework's thread only parses requests and passes the events on.
 *
 * The handler's rejection is the request's failure (its message and stack cross; the worker has
 * logged the rest). A worker that dies (an uncaught exception, a failed start) fails the calls
 * under way and tells the caller, which stops the instance (functions/reconcile.ts). The worker
 * holds the process open only while a call is under way: an idle one leaves that to the server.
 */

import type { MessagePort, Worker } from "node:worker_threads";

type ToWorker = { id: number; event: unknown } | { join: unknown };
type FromWorker =
  | { ready: true }
  | { busy: boolean }
  | { id: number; ok: true }
  | { id: number; ok: false; message: string; stack?: string };

export interface FunctionThread {
  /** Settles as the handler on the worker did: resolves when it resolved, rejects with its message and stack. */
  call(event: unknown): Promise<void>;
  /**
   * What the worker last said about its work (`Joiner.onBusy`): while it is busy, an event can be
   * handed over by `join` and answered without waiting for the worker's turn, which its pipeline's
   * synchronous work (a render, a page's parse) may hold for a second or more.
   */
  readonly busy: boolean;
  /** Hands an event to the worker's `Joiner.join`; nothing comes back. */
  join(event: unknown): void;
}

/** The worker's side of `FunctionThread.join` and `busy`. */
export interface Joiner {
  join(event: unknown): void;
  onBusy(listener: (busy: boolean) => void): void;
}

/**
 * Waits until the worker's handler is ready (serveOnThread), or fails with the error that stopped
 * it. `lost` is told once when the worker goes away after that; the calls under way fail first.
 */
export function startFunctionThread(worker: Worker, lost: (err: Error) => void): Promise<FunctionThread> {
  const calls = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  let next = 0;
  let gone: Error | undefined;
  let busy = false;
  return new Promise((started, failed) => {
    let ready = false;
    // Before it is ready, what stopped it as it is (bad settings say so themselves); after, in context.
    const end = (err: Error) => {
      if (gone) return;
      gone = new Error(`the function's worker thread is gone: ${err.message}`, { cause: err });
      if (!ready) return failed(err);
      for (const call of calls.values()) call.reject(gone);
      calls.clear();
      lost(gone);
    };
    const settle = (id: number) => {
      const call = calls.get(id);
      calls.delete(id);
      if (calls.size === 0) worker.unref();
      return call;
    };
    // A worker can throw anything: what is not an Error says what it is.
    worker.on("error", (err: unknown) => end(err instanceof Error ? err : new Error(String(err))));
    worker.on("exit", (code) => end(new Error(`it exited with code ${code}`)));
    worker.on("message", (message: FromWorker) => {
      if ("ready" in message) {
        ready = true;
        worker.unref();
        started({
          get busy() {
            return busy && !gone;
          },
          join(event) {
            if (gone) throw gone;
            worker.postMessage({ join: event } satisfies ToWorker);
          },
          call(event) {
            if (gone) return Promise.reject(gone);
            const id = ++next;
            return new Promise<void>((resolve, reject) => {
              calls.set(id, { resolve, reject });
              worker.ref();
              try {
                worker.postMessage({ id, event } satisfies ToWorker);
              } catch (err) {
                settle(id);
                reject(err instanceof Error ? err : new Error(String(err)));
              }
            });
          },
        });
        return;
      }
      if ("busy" in message) {
        busy = message.busy;
        return;
      }
      const call = settle(message.id);
      if (!call) return;
      if (message.ok) return call.resolve();
      const err = new Error(message.message);
      if (message.stack !== undefined) err.stack = message.stack;
      call.reject(err);
    });
  });
}

/**
 * The worker's side: every event through `handle`, its outcome back; events handed over by `join`
 * to the joiner, and what it says of its work to the caller's side. Call once the handler exists.
 */
export function serveOnThread(port: MessagePort, handle: (event: unknown) => Promise<void>, joiner?: Joiner): void {
  joiner?.onBusy((busy) => port.postMessage({ busy } satisfies FromWorker));
  port.on("message", (message: ToWorker) => {
    if ("join" in message) {
      if (!joiner) throw new Error("an event was handed over to join, but this worker takes none");
      return joiner.join(message.join);
    }
    const { id, event } = message;
    Promise.resolve(event)
      .then(handle)
      .then(
        () => port.postMessage({ id, ok: true } satisfies FromWorker),
        (err: unknown) =>
          port.postMessage(
            (err instanceof Error
              ? { id, ok: false, message: err.message, ...(err.stack !== undefined ? { stack: err.stack } : {}) }
              : { id, ok: false, message: String(err) }) satisfies FromWorker,
          ),
      );
  });
  port.postMessage({ ready: true } satisfies FromWorker);
}
