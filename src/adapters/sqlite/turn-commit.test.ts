import { fdatasync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTurnCommit } from './turn-commit.ts';
import { createWriteLock } from './write-lock.ts';

// Another thread's side of write-lock.ts (plain JavaScript: eval'd workers have no TS loader): takes the lock,
// says so, and releases it when told ('release'). After `ms` it releases on its own: only a backstop, so that a
// thread blocked waiting for the lock (the bug the test looks for) fails the test instead of hanging it.
const HOLD_LOCK = `
const { workerData, parentPort } = require('node:worker_threads');
const cell = new Int32Array(workerData.lock, 0, 1);
while (Atomics.compareExchange(cell, 0, 0, 1) !== 0) Atomics.wait(cell, 0, 1, 50);
parentPort.postMessage('held');
const release = () => { clearTimeout(backstop); parentPort.off('message', release); Atomics.store(cell, 0, 0); Atomics.notify(cell, 0); };
const backstop = setTimeout(release, workerData.ms);
parentPort.on('message', release);
`;

describe.each([
  ['each COMMIT synced', false],
  ['WAL synced on the thread pool', true],
])('turn commit (SQLite, %s)', (_name, offLoop) => {
  let dir: string;
  let file: string;
  let db: Database.Database;
  let reader: Database.Database;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'hookrail-turn-'));
    file = join(dir, 'db.sqlite');
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (v TEXT PRIMARY KEY)');
    reader = new Database(file, { readonly: true });
  });
  afterEach(() => {
    reader.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const insert = (v: string) => db.prepare('INSERT INTO t (v) VALUES (?)').run(v).changes;
  const committed = () =>
    (reader.prepare('SELECT v FROM t ORDER BY v').all() as Array<{ v: string }>).map((r) => r.v);

  it('runs the jobs of one turn in one transaction and settles them after its commit', async () => {
    const turn = createTurnCommit(db, offLoop ? { walFile: `${file}-wal` } : {});
    const seenByOthers: string[][] = [];
    const a = turn.submit(() => insert('a'));
    const b = turn.submit(() => {
      // Another connection sees nothing yet: a's write is not committed on its own.
      seenByOthers.push(committed());
      expect(db.inTransaction).toBe(true);
      return insert('b');
    });
    expect(committed()).toEqual([]); // nothing runs before the end of the turn
    await expect(Promise.all([a, b])).resolves.toEqual([1, 1]);
    expect(seenByOthers).toEqual([[]]);
    expect(committed()).toEqual(['a', 'b']);
    expect(db.inTransaction).toBe(false);
  });

  it('a job that throws fails alone: the others of its turn are committed once each', async () => {
    const turn = createTurnCommit(db, offLoop ? { walFile: `${file}-wal` } : {});
    let runsOfA = 0;
    const a = turn.submit(() => {
      runsOfA++;
      return insert('a');
    });
    const b = turn.submit(() => {
      insert('b');
      throw new Error('job b failed');
    });
    const c = turn.submit(() => insert('c'));
    // A failed job is rejected at once; the others settle after the sync: take all three together.
    const [ra, rb, rc] = await Promise.allSettled([a, b, c]);
    expect(ra).toEqual({ status: 'fulfilled', value: 1 });
    expect(rb).toMatchObject({ status: 'rejected', reason: { message: 'job b failed' } });
    expect(rc).toEqual({ status: 'fulfilled', value: 1 });
    expect(committed()).toEqual(['a', 'c']); // b's insert was rolled back; a and c are not doubled
    expect(runsOfA).toBe(2); // once in the rolled-back turn, once alone
  });

  it('a constraint error rejects only its own job, and later turns run normally', async () => {
    const turn = createTurnCommit(db, offLoop ? { walFile: `${file}-wal` } : {});
    await turn.submit(() => insert('x'));
    const dup = turn.submit(() => insert('x'));
    const ok = turn.submit(() => insert('y'));
    await expect(dup).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    await expect(ok).resolves.toBe(1);
    await expect(turn.submit(() => insert('z'))).resolves.toBe(1);
    expect(committed()).toEqual(['x', 'y', 'z']);
  });

  it('flush runs what is queued at once (before the database closes)', async () => {
    const turn = createTurnCommit(db, offLoop ? { walFile: `${file}-wal` } : {});
    const a = turn.submit(() => insert('a'));
    turn.flush();
    expect(committed()).toEqual(['a']);
    await expect(a).resolves.toBe(1);
  });

  it.runIf(offLoop)('settles only after the sync: a WAL that cannot be synced rejects the turn', async () => {
    const turn = createTurnCommit(db, { walFile: join(dir, 'missing-wal') });
    const a = turn.submit(() => insert('a'));
    await expect(a).rejects.toMatchObject({ code: 'ENOENT' });
    // Committed all the same (the caller was told it may not be durable; an idempotent retry finds it).
    expect(committed()).toEqual(['a']);
  });

  it.runIf(offLoop)('a turn that changed no row is answered without waiting for a sync', async () => {
    const turn = createTurnCommit(db, { walFile: join(dir, 'missing-wal') });
    const read = turn.submit(() => db.prepare('SELECT count(*) AS n FROM t').get());
    await expect(read).resolves.toEqual({ n: 0 }); // no sync was tried: the missing WAL would have rejected it
    const write = turn.submit(() => insert('a'));
    await expect(write).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.runIf(offLoop)('a turn that changed no row waits for an earlier turn’s sync still running', async () => {
    // The WAL's sync takes 150 ms here: long enough for the next turn to run while it is in flight.
    const slow = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => {
      setTimeout(() => fdatasync(fd, done), 150);
    };
    const turn = createTurnCommit(db, { walFile: `${file}-wal`, fdatasync: slow });
    const order: string[] = [];
    const write = turn.submit(() => insert('a')).then(() => order.push('write'));
    await new Promise<void>((resolve) => setImmediate(resolve)); // the write's turn committed; its sync is running
    // A retry that finds what the write committed (an idempotency key, say) writes nothing, and must not be
    // answered before that write is durable.
    const read = turn
      .submit(() => db.prepare('SELECT count(*) AS n FROM t').get())
      .then((r) => order.push(`read ${JSON.stringify(r)}`));
    await Promise.all([write, read]);
    expect(order).toEqual(['write', 'read {"n":1}']);
  });

  it('leaves synchronous = FULL for every other transaction of the connection', async () => {
    db.pragma('synchronous = FULL');
    const turn = createTurnCommit(db, offLoop ? { walFile: `${file}-wal` } : {});
    await turn.submit(() => {
      // In the turn: NORMAL when the sync is the turn commit's own job.
      expect(db.pragma('synchronous', { simple: true })).toBe(offLoop ? 1 : 2);
      return insert('a');
    });
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
  });

  it('flush settles every caller, including those waiting for a sync already running', async () => {
    const turn = createTurnCommit(db, offLoop ? { walFile: `${file}-wal` } : {});
    const a = turn.submit(() => insert('a'));
    await new Promise<void>((resolve) => setImmediate(resolve)); // a's turn committed; its sync may be running
    const b = turn.submit(() => insert('b'));
    turn.flush();
    let settled = 0;
    a.then(() => settled++);
    b.then(() => settled++);
    await Promise.resolve();
    await Promise.resolve();
    expect(settled).toBe(2); // before any thread-pool callback could run
    await expect(Promise.all([a, b])).resolves.toEqual([1, 1]);
  });

  it('while the other thread holds the write lock, the turn waits without blocking and later jobs join it', async () => {
    const lock = createWriteLock();
    // The other thread's turn commit, mid-transaction: it holds the lock until told to release it (below).
    const other = new Worker(HOLD_LOCK, { eval: true, workerData: { lock: lock.buffer, ms: 10_000 } });
    await new Promise((resolve) => other.once('message', resolve)); // held
    const turn = createTurnCommit(db, { ...(offLoop ? { walFile: `${file}-wal` } : {}), lock });
    const seenByOthers: string[][] = [];
    const a = turn.submit(() => insert('a'));
    // The turn ended meanwhile; a blocking wait would have held this thread until the release and committed a.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(lock.held()).toBe(true);
    expect(committed()).toEqual([]);
    const b = turn.submit(() => {
      seenByOthers.push(committed()); // a is not committed on its own
      return insert('b');
    });
    other.postMessage('release'); // the other thread's transaction ends
    await expect(Promise.all([a, b])).resolves.toEqual([1, 1]);
    expect(seenByOthers).toEqual([[]]);
    expect(committed()).toEqual(['a', 'b']);
    await other.terminate();
  });

  it("a lock held far past any turn (the other thread died in its transaction) fails the turn's jobs together", async () => {
    const shared = createWriteLock(undefined, { acquireDeadlineMs: 150 });
    let waits = 0;
    const lock = {
      ...shared,
      acquire: () => {
        waits++;
        shared.acquire();
      },
    };
    const other = new Worker(HOLD_LOCK, { eval: true, workerData: { lock: lock.buffer, ms: 10_000 } });
    await new Promise((resolve) => other.once('message', resolve)); // held
    const turn = createTurnCommit(db, { ...(offLoop ? { walFile: `${file}-wal` } : {}), lock });
    const jobs = [turn.submit(() => insert('a')), turn.submit(() => insert('b'))];
    const outcomes = await Promise.allSettled(jobs);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toMatch(/write lock has been held/);
    // Once, not once more per job: the deadline is waited out a single time.
    expect(waits).toBe(1);
    expect(committed()).toEqual([]);
    other.postMessage('release');
    await expect(turn.submit(() => insert('c'))).resolves.toBe(1);
    expect(committed()).toEqual(['c']);
    await other.terminate();
  });
});
