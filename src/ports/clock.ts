/** Time and randomness are ports so that every decision can be driven by a fake clock and a seeded source in tests. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export interface Random {
  /** Cryptographically strong bytes (secrets, keys, id entropy). */
  bytes(n: number): Buffer;
  /** Uniform float in [0, 1) — used for jitter, where unpredictability matters less than distribution. */
  float(): number;
}
