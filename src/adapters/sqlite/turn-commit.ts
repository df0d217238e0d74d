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
 * (pure computation and id generation may repeat). A caller's promise settles only once the commit is durable: an
 * event is still answered 202 only once it is on disk, a lease used only once it is recorded.
 *
 * The sync is off the event loop (`walFile` given). The turn's transaction commits with `synchronous = NORMAL`:
 * SQLite appends the WAL frames (write(), into the page cache) and returns without fsync. The WAL file is then
 * fdatasync'ed on libuv's thread pool, and the turn's callers are settled when that returns: every frame written
 * before the sync began is on disk, so the promise means what `synchronous = FULL` meant. While a sync runs, the
 * event loop serves HTTP and commits the next turns; those wait for the next sync, which covers all of them (group
 * commit). Measured (bench:delivery, SQLite): an fsync at every COMMIT held the event loop for ~20 % of the bulk
 * phase. Every other transaction of the store keeps `synchronous = FULL` (durable when it returns), and its fsync
 * covers the earlier turns' frames too.
 *
 * What a turn's commit makes visible before it is durable, later turns may act on: a lease of a delivery whose
 * fan-out is not yet on disk may send it. After a power loss such a delivery is rolled back with its event, which
 * was never answered 202; a producer retrying with its idempotency key gets a new delivery with a new webhook-id.
 * A process crash (kill -9) loses nothing: the frames are in the kernel's page cache. Limits: the WAL file is the
 * one opened at the first sync; SQLite deletes and recreates it only when the last connection closes, which
 * `close()` precedes with a final synchronous sync. A failed fdatasync rejects the waiting callers (their data may
 * or may not survive a power loss; the API reports an error, so a producer retries with its idempotency key).
 *
 * Cost: a write waits for the end of the current turn (setImmediate) and for the sync instead of running at once.
 */
import { closeSync, fdatasync, fdatasyncSync, fsyncSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import type { WriteLock } from './write-lock.ts';

interface Job {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export interface TurnCommitOptions {
  /** The database's WAL file (`<file>-wal`): sync it off the event loop. Absent: every COMMIT syncs itself. */
  walFile?: string;
  /**
   * A lock shared with the turn commit of another thread's connection to the same file (write-lock.ts): taken
   * around each turn's transaction, so the two hand SQLite's write lock to each other at once instead of through
   * SQLite's busy handler, which sleeps 1 ms and more per retry. A turn that finds it held waits for the release
   * without blocking the event loop (once; see onTurnEnd).
   */
  lock?: WriteLock;
  /** How the WAL is synced off the loop; node:fs fdatasync (tests slow it down to look between commit and sync). */
  fdatasync?: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;
}

export interface TurnCommit {
  /** Runs `fn` (database work only: it may run twice, see above) in this turn's transaction; settles once durable. */
  submit<T>(fn: () => T): Promise<T>;
  /** Runs what is queued now and makes it durable, settling every caller (before closing the database). */
  flush(): void;
}

/** Settles one caller: with the sync's error, or with the job's result. */
type Settle = (syncError?: Error) => void;

export function createTurnCommit(db: Database.Database, opts: TurnCommitOptions = {}): TurnCommit {
  let queue: Job[] = [];
  let scheduled = false;
  const { walFile } = opts;
  const syncWal = opts.fdatasync ?? fdatasync;

  const runAll = db.transaction((jobs: Job[]) => jobs.map((job) => job.run()));
  // Rows changed by this connection so far: a turn that changed none wrote no WAL frame and needs no sync (a lease
  // that found nothing — most turns below saturation).
  const totalChanges = db.prepare('SELECT total_changes()').pluck();

  // Committed, not yet synced: settled by the next sync.
  let unsynced: Settle[] = [];
  // Waiting for the sync that is running.
  let inSync: Settle[] = [];
  let syncing = false;
  let closing = false;
  let fd: number | null = null;

  const openWal = (): number => {
    if (fd === null) {
      fd = openSync(walFile as string, 'r');
      // A new WAL file's directory entry must be durable too (SQLite does this itself under FULL).
      const dirFd = openSync(dirname(walFile as string), 'r');
      try {
        fsyncSync(dirFd);
      } finally {
        closeSync(dirFd);
      }
    }
    return fd;
  };

  const closeWal = () => {
    if (fd !== null) closeSync(fd);
    fd = null;
  };

  const settleAll = (settles: Settle[], err?: Error) => {
    for (const settle of settles) settle(err);
  };

  const startSync = () => {
    if (syncing || unsynced.length === 0) return;
    const waiting = unsynced;
    unsynced = [];
    let walFd: number;
    try {
      walFd = openWal();
    } catch (err) {
      return settleAll(waiting, err as Error);
    }
    syncing = true;
    inSync = waiting;
    syncWal(walFd, (err) => {
      syncing = false;
      // Unless flush() settled them meanwhile.
      if (inSync === waiting) settleAll(waiting, err ?? undefined);
      inSync = [];
      if (closing) closeWal();
      startSync();
    });
  };

  const commit = (jobs: Job[], settles: Settle[]) => {
    let results: unknown[];
    let wrote = true;
    try {
      opts.lock?.acquire();
    } catch (err) {
      // The other thread holds the lock far past any turn (it died or hangs in its transaction): every job fails
      // with that, at once, instead of each waiting out the deadline again alone.
      for (const job of jobs) job.reject(err);
      return;
    }
    try {
      // Not a prepared statement kept for reuse: SQLite applies this pragma when it compiles it, not when it runs.
      if (walFile) db.pragma('synchronous = NORMAL');
      try {
        const before = walFile ? (totalChanges.get() as number) : 0;
        results = runAll.immediate(jobs);
        if (walFile) wrote = (totalChanges.get() as number) !== before;
      } finally {
        opts.lock?.release();
        if (walFile) db.pragma('synchronous = FULL');
      }
    } catch (err) {
      // Rolled back, nothing of it written: a lone job fails at once; else find the failing one.
      if (jobs.length === 1) (jobs[0] as Job).reject(err);
      else for (const job of jobs) commit([job], settles);
      return;
    }
    // A turn that wrote nothing needs no sync of its own — unless an earlier turn's commit is not synced yet: what
    // this one read may be that commit (a retried request finding its idempotency key), and answering before the
    // sync would acknowledge, twice, what a power loss could still take. Then it waits for the next sync.
    const durable = !wrote && !syncing && unsynced.length === 0;
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i] as Job;
      const value = results[i];
      if (durable) job.resolve(value);
      else settles.push((syncError) => (syncError ? job.reject(syncError) : job.resolve(value)));
    }
  };

  const runQueued = (): Settle[] => {
    scheduled = false;
    const jobs = queue;
    queue = [];
    const settles: Settle[] = [];
    if (jobs.length > 0) commit(jobs, settles);
    return settles;
  };

  const commitTurn = () => {
    const settles = runQueued();
    if (!walFile) return settleAll(settles);
    for (const s of settles) unsynced.push(s);
    startSync();
  };

  const onTurnEnd = () => {
    // The other thread's turn is committing: serve requests meanwhile instead of blocking in acquire(); what is
    // submitted until the lock is free joins this turn's transaction. One wait only: if the other thread takes the
    // lock again first, commit() blocks in acquire() as before (a turn is never put off twice).
    if (opts.lock?.held()) void opts.lock.released().then(commitTurn);
    else commitTurn();
  };

  return {
    submit<T>(fn: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run: fn, resolve: resolve as (v: unknown) => void, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(onTurnEnd);
        }
      });
    },
    flush() {
      const settles = runQueued();
      if (!walFile) return settleAll(settles);
      closing = true;
      const waiting = [...inSync, ...unsynced, ...settles];
      inSync = [];
      unsynced = [];
      if (waiting.length > 0) {
        let syncError: Error | undefined;
        try {
          fdatasyncSync(openWal());
        } catch (err) {
          syncError = err as Error;
        }
        settleAll(waiting, syncError);
      }
      // A sync still running on the fd closes it when it returns.
      if (!syncing) closeWal();
    },
  };
}
