/**
 * One durable commit per event-loop turn for the pipeline's writes (SQLite).
 *
 * Intake's group commit, fan-out, leasing, completion and the circuit-open pass each run their own loop, and each
 * pass is a transaction. On SQLite a commit is not just an fsync: every page the transaction changed is appended to
 * the WAL, and the hot pages (the queue rows, the per-endpoint index leaves of `deliveries`) are the same for every
 * stage. Measured (bench:delivery, strace): ~130 page writes per commit in bulk. So writes submitted in the same
 * turn are run in one IMMEDIATE transaction at the end of the turn: a page changed by a lease, a completion and a
 * fan-out pass is written once, and the WAL is synced once.
 *
 * The jobs run one after another in that transaction, without savepoints: a savepoint makes SQLite copy every page
 * a job is the first to change into a sub-journal (measured: 6.5 % of the process in bulk). If a job throws, the
 * whole transaction is rolled back and each job of the turn is run again in a transaction of its own, so only the
 * failing one fails and no other job's effect is lost or doubled. Jobs must therefore do nothing but database work
 * (pure computation and id generation may repeat). A caller's promise settles only after the COMMIT: an event is
 * still answered 202 only once it is durable, a lease used only once it is recorded.
 *
 * Cost: a write waits for the end of the current turn (setImmediate) instead of running at once.
 */
import type Database from 'better-sqlite3';

interface Job {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export interface TurnCommit {
  /** Runs `fn` (database work only: it may run twice, see above) in this turn's transaction; settles after COMMIT. */
  submit<T>(fn: () => T): Promise<T>;
  /** Runs what is queued now (before closing the database). */
  flush(): void;
}

export function createTurnCommit(db: Database.Database): TurnCommit {
  let queue: Job[] = [];
  let scheduled = false;

  const runAll = db.transaction((jobs: Job[]) => jobs.map((job) => job.run()));

  const commit = (jobs: Job[]) => {
    let results: unknown[];
    try {
      results = runAll.immediate(jobs);
    } catch (err) {
      if (jobs.length === 1) (jobs[0] as Job).reject(err);
      // Rolled back: find the failing job by running each alone.
      else for (const job of jobs) commit([job]);
      return;
    }
    for (let i = 0; i < jobs.length; i++) (jobs[i] as Job).resolve(results[i]);
  };

  const flush = () => {
    scheduled = false;
    const jobs = queue;
    queue = [];
    if (jobs.length > 0) commit(jobs);
  };

  return {
    submit<T>(fn: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run: fn, resolve: resolve as (v: unknown) => void, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    flush,
  };
}
