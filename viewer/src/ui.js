// Small DOM helpers shared by the views and the profiler pages.

import { DISPLAY_CUT, countOf, cutLines, cutText, formatCount } from './format.js';

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// A name as the pages show it: cut at DISPLAY_CUT characters, with a
// button that shows the whole text (and one that cuts it again).
export function longText(s, max = DISPLAY_CUT) {
  const text = String(s);
  const span = h('span', { class: 'long-text' });
  if (cutText(text, max) === text) {
    span.textContent = text;
    return span;
  }
  const body = document.createTextNode(cutText(text, max));
  let full = false;
  const toggle = h('button', {
    type: 'button', class: 'show-all',
    onclick: (e) => {
      e.preventDefault();  // inside a <summary> or a clickable row: only this
      e.stopPropagation();
      full = !full;
      body.textContent = full ? text : cutText(text, max);
      toggle.textContent = full ? 'show less' : 'show all';
    },
  }, 'show all');
  span.append(body, ' ', toggle);
  return span;
}

// Appends nodes (an array of any length: no argument spreading) to el,
// replacing what it held.
export function fill(el, nodes) {
  const frag = document.createDocumentFragment();
  for (const n of nodes) if (n) frag.append(n);
  el.replaceChildren(frag);
  return el;
}

// A list too long to build at once (200,000 profiler steps, 100,000
// devices), built a page at a time: rows(from, to) returns the nodes of
// items [from, to). The element's show(item) turns to the page holding it.
export function pagedList(count, rows, { pageSize = 100, noun = 'items' } = {}) {
  const body = h('div', { class: 'paged-body' });
  const info = h('span', { class: 'paged-info' });
  const pages = Math.max(1, Math.ceil(count / pageSize));
  let page = -1;
  const turn = (p) => {
    p = Math.max(0, Math.min(pages - 1, p));
    if (p === page) return;
    page = p;
    const from = p * pageSize;
    const to = Math.min(count, from + pageSize);
    fill(body, rows(from, to));
    info.textContent = `${noun} ${formatCount(from + 1)}–${formatCount(to)} of ${formatCount(count)}`;
    first.disabled = prev.disabled = p === 0;
    next.disabled = last.disabled = p === pages - 1;
  };
  const button = (label, title, to) => h('button', { type: 'button', class: 'page-btn', title, onclick: () => turn(to()) }, label);
  const first = button('«', 'first page', () => 0);
  const prev = button('‹', 'previous page', () => page - 1);
  const next = button('›', 'next page', () => page + 1);
  const last = button('»', 'last page', () => pages - 1);
  const wrap = h('div', { class: 'paged' },
    count > pageSize ? h('div', { class: 'paged-nav' }, first, prev, info, next, last) : null, body);
  wrap.show = (item) => turn(Math.floor(item / pageSize));
  wrap.refresh = () => {
    const p = page;
    page = -1;
    turn(p);
  };
  turn(0);
  return wrap;
}

// Fills a <pre> (a stack, a description) with text whose long lines are
// cut (LINE_CUT), and then a button that shows them whole.
export function setText(el, text) {
  const { text: shown, cut } = cutLines(text);
  if (!cut) {
    el.textContent = text;
    return el;
  }
  const body = document.createTextNode(shown);
  let full = false;
  const toggle = h('button', {
    type: 'button', class: 'show-all',
    onclick: (e) => {
      e.preventDefault();
      e.stopPropagation();
      full = !full;
      body.textContent = full ? text : shown;
      toggle.textContent = full ? 'cut long lines' : `show ${countOf(cut, 'long line')} whole`;
    },
  }, `show ${countOf(cut, 'long line')} whole`);
  el.replaceChildren(body, '\n', toggle);
  return el;
}

// The floating tooltip that follows the pointer.
export class Tooltip {
  constructor() {
    this.el = h('div', { class: 'tooltip', role: 'tooltip' });
    document.body.append(this.el);
    this.hide();
  }

  show(x, y, content) {
    // A tooltip cannot be clicked: its long lines are cut; the details pane
    // the same element opens (hover, click) shows them whole.
    if (typeof content === 'string') this.el.textContent = cutLines(content).text;
    else this.el.replaceChildren(content);
    this.el.style.display = 'block';
    const r = this.el.getBoundingClientRect();
    const vw = window.innerWidth;
    const vh = window.innerHeight;
    let left = x + 14;
    let top = y + 16;
    if (left + r.width > vw - 8) left = Math.max(8, x - r.width - 14);
    if (top + r.height > vh - 8) top = Math.max(8, y - r.height - 12);
    this.el.style.left = `${left}px`;
    this.el.style.top = `${top}px`;
  }

  hide() { this.el.style.display = 'none'; }
}

// Sizes a canvas to its CSS box in device pixels; returns the scale.
export function fitCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const r = canvas.getBoundingClientRect();
  const w = Math.max(1, Math.round(r.width * dpr));
  const hh = Math.max(1, Math.round(r.height * dpr));
  if (canvas.width !== w || canvas.height !== hh) {
    canvas.width = w;
    canvas.height = hh;
  }
  return dpr;
}

// Runs fn once per animation frame at most, however often it is asked for.
export function frameScheduler(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fn();
    });
  };
}

// The stack pane: frames as lines, long ones cut (one click shows them).
export function stackLines(text) {
  return setText(h('pre', { class: 'stack' }), text);
}

export function segmented(options, value, onChange) {
  const wrap = h('div', { class: 'segmented', role: 'radiogroup' });
  const buttons = options.map(([v, label, title]) => {
    const b = h('button', {
      type: 'button', 'data-value': v, title, role: 'radio',
      onclick: () => {
        set(v);
        onChange(v);
      },
    }, label);
    wrap.append(b);
    return b;
  });
  const set = (v) => {
    for (const b of buttons) {
      const on = b.dataset.value === v;
      b.classList.toggle('on', on);
      b.setAttribute('aria-checked', on ? 'true' : 'false');
    }
  };
  set(value);
  wrap.set = set;
  return wrap;
}
