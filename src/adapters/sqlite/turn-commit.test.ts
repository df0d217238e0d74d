import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTurnCommit } from './turn-commit.ts';

describe('turn commit (SQLite)', () => {
  let dir: string;
  let db: Database.Database;
  let reader: Database.Database;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'hookrail-turn-'));
    const file = join(dir, 'db.sqlite');
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
    const turn = createTurnCommit(db);
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
    const turn = createTurnCommit(db);
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
    await expect(a).resolves.toBe(1);
    await expect(b).rejects.toThrow('job b failed');
    await expect(c).resolves.toBe(1);
    expect(committed()).toEqual(['a', 'c']); // b's insert was rolled back; a and c are not doubled
    expect(runsOfA).toBe(2); // once in the rolled-back turn, once alone
  });

  it('a constraint error rejects only its own job, and later turns run normally', async () => {
    const turn = createTurnCommit(db);
    await turn.submit(() => insert('x'));
    const dup = turn.submit(() => insert('x'));
    const ok = turn.submit(() => insert('y'));
    await expect(dup).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    await expect(ok).resolves.toBe(1);
    await expect(turn.submit(() => insert('z'))).resolves.toBe(1);
    expect(committed()).toEqual(['x', 'y', 'z']);
  });

  it('flush runs what is queued at once (before the database closes)', async () => {
    const turn = createTurnCommit(db);
    const a = turn.submit(() => insert('a'));
    turn.flush();
    expect(committed()).toEqual(['a']);
    await expect(a).resolves.toBe(1);
  });
});
