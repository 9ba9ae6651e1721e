/** What differs between `npm start` and the e2e test; everything else is the same wiring. */
export interface DemoOptions {
  /** Jobs enqueued across the queues at start-up so that the logs show activity on their own; 0 for none. Default 0. */
  startBurst?: number;
  /** Password of the dashboard's users (admin: full access, viewer: read-only) at /dashboard. Default: random per start. */
  dashboardPassword?: string;
}

/** Injection token of the resolved DemoOptions. */
export const DEMO_OPTIONS = Symbol('demo:options');

export type ResolvedDemoOptions = Required<Omit<DemoOptions, 'dashboardPassword'>>;
