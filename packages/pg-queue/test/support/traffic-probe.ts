import pg from 'pg';

/** What one probe saw: how many statements it ran and the longest one (ms, client side). */
export interface ProbeReport {
  statements: number;
  maxMs: number;
  /** The statement that took longest, and when it started (ms after the probe started). */
  slowest: { sql: string; atMs: number } | undefined;
}

/**
 * An application's traffic while something else happens to its table: one connection that runs `statements` one
 * after the other, a few ms apart, timing each. A statement that waits behind a lock (an ALTER TABLE holding or
 * queued for ACCESS EXCLUSIVE, a plain CREATE INDEX) shows as a long one.
 */
export class TrafficProbe {
  private stopped = false;
  private done: Promise<void> | undefined;
  private readonly report: ProbeReport = { statements: 0, maxMs: 0, slowest: undefined };

  private constructor(
    private readonly client: pg.Client,
    private readonly statements: readonly string[],
    private readonly everyMs: number,
  ) {}

  static async start(url: string, statements: readonly string[], everyMs = 5): Promise<TrafficProbe> {
    const client = new pg.Client({ connectionString: url, application_name: 'traffic probe' });
    await client.connect();
    const probe = new TrafficProbe(client, statements, everyMs);
    probe.done = probe.loop();
    return probe;
  }

  private async loop(): Promise<void> {
    const t0 = performance.now();
    while (!this.stopped) {
      for (const sql of this.statements) {
        const started = performance.now();
        await this.client.query(sql);
        const ms = performance.now() - started;
        this.report.statements += 1;
        if (ms > this.report.maxMs) Object.assign(this.report, { maxMs: ms, slowest: { sql, atMs: Math.round(started - t0) } });
      }
      await new Promise((resolve) => setTimeout(resolve, this.everyMs));
    }
  }

  /** Stops after the statement in flight and returns what the probe saw (a statement that failed rejects). */
  async stop(): Promise<ProbeReport> {
    this.stopped = true;
    try {
      await this.done;
    } finally {
      await this.client.end();
    }
    return { ...this.report, maxMs: Math.round(this.report.maxMs) };
  }
}
