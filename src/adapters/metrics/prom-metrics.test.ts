/**
 * The lane gauges read laneStats() (an O(backlog) GROUP BY) at most once per scrape and cache it for
 * LANE_STATS_TTL_MS, under an injected clock. Attempts are counted and split by part, also when another thread
 * records them.
 */
import { describe, expect, it } from 'vitest';
import { createPromMetrics, createThreadAttemptMetrics, LANE_STATS_TTL_MS } from './prom-metrics.ts';

function setup(fail = () => false) {
  let t = 1_000_000;
  let calls = 0;
  let dedicated = 0;
  const metrics = createPromMetrics({
    queueStats: async () => ({ pending: 0, circuitsOpen: 0 }),
    laneStats: async () => {
      calls++;
      if (fail()) throw new Error('store down');
      return { dedicatedEndpoints: dedicated, pendingByLane: { 'shared:0': calls, dedicated } };
    },
    defaultMetrics: false,
    now: () => t,
  });
  return {
    metrics,
    calls: () => calls,
    advance: (ms: number) => {
      t += ms;
    },
    setDedicated: (n: number) => {
      dedicated = n;
    },
    body: async () => (await metrics.render()).body,
  };
}

describe('prom-metrics lane gauges', () => {
  it('call laneStats once per scrape for both gauges, and not again within the cache window', async () => {
    const m = setup();
    const first = await m.body();
    expect(m.calls()).toBe(1);
    expect(first).toMatch(/^hookrail_lane_dedicated_endpoints 0$/m);
    expect(first).toMatch(/^hookrail_lane_backlog_deliveries\{lane="shared:0"\} 1$/m);

    m.setDedicated(2);
    m.advance(LANE_STATS_TTL_MS - 1);
    const cached = await m.body();
    expect(m.calls()).toBe(1);
    expect(cached).toMatch(/^hookrail_lane_dedicated_endpoints 0$/m);
    expect(cached).toMatch(/^hookrail_lane_backlog_deliveries\{lane="shared:0"\} 1$/m);

    m.advance(1);
    const fresh = await m.body();
    expect(m.calls()).toBe(2);
    expect(fresh).toMatch(/^hookrail_lane_dedicated_endpoints 2$/m);
    expect(fresh).toMatch(/^hookrail_lane_backlog_deliveries\{lane="shared:0"\} 2$/m);
    expect(fresh).toMatch(/^hookrail_lane_backlog_deliveries\{lane="dedicated"\} 2$/m);
  });

  it('share one in-flight call between concurrent scrapes', async () => {
    const m = setup();
    await Promise.all([m.body(), m.body(), m.body()]);
    expect(m.calls()).toBe(1);
  });

  it('do not keep a failure: that scrape fails, the next one asks again', async () => {
    let down = true;
    const m = setup(() => down);
    await expect(m.body()).rejects.toThrow('store down');
    expect(m.calls()).toBe(1);
    down = false;
    expect(await m.body()).toMatch(/^hookrail_lane_backlog_deliveries\{lane="shared:0"\} 2$/m);
    expect(m.calls()).toBe(2);
  });

  it("refresh at the next scrape after this process's own lane move", async () => {
    const m = setup();
    await m.body();
    m.setDedicated(1);
    m.metrics.laneMoved('promoted');
    const after = await m.body();
    expect(m.calls()).toBe(2);
    expect(after).toMatch(/^hookrail_lane_dedicated_endpoints 1$/m);
    expect(after).toMatch(/^hookrail_lane_moves_total\{direction="promoted"\} 1$/m);
  });

  it('read the queue afresh for each scrape, once for both of its gauges', async () => {
    let calls = 0;
    let clock = 0;
    const metrics = createPromMetrics({
      queueStats: async () => ({ pending: ++calls, circuitsOpen: 0 }),
      defaultMetrics: false,
      now: () => clock,
    });
    expect((await metrics.render()).body).toMatch(/^hookrail_backlog_deliveries 1$/m);
    clock += 15_000; // the next scrape
    expect((await metrics.render()).body).toMatch(/^hookrail_backlog_deliveries 2$/m);
    expect(calls).toBe(2);
  });
});

describe('prom-metrics attempts', () => {
  it('count attempts by outcome and split each one into queue, platform and consumer time', async () => {
    const m = setup();
    const sent = { outcome: 'delivered', errorClass: null, deadLettered: false } as const;
    m.metrics.attemptRecorded({ ...sent, queueMs: 3, platformMs: 7, consumerMs: 40 });
    m.metrics.attemptRecorded({ ...sent, queueMs: 20, platformMs: 2, consumerMs: null });
    // Never sent: only its queue wait is time anyone spent.
    m.metrics.attemptRecorded({
      outcome: 'retryable',
      errorClass: 'circuit_open',
      deadLettered: true,
      queueMs: 600,
      platformMs: 0,
      consumerMs: null,
    });
    // Hookrail could not make it (platform_error): nothing was sent either, whatever time it took.
    m.metrics.attemptRecorded({
      outcome: 'retryable',
      errorClass: 'platform_error',
      deadLettered: false,
      queueMs: 0,
      platformMs: 15_000,
      consumerMs: null,
    });
    const body = await m.body();
    expect(body).toMatch(/^hookrail_attempts_total\{outcome="delivered",error_class="none"\} 2$/m);
    expect(body).toMatch(/^hookrail_attempts_total\{outcome="retryable",error_class="circuit_open"\} 1$/m);
    expect(body).toMatch(/^hookrail_dead_letters_total 1$/m);
    expect(body).toMatch(/^hookrail_deliveries_total\{outcome="delivered"\} 2$/m);
    expect(body).toMatch(/^hookrail_deliveries_total\{outcome="dead_lettered"\} 1$/m);
    const series = (part: string, what: string) =>
      Number(body.match(new RegExp(`^hookrail_attempt_duration_ms_${what}\\{${part}\\} (\\S+)$`, 'm'))?.[1]);
    expect(series('part="queue"', 'count')).toBe(4);
    expect(series('part="queue"', 'sum')).toBe(623);
    expect(series('le="5",part="queue"', 'bucket')).toBe(2);
    expect(series('le="25",part="queue"', 'bucket')).toBe(3);
    expect(series('le="1000",part="queue"', 'bucket')).toBe(4);
    expect(series('part="platform"', 'count')).toBe(2);
    expect(series('part="platform"', 'sum')).toBe(9);
    expect(series('part="consumer"', 'count')).toBe(1);
    expect(series('le="25",part="consumer"', 'bucket')).toBe(0);
    expect(series('le="50",part="consumer"', 'bucket')).toBe(1);
  });
});

describe('prom-metrics attempts recorded by another thread', () => {
  it("are served once, from that thread's registry, appended to this one's", async () => {
    const thread = createThreadAttemptMetrics();
    const metrics = createPromMetrics({
      queueStats: async () => ({ pending: 4, circuitsOpen: 0 }),
      defaultMetrics: false,
      attemptsElsewhere: () => thread.text(),
    });
    thread.attemptRecorded({
      outcome: 'delivered',
      errorClass: null,
      deadLettered: false,
      queueMs: 3,
      platformMs: 7,
      consumerMs: 40,
    });
    metrics.eventAccepted();
    const { body } = await metrics.render();
    expect(body).toMatch(/^hookrail_events_accepted_total 1$/m);
    expect(body).toMatch(/^hookrail_backlog_deliveries 4$/m);
    expect(body).toMatch(/^hookrail_attempts_total\{outcome="delivered",error_class="none"\} 1$/m);
    expect(body).toMatch(/^hookrail_attempt_duration_ms_count\{part="consumer"\} 1$/m);
    // Each family once: a second TYPE line for a name makes the whole scrape invalid.
    for (const name of [
      'hookrail_attempts_total',
      'hookrail_dead_letters_total',
      'hookrail_deliveries_total',
      'hookrail_attempt_duration_ms',
    ])
      expect(body.match(new RegExp(`^# TYPE ${name} `, 'gm'))).toHaveLength(1);
  });
});
