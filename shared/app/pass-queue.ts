/*
 * How a reconcile instance lines up its work, its workqueue (ReconcileQueue): passes and head
 * starts each run one at a time, with what arrives meanwhile folded into one follow-up run; a full
 * pass behind served head starts waits for the events to stop; a pass that events answered at once
 * were waiting for is retried here. No I/O: the handlers it runs (app/pass.ts,
 * app/head-start.ts) do it.
 */

import type { ObjectRef } from "../adapters/cluster.js";
import type { Logger } from "../adapters/log.js";
import { type Backoff, backoffDelay } from "../core/backoff.js";
import type { Verdict } from "./cloudevents.js";
import type { HeadStart } from "./head-start.js";
import type { ReconcileResult, Trigger } from "./pass.js";
import { errorMessage } from "../core/error-message.js";

/**
 * One run at a time. Calls made while one runs share one follow-up run, which starts once the
 * running one has settled (whether it failed or not), with their inputs merged: a burst of 100
 * calls costs two runs.
 */
export class Coalescer<I, R> {
  private running: Promise<R> | undefined;
  private next: Promise<R> | undefined;
  private pending: I | undefined;
  private said = false;
  private listeners: Array<(busy: boolean) => void> = [];

  constructor(
    private readonly run: (input: I) => Promise<R>,
    /** Folds a later call's input into the pending one. */
    private readonly merge: (pending: I, later: I) => I,
  ) {}

  get busy(): boolean {
    return this.running !== undefined;
  }

  /** Tells `listener` when runs start (true) and when the last run queued has settled (false). */
  onBusy(listener: (busy: boolean) => void): void {
    this.listeners.push(listener);
  }

  /** Between one run and the follow-up it hands over to, nothing is said: still busy. */
  private tell(): void {
    const busy = this.running !== undefined || this.next !== undefined;
    if (busy === this.said) return;
    this.said = busy;
    for (const listener of this.listeners) listener(busy);
  }

  /** Settles when the runs under way and queued now have, whatever their outcome. */
  async idle(): Promise<void> {
    await (this.next ?? this.running)?.catch(() => undefined);
  }

  /** Settles when the run that covers this call has. */
  submit(input: I): Promise<R> {
    if (!this.running) {
      const running = this.run(input).finally(() => {
        if (this.running === running) this.running = undefined;
        this.tell();
      });
      this.running = running;
      this.tell();
      return running;
    }
    this.pending = this.pending === undefined ? input : this.merge(this.pending, input);
    this.next ??= this.running
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        const folded = this.pending!;
        this.next = undefined;
        this.pending = undefined;
        return this.submit(folded);
      });
    return this.next;
  }
}

/**
 * A run that waits for calls to stop: it starts `delayMs` after the last call, and at most
 * `maxFactor` × `delayMs` after the first, and every call made until it starts shares it (with
 * the first call's input).
 */
export class Settled<I, R> {
  private waiting: { first: number; timer?: NodeJS.Timeout; result: Promise<R>; start: () => void } | undefined;

  constructor(
    private readonly delayMs: number,
    private readonly maxFactor: number,
    private readonly run: (input: I) => Promise<R>,
  ) {}

  request(input: I): Promise<R> {
    if (this.delayMs === 0) return this.run(input);
    const now = Date.now();
    if (!this.waiting) {
      let start = () => {};
      const begun = new Promise<void>((resolve) => {
        start = resolve;
      });
      this.waiting = { first: now, start: () => start(), result: begun.then(() => this.run(input)) };
    }
    const w = this.waiting;
    clearTimeout(w.timer);
    const wait = Math.max(0, Math.min(this.delayMs, w.first + this.delayMs * this.maxFactor - now));
    w.timer = setTimeout(() => {
      if (this.waiting === w) this.waiting = undefined;
      w.start();
    }, wait);
    return w.result;
  }
}

/** Which full pass an event asks for: a resync holds nothing back (core/kubernetes/pending-services.ts). */
interface PassInput {
  trigger: Trigger;
  verdict: Verdict;
}

/** The runs a queue starts: a full pass, and a head start over the objects named. */
export interface Handlers {
  pass(trigger: Trigger, verdict: Verdict): Promise<ReconcileResult>;
  headStart(refs: readonly ObjectRef[]): Promise<HeadStart>;
}

/** The longest a full list behind served head starts waits, in confirmDelayMs. */
const CONFIRM_WAIT_FACTOR = 5;
/** How many head starts a full pass lets go first at each of its steps. */
const GIVE_WAY = 3;
/**
 * How the instance retries a failed pass that events answered at once were waiting for (`join`):
 * no Broker retries them. At most a minute apart, PingSource's period: a cluster or store that
 * stays down is asked no more often than the resync asks anyway.
 */
const OWED_RETRY: Backoff = { initialMs: 1000, maxMs: 60_000 };

const refId = (ref: ObjectRef) => `${ref.kind} ${ref.namespace}/${ref.name}`;

/**
 * The reconcile function's workqueue: what runs when, for which events. Full passes run one at a
 * time; events that arrive while one runs share one follow-up pass, which lists the cluster after
 * all of them arrived: a burst of 100 events costs two passes, not 100 lists, writes and pings.
 * Across instances the store's key order still keeps a stale write from winning. A resync among
 * the coalesced events makes the follow-up a resync: it holds nothing back. Head starts line up
 * the same way, apart from passes: the objects named meanwhile are read together by the next one.
 */
export class ReconcileQueue {
  private readonly passes: Coalescer<PassInput, ReconcileResult>;
  private readonly headStarts: Coalescer<Map<string, ObjectRef>, HeadStart>;
  /**
   * The full pass behind head starts that served their events waits for more events: confirmDelayMs
   * after the last of them, and at most CONFIRM_WAIT_FACTOR times that after the first. During a
   * rollout one list then confirms many events, and its work (a list of every object, a render)
   * stays out of the way of the changes on their way to the agents. An event whose change is not
   * served yet never waits.
   */
  private readonly confirmation: Settled<Trigger, ReconcileResult>;
  /**
   * Events answered at once (`join`) are this instance's to deliver: no Broker retries them. Full
   * passes are numbered as they start; `owedThrough` is the first pass that starts after the last
   * such event arrived, the one whose success covers every one of them. When that pass (or a later
   * one) fails, the instance retries it after a backoff, and only then: a pass that fails while
   * another is queued behind it leaves the retry to that one, and a pass that succeeds meanwhile
   * (another event's) makes the retry moot.
   */
  private started = 0;
  private owedThrough: number | undefined;
  private retries = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  /** The work of the events answered at once, until it settles (`idle`). */
  private readonly joined = new Set<Promise<void>>();
  /** Head starts, and the confirmations behind them, under way: each ends in a pass. */
  private underway = 0;
  private saidBusy = false;
  private readonly busyListeners: Array<(busy: boolean) => void> = [];

  constructor(
    private readonly handlers: Handlers,
    confirmDelayMs: number,
    private readonly log: Logger,
  ) {
    this.passes = new Coalescer(
      (input) => this.owedPass(input),
      (pending, later) => (later.verdict === "resync" ? { ...pending, verdict: "resync" } : pending),
    );
    this.headStarts = new Coalescer(
      (refs) => handlers.headStart([...refs.values()]).catch((err: unknown) => this.failedHeadStart(refs.size, err)),
      (pending, later) => new Map([...pending, ...later]),
    );
    this.confirmation = new Settled(confirmDelayMs, CONFIRM_WAIT_FACTOR, (trigger) => this.pass(trigger, "relevant"));
    this.passes.onBusy(() => this.tellBusy());
  }

  /**
   * Busy: a full pass runs or waits, or an event's head start or the confirmation behind it is under
   * way, which ends in a pass too. An event that arrives meanwhile joins (`join`).
   */
  get busy(): boolean {
    return this.underway > 0 || this.passes.busy;
  }

  /** Told when passes, or head starts that end in one, start to run or wait (true), and when the last has ended (false). */
  onBusy(listener: (busy: boolean) => void): void {
    this.busyListeners.push(listener);
  }

  /** A full pass, or a share of the one queued. */
  pass(trigger: Trigger, verdict: Verdict): Promise<ReconcileResult> {
    return this.passes.submit({ trigger, verdict });
  }

  /** An event's pass after its head start: the result says published when the head start published what the pass confirms. */
  async withHeadStart(trigger: Trigger, refs: readonly ObjectRef[]): Promise<ReconcileResult> {
    this.underway++;
    this.tellBusy();
    try {
      return await this.headStartThenPass(trigger, refs);
    } finally {
      this.underway--;
      this.tellBusy();
    }
  }

  /**
   * An event that arrives while a full pass runs or waits to run (or a head start, which ends in
   * one) joins the pass after it and is answered at once (204, like every acknowledgement): that
   * pass starts after the event arrived, so its list has the change, and a burst of events (the
   * watch storm of a big cluster: an ADDED event per object) costs the Broker no delivery held for
   * a pass, no timeout and no retry of an event whose change is on its way anyway. The event's head
   * start runs as it would have, behind the answer.
   */
  join(trigger: Trigger, verdict: "relevant" | "resync", refs: readonly ObjectRef[]): ReconcileResult {
    this.owedThrough = this.started + 1;
    // A failure is logged by the pass, and retried by owedPass.
    const work = (verdict === "resync" ? this.pass(trigger, verdict) : this.withHeadStart(trigger, refs)).then(
      () => undefined,
      () => undefined,
    );
    this.joined.add(work);
    void work.then(() => this.joined.delete(work));
    this.log.debug({ eventId: trigger.id, eventType: trigger.type, verdict }, "event joined the next pass");
    return { eventId: trigger.id, eventType: trigger.type, verdict, status: "joined" };
  }

  /**
   * A full pass gives way to a head start under way, a few times at most: the head start carries a
   * change to deliver, while the full list of a warm instance mostly confirms what head starts
   * published. On a busy node the list's work would otherwise delay the change.
   */
  async giveWay(): Promise<void> {
    for (let i = 0; i < GIVE_WAY && this.headStarts.busy; i++) await this.headStarts.idle();
  }

  /** Settles once the work of every event answered at once has, its retries left aside. */
  async idle(): Promise<void> {
    while (this.joined.size > 0) await Promise.all(this.joined);
  }

  /** Cancels a pending retry. */
  close(): void {
    clearTimeout(this.retryTimer);
  }

  private async headStartThenPass(trigger: Trigger, refs: readonly ObjectRef[]): Promise<ReconcileResult> {
    const early = refs.length > 0 ? await this.headStarts.submit(new Map(refs.map((r) => [refId(r), r]))) : undefined;
    const served = early?.status === "published" || early?.status === "unchanged";
    const result = await (served ? this.confirmation.request(trigger) : this.pass(trigger, "relevant"));
    if (!early) return result;
    const confirmed = result.status === "unchanged" && early.status === "published" && early.key === result.key;
    return {
      ...result,
      eventId: trigger.id,
      eventType: trigger.type,
      headStart: early,
      ...(confirmed ? { status: "published" as const, notify: early.notify } : {}),
    };
  }

  /** What a head start that threw before it could report says (it never fails the event's delivery). */
  private failedHeadStart(objects: number, err: unknown): HeadStart {
    this.log.warn({ err, refs: objects }, "head start failed; the full pass decides");
    return { status: "failed", reason: errorMessage(err), objects, ms: 0 };
  }

  private async owedPass(input: PassInput): Promise<ReconcileResult> {
    const n = ++this.started;
    try {
      const result = await this.handlers.pass(input.trigger, input.verdict);
      if (this.owedThrough !== undefined && n >= this.owedThrough) this.owedThrough = undefined;
      this.retries = 0;
      clearTimeout(this.retryTimer);
      return result;
    } catch (err) {
      if (this.owedThrough !== undefined && n >= this.owedThrough) this.retryOwed(input);
      throw err;
    }
  }

  private retryOwed(failed: PassInput): void {
    const delayMs = backoffDelay(OWED_RETRY, ++this.retries);
    this.log.warn(
      { retryInMs: delayMs, retries: this.retries, eventId: failed.trigger.id },
      "a pass that events answered at once were waiting for failed: this instance retries it",
    );
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      const trigger = { id: `${failed.trigger.id}/retry-${this.retries}`, type: failed.trigger.type };
      // Its failure arms the next retry (owedPass); nobody else awaits it.
      this.pass(trigger, failed.verdict).catch(() => undefined);
    }, delayMs);
    // A shell's `reconcile --once` never owes a pass; nothing here should hold a process open.
    this.retryTimer.unref();
  }

  private tellBusy(): void {
    if (this.busy === this.saidBusy) return;
    this.saidBusy = !this.saidBusy;
    for (const listener of this.busyListeners) listener(this.saidBusy);
  }
}
