import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { JobStatus } from '../interfaces/job.interface.js';

/**
 * TypeORM mapping of background_jobs, for apps that query jobs with their own repositories (add it to
 * the DataSource's entities). The schema itself comes from PG_QUEUE_MIGRATIONS; the queue's hot path uses
 * the SQL in job.store.ts.
 */
@Entity({ name: 'background_jobs', synchronize: false })
export class BackgroundJobEntity {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id!: string;

  @Column({ name: 'queue_name', type: 'text' })
  queueName!: string;

  @Column({ type: 'jsonb' })
  payload!: unknown;

  @Column({ type: 'enum', enum: ['queued', 'processing', 'failed', 'completed', 'cancelled'], enumName: 'background_job_status' })
  status!: JobStatus;

  @Column({ type: 'integer' })
  priority!: number;

  @Column({ name: 'run_at', type: 'timestamptz' })
  runAt!: Date;

  @Column({ type: 'integer' })
  attempts!: number;

  @Column({ name: 'max_attempts', type: 'integer' })
  maxAttempts!: number;

  /** Incremented by every claim; the lease owner's writes are fenced by it. */
  @Column({ name: 'fence_token', type: 'bigint' })
  fenceToken!: string;

  @Column({ name: 'locked_at', type: 'timestamptz', nullable: true })
  lockedAt!: Date | null;

  @Column({ name: 'locked_by', type: 'text', nullable: true })
  lockedBy!: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt!: Date | null;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError!: string | null;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;

  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true })
  finishedAt!: Date | null;

  /** Set for a job enqueued with a uniqueKey (and no window); it holds the key while queued or running. */
  @Column({ name: 'unique_key', type: 'text', nullable: true })
  uniqueKey!: string | null;

  @Column({ name: 'concurrency_key', type: 'text', nullable: true })
  concurrencyKey!: string | null;

  /** What the handler returned, once completed (null when it returned nothing). */
  @Column({ name: 'result', type: 'jsonb', nullable: true })
  result!: unknown;

  /** The last value the handler gave job.progress() that was written. */
  @Column({ name: 'progress', type: 'jsonb', nullable: true })
  progress!: unknown;

  /** Set by QueueService.waitFor(): the job's finish is announced on the pg_queue_done channel. */
  @Column({ name: 'awaited', type: 'boolean', nullable: true })
  awaited!: boolean | null;

  /** True while the job is claimed but waits in its worker's read-ahead buffer: not started, not charged an attempt. */
  @Column({ name: 'buffered', type: 'boolean', default: false })
  buffered!: boolean;

  /** What job.step() and job.sleep() recorded, in order (docs/guides/durable-steps.md); null when none. */
  @Column({ name: 'steps', type: 'jsonb', nullable: true })
  steps!: unknown;

  /**
   * The lines handlers wrote with job.log() (README: "Job logs"): { lines: [{ attempt, at, line }], total, ... }, the
   * newest jobLogs.maxLines kept; null when none. Read it typed with QueueService.get (`logs`).
   */
  @Column({ name: 'logs', type: 'jsonb', nullable: true })
  logs!: unknown;
}
