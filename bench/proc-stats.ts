/**
 * CPU accounting from Linux /proc for bench/intake.ts: the machine's busy time, a process's CPU time, and the CPU
 * of every other user-space process — so a run can say how saturated the cores were, where the CPU went, and
 * whether another job on the machine disturbed it. Everything degrades to "unknown" (null/empty) off Linux.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

export const CORES = availableParallelism();

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
const ticksToMs = (ticks: number) => (ticks * 1000) / CLK_TCK;

/** Whole-machine jiffies from /proc/stat: busy (everything but idle and iowait, steal included), steal, total. */
export interface MachineCpu {
  busy: number;
  steal: number;
  total: number;
}

export function machineCpu(): MachineCpu | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] as string;
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    return { busy: total - idle, steal: v[7] ?? 0, total };
  } catch {
    return null;
  }
}

/** Share of all cores (0..1) that was busy / stolen between two samples. */
export const busyShare = (a: MachineCpu, b: MachineCpu, key: 'busy' | 'steal' = 'busy') =>
  (b[key] - a[key]) / Math.max(1, b.total - a.total);

interface ProcCpu {
  comm: string;
  ms: number;
  /** Start time in ms since boot: tells a recycled pid from the process sampled before. */
  startMs: number;
}

function readProc(pid: string): ProcCpu | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const f = stat.slice(close + 2).split(' ');
    if (f[1] === '2' || f[1] === '0') return null; // kernel threads (children of kthreadd)
    return {
      comm: stat.slice(stat.indexOf('(') + 1, close),
      ms: ticksToMs(Number(f[11]) + Number(f[12])),
      startMs: ticksToMs(Number(f[19])),
    };
  } catch {
    return null; // exited meanwhile, or not Linux
  }
}

/** A point-in-time sample of the machine and of every user-space process. */
export interface CpuSnapshot {
  wallMs: number;
  /** ms since boot, to recognise processes started after this sample. */
  uptimeMs: number;
  machine: MachineCpu | null;
  procs: Map<number, ProcCpu>;
}

export function snapshot(): CpuSnapshot {
  const procs = new Map<number, ProcCpu>();
  let uptimeMs = 0;
  try {
    uptimeMs = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000;
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const p = readProc(name);
      if (p) procs.set(Number(name), p);
    }
  } catch {
    // not Linux
  }
  return { wallMs: performance.now(), uptimeMs, machine: machineCpu(), procs };
}

/** Where the CPU went between two snapshots, in cores (1.0 = one core busy the whole time). */
export interface CpuBreakdown {
  seconds: number;
  /** All cores busy, incl. kernel work (network stack, I/O) that no process is charged for. */
  machineCores: number | null;
  stealCores: number | null;
  /** The processes named in `mine`, by label. */
  mine: Record<string, number>;
  /** PostgreSQL server processes (they serve the run; other clients of the same server would show up here too). */
  postgresCores: number;
  /** Every other user-space process — another job on the machine; more than ~0.1 core disturbs the run. */
  foreignCores: number;
  foreignTop: string[];
}

export function breakdown(a: CpuSnapshot, b: CpuSnapshot, mine: Record<string, number>): CpuBreakdown {
  const wall = Math.max(1, b.wallMs - a.wallMs);
  const used = (pid: number, p: ProcCpu) => {
    const prev = a.procs.get(pid);
    if (prev && prev.startMs === p.startMs) return p.ms - prev.ms;
    return p.startMs >= a.uptimeMs ? p.ms : 0;
  };
  const minePids = new Map(Object.entries(mine).map(([label, pid]) => [pid, label]));
  const mineCores: Record<string, number> = {};
  let postgresMs = 0;
  let foreignMs = 0;
  const byComm = new Map<string, number>();
  for (const [pid, p] of b.procs) {
    const ms = used(pid, p);
    const label = minePids.get(pid);
    if (label !== undefined) mineCores[label] = ms / wall;
    else if (ms <= 0) continue;
    else if (p.comm === 'postgres') postgresMs += ms;
    else {
      foreignMs += ms;
      byComm.set(p.comm, (byComm.get(p.comm) ?? 0) + ms);
    }
  }
  return {
    seconds: wall / 1000,
    machineCores: a.machine && b.machine ? busyShare(a.machine, b.machine) * CORES : null,
    stealCores: a.machine && b.machine ? busyShare(a.machine, b.machine, 'steal') * CORES : null,
    mine: mineCores,
    postgresCores: postgresMs / wall,
    foreignCores: foreignMs / wall,
    foreignTop: [...byComm]
      .sort((x, y) => y[1] - x[1])
      .slice(0, 3)
      .map(([comm, ms]) => `${comm} ${(ms / wall).toFixed(2)}`),
  };
}
