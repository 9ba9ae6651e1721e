/** Payload of the `sync` queue: a record to push to a (pretend) CRM. */
export interface SyncPayload {
  recordId: number;
  /** The CRM refuses this record on every attempt: it ends in the dead letter (status failed). */
  corrupt?: boolean;
}
