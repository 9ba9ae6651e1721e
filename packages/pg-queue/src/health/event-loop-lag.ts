/** How often the sampler's timer is due: its lateness is the event loop's lag. */
export const LAG_TICK_MS = 100;
/** Readiness reads the worst lag of this window, so that a probe answered right after a block still sees it. */
export const LAG_WINDOW_MS = 5_000;
/** Lags under this are timer noise, not kept. */
const KEEP_OVER_MS = 10;

/**
 * The event loop's lag, measured as the drift of a timer due every LAG_TICK_MS (monotonic clock). A timer drift and
 * not monitorEventLoopDelay: the worst of a window must include the block under way when a probe asks (the timer is
 * late by then), which a histogram only records after the block ends. Runs while someone uses it (the health
 * indicator, the metrics), on an unref'd timer; one per process, shared.
 */
export class EventLoopLag {
  private timer: NodeJS.Timeout | undefined;
  private lastTickAt = 0;
  private users = 0;
  /** Lags over KEEP_OVER_MS within the window: at most LAG_WINDOW_MS / LAG_TICK_MS entries. */
  private recent: { at: number; lagMs: number }[] = [];

  acquire(): void {
    if (this.users++ > 0) return;
    this.lastTickAt = performance.now();
    this.timer = setInterval(() => this.tick(), LAG_TICK_MS).unref();
  }

  release(): void {
    if (this.users === 0 || --this.users > 0) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.lastTickAt = 0;
    this.recent = [];
  }

  /** The worst lag of the last LAG_WINDOW_MS, the one under way included (ms; 0 while nobody uses the sampler). */
  worstMs(): number {
    if (this.lastTickAt === 0) return 0;
    const now = performance.now();
    this.forget(now);
    let worst = now - this.lastTickAt - LAG_TICK_MS;
    for (const s of this.recent) worst = Math.max(worst, s.lagMs);
    return Math.max(0, Math.round(worst));
  }

  private tick(): void {
    const now = performance.now();
    const lagMs = now - this.lastTickAt - LAG_TICK_MS;
    this.lastTickAt = now;
    if (lagMs > KEEP_OVER_MS) this.recent.push({ at: now, lagMs });
    this.forget(now);
  }

  private forget(now: number): void {
    while (this.recent.length > 0 && this.recent[0].at < now - LAG_WINDOW_MS) this.recent.shift();
  }
}

/** The process's sampler (one event loop per process). */
export const eventLoopLag = new EventLoopLag();
