// The timeline view's pointer and keys: hover, pin and pan on the plot;
// zoom by wheel and keys; the minimap's window dragged or brushed anew.

import { spanAt } from './timeline_paint.js';

// Hover shows an element's details, a click pins them (and shows the
// moment's kinds), a drag pans.
export function attachPlotPointer(view) {
  const ov = view.overlay;
  let drag = null;
  ov.addEventListener('mousemove', (e) => {
    if (!view.g) return;
    const r = ov.getBoundingClientRect();
    const mx = e.clientX - r.left;
    const my = e.clientY - r.top;
    const g = view.g;
    const px = mx * g.dpr;
    const py = g.T + g.ph - my * g.dpr;
    if (drag) {
      const dx = (e.clientX - drag.x) * g.dpr / g.pw * (drag.x1 - drag.x0);
      if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
      view.panTo(drag.x0 - dx, drag.x1 - dx);
      return;
    }
    const inPlot = px >= g.L && px < g.L + g.pw && py >= 0 && py < g.ph + 1;
    view.mouse = { px, inPlot, col: inPlot ? Math.floor(px - g.L) : -1 };
    const id = inPlot ? spanAt(view.spans, Math.floor(px - g.L), Math.floor(py)) : -1;
    view.setHover(id, e.clientX, e.clientY, inPlot ? Math.floor(px - g.L) : -1);
    view.scheduleOverlay();
  });
  ov.addEventListener('mouseleave', () => {
    if (drag) return;
    view.mouse = null;
    view.setHover(-1);
    view.scheduleOverlay();
  });
  ov.addEventListener('mousedown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, x0: view.x0, x1: view.x1, moved: false };
    const up = () => {
      window.removeEventListener('mouseup', up);
      const d = drag;
      drag = null;
      if (d && !d.moved) {
        view.togglePin(view.hover);
        if (view.mouse && view.rep && view.mouse.col >= 0) view.showMoment(view.rep[view.mouse.col]);
      }
    };
    window.addEventListener('mouseup', up);
    e.preventDefault();
    ov.focus({ preventScroll: true });
  });
}

// Wheel zooms around the pointer (or pans, sideways); double-click and 0
// reset; + - and the arrow keys zoom and pan; Escape unpins.
export function attachPlotZoom(view) {
  const ov = view.overlay;
  ov.addEventListener('dblclick', () => {
    view.resetView();
    view.schedule();
  });
  ov.addEventListener('wheel', (e) => {
    if (!view.g) return;
    e.preventDefault();
    const r = ov.getBoundingClientRect();
    const g = view.g;
    const fx = Math.min(1, Math.max(0, ((e.clientX - r.left) * g.dpr - g.L) / g.pw));
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      const dx = e.deltaX / r.width * (view.x1 - view.x0);
      view.panTo(view.x0 + dx, view.x1 + dx);
      return;
    }
    const unit = e.deltaMode === 1 ? 30 : e.deltaMode === 2 ? 300 : 1;
    view.zoomAt(fx, Math.exp(e.deltaY * unit * 0.002));
  }, { passive: false });
  ov.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') view.togglePin(-1, true);
    else if (e.key === '+' || e.key === '=') view.zoomAt(0.5, 0.7);
    else if (e.key === '-') view.zoomAt(0.5, 1 / 0.7);
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      const dx = (view.x1 - view.x0) * 0.15 * (e.key === 'ArrowLeft' ? -1 : 1);
      view.panTo(view.x0 + dx, view.x1 + dx);
    } else if (e.key === '0') {
      view.resetView();
      view.schedule();
    } else return;
    e.preventDefault();
  });
}

// Minimap: drag the window, or brush a new one.
export function attachMinimapBrush(view) {
  const mm = view.minimap;
  mm.addEventListener('mousedown', (e) => {
    if (!view.mini) return;
    const m = view.mini;
    const r = mm.getBoundingClientRect();
    const toX = (clientX) => m.d0 + ((clientX - r.left) * m.dpr - m.L) / m.pw * (m.d1 - m.d0);
    const start = toX(e.clientX);
    // Dragging the window moves it; anywhere else (or when the window
    // already shows everything) dragging selects a new one.
    const full = view.x1 - view.x0 >= (m.d1 - m.d0) * 0.98;
    const inside = !full && start >= view.x0 && start <= view.x1;
    const w0 = [view.x0, view.x1];
    const move = (ev) => {
      const x = toX(ev.clientX);
      if (inside) view.panTo(w0[0] + x - start, w0[1] + x - start);
      else if (Math.abs(x - start) > 0) view.panTo(Math.min(start, x), Math.max(start, x), true);
    };
    const up = (ev) => {
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
      if (!inside && Math.abs(ev.clientX - e.clientX) < 3) {
        const w = view.x1 - view.x0;
        view.panTo(start - w / 2, start + w / 2);
      }
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
    e.preventDefault();
  });
}
