/** Every job carries its index; latency jobs also carry the epoch time (ms, sub-ms precision) of their enqueue call; fairness jobs their key. */
export interface BenchPayload {
  i: number;
  t?: number;
  /** The fairness scenario: the job's tenant, enqueued as its concurrencyKey. */
  k?: string;
}
