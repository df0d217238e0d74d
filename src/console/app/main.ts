/**
 * The console's entry: asks for a tenant key, then routes by the URL's hash (#/endpoints, #/endpoints/<id>,
 * #/deliveries/<id>) so that every page has a link of its own and the server serves one static page.
 */
import { api, SIGNED_OUT, session } from './api.ts';
import { h, replace } from './dom.ts';
import { clearStepUp } from './step-up.ts';
import { activityView } from './views/activity.ts';
import { message } from './views/common.ts';
import { deliveryView } from './views/delivery.ts';
import { endpointView } from './views/endpoint.ts';
import { endpointsView } from './views/endpoints.ts';

const main = () => document.getElementById('main') as HTMLElement;

let generation = 0;

/** Signs out of this tab: the key, any step-up token, and any page still loading for the old key. */
function signOut(): void {
  session.clear();
  clearStepUp();
  generation++;
}

function signIn(problem?: string): void {
  const key = h('input', {
    type: 'password',
    name: 'key',
    required: true,
    autocomplete: 'off',
    placeholder: 'hkt_…',
    'aria-label': 'Tenant key',
  });
  const error = h('p', { class: 'error', role: 'alert', hidden: !problem }, problem ?? '');
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card signin', 'aria-label': 'Sign in' },
    h('h1', null, 'Sign in'),
    h('p', null, 'Enter your tenant key. It stays in this browser tab only and is sent to this server only.'),
    key,
    error,
    submit,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    session.set(key.value.trim());
    // Any read the key allows proves it; a refused key fires SIGNED_OUT and comes back here.
    api('GET', '/v1/endpoints?limit=1').then(
      () => {
        if (!location.hash || location.hash === '#/') location.hash = '#/endpoints';
        else void route();
        chrome();
      },
      (e) => {
        session.clear();
        submit.disabled = false;
        error.textContent = message(e);
        error.hidden = false;
      },
    );
  });
  replace(main(), form);
  chrome();
  key.focus();
}

function chrome(): void {
  const key = session.key();
  const out = document.getElementById('sign-out') as HTMLButtonElement;
  out.hidden = key === null;
  (document.getElementById('who') as HTMLElement).textContent = key ? `key ${key.slice(0, 10)}…` : '';
}

/** An object id as the API mints them (`ep_…`, `dlv_…`); anything else in a link is not one. */
const ID = /^[a-z]{2,4}_[0-9A-Za-z]{1,60}$/;

async function route(): Promise<void> {
  if (!session.key()) return signIn();
  const mine = ++generation;
  const target = h('div');
  try {
    const [path = '', q = ''] = location.hash.replace(/^#/, '').split('?');
    const query = new URLSearchParams(q);
    // Ids from the link are checked before they become part of an API path: `..%2F` must not reach another route.
    const [section, id] = path.split('/').filter(Boolean);
    if (id !== undefined && !ID.test(id)) throw new Error('No such page.');
    const parts = [section, id];
    if (parts[0] === 'endpoints' && parts[1]) await endpointView(target, parts[1], query);
    else if (parts[0] === 'deliveries' && parts[1]) await deliveryView(target, parts[1], query);
    else if (parts[0] === 'activity') await activityView(target);
    else await endpointsView(target);
  } catch (e) {
    replace(target, h('p', { class: 'notice error', role: 'alert' }, message(e)));
  }
  // A newer navigation started while this page loaded: it draws instead.
  if (mine === generation && session.key()) replace(main(), target);
}

window.addEventListener('hashchange', () => void route());
window.addEventListener(SIGNED_OUT, () => {
  signOut();
  signIn('The key was refused. Sign in again.');
});
document.getElementById('sign-out')?.addEventListener('click', () => {
  signOut();
  signIn();
});
chrome();
void route();
