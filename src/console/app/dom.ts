/**
 * Element builders. Every value from the API reaches the page as a text node or an attribute value, never as
 * markup: there is no innerHTML anywhere in the console.
 */
export type Child = Node | string | number | null | undefined | false | Child[];
type AttrValue = string | number | boolean | null | undefined;
export type Attrs = Record<string, AttrValue | ((e: Event) => void)>;

function apply(el: Element, attrs: Attrs | null | undefined, children: Child[]): void {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else if (v !== false && v !== null && v !== undefined) el.setAttribute(k, String(v));
  }
  append(el, children);
}

export function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(typeof c === 'number' ? String(c) : c);
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, attrs, children);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';
export function s(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  apply(el, attrs, children);
  return el;
}

export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

export const link = (href: string, ...children: Child[]) => h('a', { href }, ...children);

/** A button that copies `value` to the clipboard. */
export function copyButton(value: string): HTMLButtonElement {
  const button = h(
    'button',
    {
      type: 'button',
      class: 'link',
      onclick: () => {
        void navigator.clipboard?.writeText(value).then(
          () => {
            button.textContent = 'Copied';
          },
          () => {
            button.textContent = 'Select and copy';
          },
        );
      },
    },
    'Copy',
  );
  return button;
}

/** A read-only value the user may want to copy (secrets, ids), with a copy button. */
export function copyable(value: string, testId?: string): HTMLElement {
  return h(
    'span',
    { class: 'copyable' },
    h('code', { 'data-testid': testId }, value),
    ' ',
    copyButton(value),
  );
}
