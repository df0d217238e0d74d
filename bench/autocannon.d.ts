// Minimal typings for the parts of autocannon 8 the intake benchmark uses (the package ships none).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  /** One connection. `responseMax`/`reqsMade` are how autocannon itself ends a connection after N requests. */
  export interface AutocannonClient extends EventEmitter {
    reqsMade: number;
    responseMax: number | undefined;
    on(event: 'response', listener: (statusCode: number, bytes: number, durationMs: number) => void): this;
    on(event: 'done', listener: () => void): this;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export interface AutocannonOptions {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    connections?: number;
    pipelining?: number;
    duration?: number;
    timeout?: number;
    setupClient?: (client: AutocannonClient) => void;
  }

  export interface AutocannonResult {
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    totalRequests: number;
    totalCompletedRequests: number;
    statusCodeStats: Record<string, { count: number }>;
    latency: Record<string, number>;
  }

  export interface AutocannonInstance extends EventEmitter, PromiseLike<AutocannonResult> {
    stop(): void;
  }

  export default function autocannon(opts: AutocannonOptions): AutocannonInstance;
}
