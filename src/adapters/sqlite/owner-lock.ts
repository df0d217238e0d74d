/**
 * One process owns a SQLite store: its leases, its turn commits and the lease sweep at start (start.ts returns
 * every lease left in the file at once, as a crashed process's) all assume that no other process works on the
 * same file. Nothing stopped a second `hookrail start` on the same data directory (a rolling update on a shared
 * volume, a second start by hand): it took back the first process's live leases and sent them again.
 *
 * The claim is a write transaction held open on a small SQLite file beside the store, for as long as the process
 * runs: SQLite's own file locks, which the operating system drops when the process dies (kill -9 included), and
 * which a second connection in the same process sees as well. Nothing is ever written to that file.
 */
import Database from 'better-sqlite3';

export class StoreInUseError extends Error {}

export interface OwnerLock {
  /** Idempotent. */
  release(): void;
}

export function claimSqliteStore(filename: string): OwnerLock {
  const lockFile = `${filename}.owner`;
  const db = new Database(lockFile, { timeout: 0 });
  try {
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if ((err as { code?: unknown }).code === 'SQLITE_BUSY') {
      throw new StoreInUseError(
        `another Hookrail process is using ${filename} (it holds ${lockFile}); with SQLite one process runs ` +
          'every role: stop it first, or use PostgreSQL (DATABASE_URL) to run several processes',
      );
    }
    throw err;
  }
  return {
    release() {
      if (db.open) db.close(); // closing ends the transaction, and with it the lock
    },
  };
}
