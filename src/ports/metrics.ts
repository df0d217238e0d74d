/** What the running process reports for Prometheus (PRODUCT.md §10). Implemented with prom-client. */
export interface Metrics {
  eventAccepted(): void;
  attemptRecorded(a: {
    outcome: 'delivered' | 'retryable' | 'permanent';
    errorClass: string | null;
    deadLettered: boolean;
    queueMs: number;
    platformMs: number;
    consumerMs: number | null;
  }): void;
  /** One lane move made by this process's maintenance pass (ADR-03). */
  laneMoved(kind: 'promoted' | 'demoted' | 'rehashed'): void;
  /** The text exposition for GET /metrics. */
  render(): Promise<{ contentType: string; body: string }>;
}
