// Small DOM helpers shared by the views.

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

// The floating tooltip that follows the pointer.
export class Tooltip {
  constructor() {
    this.el = h('div', { class: 'tooltip', role: 'tooltip' });
    document.body.append(this.el);
    this.hide();
  }

  show(x, y, content) {
    if (typeof content === 'string') this.el.textContent = content;
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

// The stack pane: frames as lines, the user's own code emphasised.
export function stackLines(text) {
  const pre = h('pre', { class: 'stack' });
  pre.textContent = text;
  return pre;
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
