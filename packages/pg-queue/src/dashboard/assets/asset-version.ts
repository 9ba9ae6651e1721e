import { createHash } from 'node:crypto';
import { DASHBOARD_JS } from './dashboard.client.js';
import { DASHBOARD_CSS } from './dashboard.css.js';

/** Changes with the assets' content: their URLs carry it, so they can be cached for a long time. */
export const ASSET_VERSION = createHash('sha256').update(DASHBOARD_CSS).update(DASHBOARD_JS).digest('hex').slice(0, 12);
