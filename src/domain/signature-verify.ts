/**
 * The consumer's side of Standard Webhooks `v1` (docs/consumer-contract.md), for `hookrail verify`: does a request
 * carry a valid Hookrail signature? Same steps, in the same order, as the reference verifier
 * (`standardwebhooks` Webhook.verify), so that this answers what a consumer's library would answer:
 *   1. all three headers present;
 *   2. the timestamp within ±tolerance of now (exactly `tolerance` seconds either way is still accepted);
 *   3. the header split on single spaces, each entry split on commas into version and signature, entries whose
 *      version is not `v1` skipped, and the base64 text compared in constant time with the one we compute.
 * The signature is computed by signature.ts, the code that signs every delivery, so the two cannot drift.
 *
 * Stricter than the reference library where Hookrail's own requests never differ: the timestamp must be digits
 * only (the library's parseInt accepts `1674087231abc`; Hookrail never sends that), and the id must be one Hookrail
 * could have issued (signature.ts refuses to sign any other). Both are reported as `invalid_header`.
 */
import { timingSafeEqual } from 'node:crypto';
import { signV1 } from './signature.ts';

/** What the reference libraries use, in both directions (they do not make it configurable). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type SignatureHeaderName = 'webhook-id' | 'webhook-timestamp' | 'webhook-signature';

export type VerifyRejection =
  | { valid: false; reason: 'missing_header' | 'invalid_header'; header: SignatureHeaderName }
  | {
      valid: false;
      reason: 'timestamp_too_old' | 'timestamp_too_new';
      timestamp: number;
      now: number;
      /** Whether a secret matched all the same: a replay or a clock problem rather than a wrong secret. */
      signatureMatches: boolean;
    }
  | { valid: false; reason: 'no_matching_signature'; timestamp: number };

export type VerifyResult =
  | {
      valid: true;
      /** Which of the given secrets matched (the first that did, in the order given). */
      secretIndex: number;
      /** The matching entry of the header, `v1,<base64>`. */
      signature: string;
      timestamp: number;
    }
  | VerifyRejection;

export interface VerifyInput {
  /** `whsec_` secrets, any of which may match (a rotation overlap). Validated by the caller (parseSecret). */
  secrets: readonly string[];
  /** Header values as received; null when absent. */
  webhookId: string | null;
  timestamp: string | null;
  signature: string | null;
  /** The raw body bytes, exactly as received. */
  body: Buffer;
  nowSeconds: number;
  /** 0: no timestamp check (a stored request verified long after). */
  toleranceSeconds: number;
}

const DIGITS = /^[0-9]+$/;

export function verifySignature(input: VerifyInput): VerifyResult {
  const { webhookId, timestamp: rawTimestamp, signature } = input;
  // Empty counts as absent, as in the reference library (`!header`).
  if (!webhookId) return { valid: false, reason: 'missing_header', header: 'webhook-id' };
  if (!rawTimestamp) return { valid: false, reason: 'missing_header', header: 'webhook-timestamp' };
  if (!signature) return { valid: false, reason: 'missing_header', header: 'webhook-signature' };
  if (!DIGITS.test(rawTimestamp) || !Number.isSafeInteger(Number(rawTimestamp))) {
    return { valid: false, reason: 'invalid_header', header: 'webhook-timestamp' };
  }
  const timestamp = Number(rawTimestamp);

  let expected: string[];
  try {
    expected = input.secrets.map((s) => signV1(s, webhookId, timestamp, input.body));
  } catch {
    // signV1 refuses only an id Hookrail never issues (the secrets and the timestamp are checked above).
    return { valid: false, reason: 'invalid_header', header: 'webhook-id' };
  }
  const match = findMatch(expected, signature);

  const { nowSeconds: now, toleranceSeconds: tolerance } = input;
  if (tolerance > 0 && now - timestamp > tolerance) {
    return { valid: false, reason: 'timestamp_too_old', timestamp, now, signatureMatches: match !== null };
  }
  if (tolerance > 0 && timestamp > now + tolerance) {
    return { valid: false, reason: 'timestamp_too_new', timestamp, now, signatureMatches: match !== null };
  }
  if (match === null) return { valid: false, reason: 'no_matching_signature', timestamp };
  return { valid: true, secretIndex: match.secretIndex, signature: match.entry, timestamp };
}

/** The first of the secrets (`expected`: `v1,<base64>` for each, in order) that one of the header's entries matches. */
function findMatch(expected: string[], header: string): { secretIndex: number; entry: string } | null {
  const entries = header.split(' ').flatMap((entry) => {
    // Like the reference: only the text between the first and the second comma is the signature.
    const [version, sig = ''] = entry.split(',');
    return version === 'v1' ? [Buffer.from(sig, 'utf8')] : [];
  });
  for (const [i, e] of expected.entries()) {
    const wanted = Buffer.from(e.slice('v1,'.length), 'utf8');
    for (const got of entries) {
      // The length is not secret (every v1 signature is 44 characters); the content is compared in constant time.
      if (got.length === wanted.length && timingSafeEqual(got, wanted)) {
        return { secretIndex: i, entry: `v1,${got.toString('utf8')}` };
      }
    }
  }
  return null;
}
