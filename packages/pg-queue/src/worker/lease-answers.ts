import { JobAbortedError } from '../errors/pg-queue.error.js';
import type { HeldJob } from './held-job.js';
import type { BeatLoad } from './lease-keeper.js';
import type { RunningJobs } from './running-jobs.js';
import type { StartMarks } from './start-marks.js';
import type { WorkerState } from './worker-state.js';

/**
 * What a worker hears about its held jobs' rows from elsewhere, applied to every job it names before anything starts:
 * the heartbeat (what a beat carries, and its answer: a job it did not keep is lost), cancel notices (a job cancelled,
 * in whatever state it is held), checks asked for (a pause or replace notice, a failed claim or write: nothing starts
 * from the buffer until a heartbeat sent after it has answered), and a loss, wherever the job stands (`lose`).
 */
export class LeaseAnswers {
  constructor(
    private readonly state: WorkerState,
    private readonly runs: RunningJobs,
    private readonly marks: StartMarks,
    private readonly pump: () => void,
  ) {}

  /**
   * Adds this worker's jobs to a heartbeat's load (see LeaseHolders.collect). A job in state `starting` is in neither
   * list: its start mark is its check, and no other statement of this process touches its row meanwhile (see pump).
   * An `armed` one is a started one to the beat (its row says so): renewed, and dropped if the row is no longer ours.
   */
  collect(full: boolean, load: BeatLoad): void {
    if (!full && this.state.unconfirmedUntilSeq === 0) return;
    for (const job of this.state.held.values()) {
      if (job.state === 'buffered') load.buffered.push(job);
      else if (full && job.state !== 'starting') load.started.push(job);
    }
  }

  /**
   * A heartbeat answered: every job it sent that `kept` lacks is no longer ours, applied to all of them before
   * anything starts. Running ones are aborted (their outcome would be fenced out anyway); buffered ones are
   * dropped. A job sent as buffered that moved on meanwhile is judged by its start mark, not by this beat (the mark
   * may have landed first, and the beat then found the row no longer buffered). A settling job's outcome is left to
   * the writer, which hears the same from the database. A transactional handler's job whose completion its own
   * transaction wrote is not lost either: the beat waited on that transaction's row lock and saw it commit; the
   * attempt ends as completed (its event, metrics and the flows' second look), from its own answer.
   */
  beatAnswered(load: BeatLoad, kept: Set<string>, seq: number): void {
    const { state } = this;
    state.guarded('applying a heartbeat', () => {
      for (const job of load.started) {
        if (state.held.get(job.id) !== job) continue; // another queue's, or finished with meanwhile
        if (kept.has(job.id)) {
          // Renewed: a running job's work may still begin until half this lease (a thread handler's job waits for its
          // thread, and the thread asks before it calls the function: ThreadPool). An armed job keeps its deadline.
          if (job.state === 'running') job.startBy = state.deadlines.started(load.sentAt);
          continue;
        }
        if ((job.state === 'running' && !job.settledInTransaction) || job.state === 'armed') this.lose(job);
      }
      for (const job of load.buffered) {
        if (state.held.get(job.id) !== job || kept.has(job.id)) continue;
        if (job.state === 'buffered') this.lose(job);
      }
      if (state.unconfirmedUntilSeq > 0 && seq >= state.unconfirmedUntilSeq) state.unconfirmedUntilSeq = 0;
    });
    this.pump();
  }

  /** The job's row is no longer this claim's: retire it wherever it stands. */
  lose(job: HeldJob): void {
    const { state } = this;
    state.forget(job);
    if (job.state === 'buffered') {
      state.buffer.remove(job);
      job.to('lost');
    } else if (job.state === 'starting') {
      this.marks.drop(job);
      job.to('lost');
    } else if (job.state === 'armed') {
      state.disarm(job);
      job.to('lost');
    } else if (job.state === 'running' && job.batch) {
      // A batch handler's call that lost one job's lease settles none of its jobs: the others' leases lapse, and
      // the sweeper puts them back for another attempt (the call ran them, or part of them).
      for (const other of job.batch.jobs) if (other.state === 'running') this.loseRunning(other);
    } else if (job.state === 'running') {
      this.loseRunning(job);
    }
    // settling: its outcome is with the writer, which hears from the database that the row is gone.
  }

  /** A running job is no longer this claim's: its signal aborted, its slot freed, its outcome never written. */
  private loseRunning(job: HeldJob): void {
    const { state } = this;
    state.forget(job);
    const reason = new JobAbortedError('lease lost: the job was taken back (swept, cancelled) while running');
    job.abort(reason);
    state.shared.logger.warn(`job ${job.id} (${state.config.queue}, attempt ${job.attempt}) lost its lease while running; its outcome will be discarded`);
    this.runs.freeSlot(job);
    job.to('lost');
    state.tell.emit('lease-lost', job, { error: reason });
  }

  /**
   * A cancel notice: the job's row was cancelled (that claim of it, `token`; undefined: whichever). A buffered
   * copy is dropped; a running one is aborted. A cancel seldom comes alone (a bulk cancel sends one notice per
   * job, and they may arrive in several reads), so the rest of the buffer waits for a check before it starts.
   */
  cancelled(jobId: string, token: string | undefined, reason: Error): boolean {
    const { state } = this;
    const job = state.held.get(jobId);
    if (!job || (token !== undefined && job.token !== token)) return false;
    let told = false;
    state.guarded(`cancelling job ${jobId}`, () => {
      if (job.state === 'buffered') {
        state.held.delete(job.id);
        state.buffer.remove(job);
        job.to('cancelled');
      } else if (job.state === 'starting') {
        // Its mark is refused (the row is cancelled) or was taken before the cancel, which then cancelled a started
        // job's row: either way it must not start now.
        state.held.delete(job.id);
        this.marks.drop(job);
        job.to('cancelled');
      } else if (job.state === 'armed') {
        // Marked ahead, its handler never called: the cancel took a row that said started, and it never starts.
        state.held.delete(job.id);
        state.disarm(job);
        job.to('cancelled');
      } else if (job.state === 'running') {
        state.held.delete(job.id);
        job.abort(reason);
        this.runs.freeSlot(job);
        job.to('cancelled');
        state.tell.emit('cancelled', job, { error: reason });
        told = true;
      }
      this.askForCheck();
    });
    this.pump();
    return told;
  }

  /**
   * Jobs of this queue may have been paused or rewritten where they sit in buffers: check ours before starting any.
   * `review` (a pause, here or heard through a notice; not a lost connection): the jobs held started ahead (armed: their
   * rows say started, so the check would keep them) go back now, uncharged, and a start mark in flight starts none of
   * its jobs (state.reviews): once pause() returns in this process, nothing it held starts.
   */
  checkBuffer(review = false): void {
    const { state } = this;
    if (review) {
      state.reviews += 1;
      if (state.armed.length > 0 && !state.stopping) {
        const out = state.armed.splice(0);
        void state.giveBack(out, 'its queue was paused (or a notice asked for a check) before they started');
      }
    }
    this.askForCheck();
    this.pump();
  }

  /** Nothing starts from the buffer until a heartbeat checks it, and one goes now (a cancel, a failed claim or write). */
  askForCheck(): void {
    if (this.state.buffer.size === 0) return;
    this.distrust();
    this.state.shared.leases.checkNow();
  }

  /**
   * A heartbeat failed: until one answers (the heartbeat retries on its own), nothing starts from the buffer.
   * A failed claim or write asks for a check instead (askForCheck): the same wait, and a beat at once.
   */
  distrust(): void {
    if (this.state.buffer.size === 0) return;
    this.state.unconfirmedUntilSeq = this.state.shared.leases.nextSeq;
  }
}
