/** A step as stored in the job's `steps` column (JSON): see the DurableSteps migration. */
export interface StoredStep {
  name: string;
  /** Absent when the step's function returned undefined. */
  result?: unknown;
  attempt: number;
  /** When it was recorded, by the database clock (ISO text). */
  at: string;
  /** A sleep's end, by the database clock (ISO text); absent for a step. */
  until?: string;
}

/** A step a job recorded (job.step) or a sleep it took (job.sleep), as `QueueService.get` returns it. */
export interface JobStep {
  name: string;
  /** 'step': job.step() stored its function's result; 'sleep': job.sleep() paused the job until `until`. */
  kind: 'step' | 'sleep';
  /** The step's result as stored (JSON); undefined for a step that returned nothing, and for a sleep. */
  result?: unknown;
  /** The attempt that recorded it. */
  attempt: number;
  /** When it was recorded (database clock). */
  at: Date;
  /** A sleep's end (database clock). */
  until?: Date;
}

/** The steps of a stored job, as JobStep objects, in the order they were recorded. */
export function toJobSteps(stored: unknown): JobStep[] {
  if (!Array.isArray(stored)) return [];
  return (stored as StoredStep[]).map((s) => {
    const step: JobStep = { name: s.name, kind: s.until === undefined ? 'step' : 'sleep', attempt: s.attempt, at: new Date(s.at) };
    if ('result' in s) step.result = s.result;
    if (s.until !== undefined) step.until = new Date(s.until);
    return step;
  });
}
