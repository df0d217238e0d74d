/**
 * Confirmation dialogs (the native <dialog>, modal). Every change the console makes goes through one: it says what
 * will happen in plain words before anything is sent.
 */
import { type Child, h } from './dom.ts';

export interface DialogOptions {
  title: string;
  content: Child[];
  confirm: string;
  danger?: boolean;
  /** Runs on confirm; a returned message keeps the dialog open and shows it (e.g. a refused input). */
  check?: () => string | null;
}

export function confirmDialog(o: DialogOptions): Promise<boolean> {
  return openDialog(o, true);
}

/** A result the user must see once (a new signing secret): stays until dismissed. */
export async function showOnce(title: string, content: Child[]): Promise<void> {
  await openDialog({ title, content, confirm: 'Done' }, false);
}

/** The dialog both use: with `cancel`, a Cancel button beside the confirming one. Resolves true when confirmed. */
function openDialog(o: DialogOptions, cancel: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const problem = h('p', { class: 'error', role: 'alert', hidden: true });
    const dialog = h(
      'dialog',
      { 'aria-label': o.title },
      h(
        'form',
        { method: 'dialog' },
        h('h2', null, o.title),
        ...o.content,
        problem,
        h(
          'menu',
          null,
          cancel ? h('button', { type: 'submit', value: 'cancel', formnovalidate: true }, 'Cancel') : null,
          h('button', { type: 'submit', value: 'ok', class: o.danger ? 'danger' : 'primary' }, o.confirm),
        ),
      ),
    );
    dialog.addEventListener('submit', (e) => {
      const submitter = (e as SubmitEvent).submitter as HTMLButtonElement | null;
      if (submitter?.value !== 'ok' || !o.check) return;
      const refusal = o.check();
      if (refusal) {
        e.preventDefault();
        problem.textContent = refusal;
        problem.hidden = false;
      }
    });
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'ok');
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
