#pragma once
// The flamegraph SVG's style sheet and script, written into every graph
// (the SVG has no external resources).
#include <string_view>

namespace memsight::flame {

inline constexpr std::string_view kStyle = R"(<style>
text { font-family: Verdana, DejaVu Sans, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { font-size: 17px; text-anchor: middle; }
#hint { font-size: 11px; fill: rgb(120,120,120); text-anchor: middle; }
#search, #matched { text-anchor: end; }
.btn { fill: rgb(30,80,170); cursor: pointer; }
.btn:hover { text-decoration: underline; }
.f { cursor: pointer; }
.f:hover rect { stroke: rgb(40,40,40); stroke-width: 0.6; }
.anc rect { fill: rgb(215,215,215); }
.anc text { fill: rgb(110,110,110); }
.hid { display: none; }
</style>
)";

// Zoom, search and hover: the body of a function that render_flamegraph_svg() opens with the
// constants W, PAD, TOTAL, CHAR_W and LABEL_PAD (nothing leaks into the global scope, so the
// SVG can be inlined next to another). Plain ES2017, no dependencies. Must not contain the
// CDATA end marker (a unit test checks).
inline constexpr std::string_view kScript = R"JS(
  const AVAIL = W - 2 * PAD;
  const HIGHLIGHT = 'rgb(230,0,230)';
  const byId = (id) => document.getElementById(id);
  const frames = byId('frames'), details = byId('details'), matched = byId('matched');
  const unzoomBtn = byId('unzoom'), searchBtn = byId('search');
  const items = new Map();
  for (const g of frames.children) {
    const title = g.children[0].textContent, rect = g.children[1];
    items.set(g, {
      g, rect, text: g.children[2], name: title.slice(0, title.lastIndexOf(' (')),
      x: Number(g.getAttribute('data-x')), w: Number(g.getAttribute('data-w')),
      y: Number(rect.getAttribute('y')), fill: rect.getAttribute('fill'),
    });
  }
  const root = items.get(frames.children[0]);

  // Same rule as fit_label() in flamegraph_svg.cpp; counts code points, not UTF-16 units.
  const fit = (name, width) => {
    const room = Math.floor((width - 2 * LABEL_PAD) / CHAR_W);
    if (room < 3) return '';
    const cps = Array.from(name);
    return cps.length <= room ? name : cps.slice(0, room - 2).join('') + '..';
  };
  const place = (it, fx, fw) => {
    const x = PAD + fx * AVAIL, w = fw * AVAIL;
    it.rect.setAttribute('x', x.toFixed(2));
    it.rect.setAttribute('width', w.toFixed(2));
    it.text.setAttribute('x', (x + LABEL_PAD).toFixed(2));
    it.text.textContent = fit(it.name, w);
  };

  // The clicked frame spans the full width; its descendants scale with it; its ancestors
  // stay, full width and greyed; everything else is hidden.
  const zoom = (t) => {
    for (const it of items.values()) {
      it.g.classList.remove('hid', 'anc');
      if (it.y < t.y) {
        if (it.x <= t.x && it.x + it.w >= t.x + t.w) {
          place(it, 0, 1);
          it.g.classList.add('anc');
        } else {
          it.g.classList.add('hid');
        }
      } else if (it.x >= t.x && it.x + it.w <= t.x + t.w) {
        place(it, (it.x - t.x) / t.w, it.w / t.w);
      } else {
        it.g.classList.add('hid');
      }
    }
    unzoomBtn.classList.toggle('hid', t === root);
  };

  let term = '';
  const clearSearch = () => {
    for (const it of items.values()) it.rect.setAttribute('fill', it.fill);
    matched.textContent = ' ';
    term = '';
  };
  // Highlights frames whose name matches (a regular expression, or the literal text when it
  // is not one) and reports the share of the total they cover, counting nested matches once.
  const search = (s) => {
    clearSearch();
    if (!s) return;
    term = s;
    let re;
    try {
      re = new RegExp(s);
    } catch (e) {
      re = new RegExp(s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    }
    const hits = [];
    for (const it of items.values()) {
      if (re.test(it.name)) {
        it.rect.setAttribute('fill', HIGHLIGHT);
        hits.push(it);
      }
    }
    hits.sort((a, b) => a.x - b.x || b.w - a.w);
    let sum = 0, end = -1;
    for (const h of hits) {
      if (h.x >= end) {
        sum += h.w;
        end = h.x + h.w;
      }
    }
    matched.textContent = 'Matched: ' + (100 * sum / TOTAL).toFixed(1) + '%';
  };
  const ask = () => {
    const s = prompt('Search frames (regular expression or text; empty clears):', term);
    if (s !== null) search(s);
  };

  const frameOf = (e) => items.get(e.target.closest('g.f'));
  frames.addEventListener('mouseover', (e) => {
    const it = frameOf(e);
    if (it) details.textContent = it.g.children[0].textContent;
  });
  frames.addEventListener('mouseout', () => { details.textContent = ' '; });
  frames.addEventListener('click', (e) => {
    const it = frameOf(e);
    if (it) zoom(it);
  });
  unzoomBtn.addEventListener('click', () => zoom(root));
  searchBtn.addEventListener('click', ask);
  window.addEventListener('keydown', (e) => {
    if (e.key === 'F3' || ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F'))) {
      e.preventDefault();
      ask();
    } else if (e.key === 'Escape') {
      clearSearch();
    }
  });
)JS";

}  // namespace memsight::flame
