/** blocked: a job of a flow waiting for its parents (docs/guides/flows.md); never claimed, not counted as queued. */
export type JobStatus = 'queued' | 'blocked' | 'processing' | 'completed' | 'failed' | 'cancelled';
