/** Display formats: times in the browser's zone, durations in ms, rates in percent. */
export const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

export const clock = (iso: string) =>
  new Date(iso).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

export const day = (iso: string) =>
  new Date(iso).toLocaleDateString(undefined, { month: 'short', day: 'numeric' });

export const ms = (n: number | null | undefined) =>
  n === null || n === undefined ? '—' : n >= 10_000 ? `${(n / 1000).toFixed(1)} s` : `${Math.round(n)} ms`;

export const pct = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `${n}%`);

export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '—';
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  if (seconds < 48 * 3600) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} days`;
}

export const count = (n: number) => n.toLocaleString();

export const plural = (n: number, one: string, many = `${one}s`) => `${count(n)} ${n === 1 ? one : many}`;
