/*
 * How a warm reconcile instance lines up its work (app/reconcile.ts): passes and head starts each
 * run one at a time, with what arrives meanwhile folded into one follow-up run, and a full pass
 * behind served head starts waits for the events to stop. No I/O: the caller's runs do it.
 */

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
