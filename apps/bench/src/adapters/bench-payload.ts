/** Every job carries its index; latency jobs also carry the epoch time (ms, sub-ms precision) of their enqueue call. */
export interface BenchPayload {
  i: number;
  t?: number;
}
