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
}
