/** The resolved dashboard options (resolve-dashboard-options.ts). */
export const DASHBOARD_OPTIONS = Symbol('pg-queue:dashboard_options');
