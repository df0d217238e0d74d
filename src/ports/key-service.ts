/**
 * Encryption at rest for signing secrets (PRODUCT.md §8). `aad` binds a ciphertext to where it belongs
 * (e.g. `tenant:<id>/endpoint:<id>`), so a sealed value copied into another row fails to open instead of
 * silently signing for the wrong endpoint. Sync because the local implementation is pure CPU work; a cloud
 * KMS adapter would unwrap data keys once and cache them behind this same interface.
 */
export interface KeyService {
  /** Returns a self-describing, versioned string safe to store in a TEXT column. */
  seal(plaintext: Buffer, aad: string): string;
  /** Throws when the value was tampered with, sealed under another master key, or sealed for another aad. */
  open(sealed: string, aad: string): Buffer;
  /**
   * HMAC-SHA256 of `data` (UTF-8) under a MAC key derived from the master key, base64url without padding. Every
   * process sharing the master key computes the same value, so stateless tokens minted by one verify on another.
   * One key serves every purpose: callers start `data` with a purpose tag of their own (`su1.` for step-up tokens),
   * so a MAC made for one purpose never verifies as another.
   */
  mac(data: string): string;
}
