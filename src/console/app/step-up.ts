/**
 * Elevated actions (changing an endpoint's URL) need a fresh step-up token (ADR-16): the API answers 403
 * `step_up_required`, the console asks for the current code of the tenant's authenticator, trades it for a token
 * at POST /v1/auth/step-up and sends the change again with it. The token is kept in memory only, until it expires.
 */
import { ApiFailure, api } from './api.ts';
import { confirmDialog } from './dialogs.ts';
import { h } from './dom.ts';
import { field } from './views/common.ts';

let held: { token: string; expiresAt: number } | null = null;

/** Forgets the token (sign-out, or a refused key): the next elevated change asks for a code again. */
export function clearStepUp(): void {
  held = null;
}

async function askForToken(): Promise<string | null> {
  const code = h('input', {
    name: 'totp',
    inputmode: 'numeric',
    autocomplete: 'one-time-code',
    pattern: '[0-9]{6}',
    maxlength: 6,
  });
  const ok = await confirmDialog({
    title: 'Confirm with your authenticator',
    content: [
      h(
        'p',
        null,
        'This change redirects where your data goes. Enter the current 6-digit code of the authenticator',
      ),
      h('p', null, 'set up with the step-up seed you received with your tenant key.'),
      field('Code', code),
    ],
    confirm: 'Confirm',
    check: () => (/^[0-9]{6}$/.test(code.value) ? null : 'Enter the 6 digits.'),
  });
  if (!ok) return null;
  const answer = await api<{ token: string; expires_at: string }>('POST', '/v1/auth/step-up', {
    totp: code.value,
  });
  held = { token: answer.token, expiresAt: Date.parse(answer.expires_at) };
  return answer.token;
}

/** Runs `call`; when the API wants a step-up, asks for the code once and runs it again. Null: the user declined. */
export async function withStepUp<T>(
  call: (headers: Record<string, string>) => Promise<T>,
): Promise<T | null> {
  const headers = (): Record<string, string> =>
    held && held.expiresAt > Date.now() ? { 'x-step-up-token': held.token } : {};
  try {
    return await call(headers());
  } catch (e) {
    if (!(e instanceof ApiFailure) || e.code !== 'step_up_required') throw e;
    held = null;
    const token = await askForToken();
    return token === null ? null : call({ 'x-step-up-token': token });
  }
}
