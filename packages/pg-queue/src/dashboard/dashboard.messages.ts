// Error texts of the dashboard, kept beside it (the main entry never loads them).
import { DEFAULT_DATABASE } from '../pg-queue.constants.js';

export const DASHBOARD_NO_AUTH = (path: string) =>
  `PgQueueDashboardModule at "/${path}": no authorisation. Pass auth: (request) => 'full' | 'read-only' | 'denied' ` +
  `(or dashboardBasicAuth({...}), or { guard: YourGuard }), or public: true to mount it open to every visitor on purpose.`;

export const DASHBOARD_BAD_OPTION = (key: string, value: unknown, expected: string) =>
  `PgQueueDashboardModule: option "${key}" must be ${expected}, got ${typeof value === 'function' ? 'a function' : JSON.stringify(value)}.`;

export const DASHBOARD_UNKNOWN_OPTION = (key: string, known: string[]) =>
  `PgQueueDashboardModule: unknown option "${key}"; known options: ${known.join(', ')}.`;

export const DASHBOARD_NO_QUEUE_MODULE = () =>
  'PgQueueDashboardModule needs PgQueueModule in the app (global, as forRoot makes it): import PgQueueModule.forRoot(...) too.';

export const DASHBOARD_BAD_AUTH_ANSWER = (answer: unknown) =>
  `PgQueueDashboardModule: the auth hook returned ${JSON.stringify(answer)}; expected 'full', 'read-only', 'denied' or { access, user?, challenge? }.`;

export const DASHBOARD_BASIC_AUTH_USERS = () =>
  'dashboardBasicAuth: give at least one user as { name, password, access? } (password at least 8 characters, name without ":").';

export const DASHBOARD_UNKNOWN_DATABASE = (database: string) =>
  database === DEFAULT_DATABASE
    ? 'PgQueueDashboardModule: the app has no PgQueueModule without a name; set the dashboard\'s `database` to the name of one of its PgQueueModule imports.'
    : `PgQueueDashboardModule: no PgQueueModule is named "${database}" (the \`database\` option): give the name of one of the app's PgQueueModule imports, or leave it out for the one without a name.`;
