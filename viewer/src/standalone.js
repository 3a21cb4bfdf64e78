// The standalone viewer (`memsight viewer`): a page with no data in it that
// opens snapshots dropped on it or picked with the file chooser. memsight's
// engine, compiled to WebAssembly and embedded in the page, reads the file
// in a Web Worker (engine_worker.js), in pieces, with the same safe reader
// as the CLI; the page's data it returns is shown by the same views as
// `memsight view`'s report. Nothing leaves the computer.

import { startApp } from './app.js';
import { decodeBase64 } from './data.js';
import { formatSize } from './format.js';
import { h } from './ui.js';

// What a drop or a pick opens, by the number of files: one snapshot opens
// its views. Two or more get manyFilesText: the page shows one snapshot.
export const ROUTES = new Map([[1, (viewer, files) => viewer.openSnapshot(files[0])]]);

export function routeFor(count) {
  return ROUTES.get(count) || null;
}

// A file name as a shell argument: quoted unless it is plain.
const shellArg = (name) => (/^[\w.,+@%=:/-]+$/.test(name) ? name : `'${name.replace(/'/g, `'\\''`)}'`);

// What the page says when `names` were picked or dropped (`how`) at once:
// it opens one, and the CLI compares them (two: `memsight diff`; more: the
// ranks of one job, `memsight ranks`).
export function manyFilesText(names, how) {
  const args = names.map(shellArg).join(' ');
  const lead = `You ${how} ${names.length} files; this viewer opens one snapshot at a time: ` +
    `${how === 'dropped' ? 'drop' : 'pick'} one of them.`;
  if (names.length === 2) {
    return `${lead}\nTo compare the two, run\n  memsight diff ${args} -o diff.html\n` +
      'and open diff.html (what grew and shrank between them, by kind, module and allocation site).';
  }
  return `${lead}\nTo compare two of them, run memsight diff BEFORE AFTER -o diff.html; ` +
    `for the ranks of one job, run\n  memsight ranks ${args} -o ranks.html`;
}

// The page's data from the engine's pieces (header, then columns), joined
// once the engine's memory is given back; each piece is let go as it is copied.
export function joinPieces(pieces) {
  let size = 0;
  for (const p of pieces) size += p.byteLength;
  const out = new Uint8Array(size);
  let at = 0;
  for (let i = 0; i < pieces.length; i++) {
    out.set(new Uint8Array(pieces[i]), at);
    at += pieces[i].byteLength;
    pieces[i] = null;
  }
  return out.buffer;
}

class StandaloneViewer {
  constructor(root) {
    this.root = root;
    this.app = null;
    this.worker = null;
    this.timing = {};
    this.picker = h('input', {
      type: 'file', class: 'file-picker', 'aria-label': 'open a snapshot',
      accept: '.pickle,.pkl,.gz,.zst,.zstd,.xz,application/octet-stream', multiple: true,
      onchange: () => {
        const files = [...this.picker.files];
        this.picker.value = '';
        this.open(files, performance.now(), 'picked');
      },
    });
    this.status = h('div', { class: 'viewer-status', role: 'status' });
    document.body.append(this.picker, this.status);
    this.spare = this.startWorker();
    this.showLanding();
    window.addEventListener('dragover', (e) => {
      e.preventDefault();
      document.body.classList.add('dragging');
    });
    window.addEventListener('dragleave', (e) => {
      if (!e.relatedTarget) document.body.classList.remove('dragging');
    });
    window.addEventListener('drop', (e) => {
      e.preventDefault();
      document.body.classList.remove('dragging');
      this.open([...e.dataTransfer.files], performance.now(), 'dropped');
    });
    this.setState('idle');
  }

  setState(state) {
    document.body.dataset.viewer = state;
  }

  showLanding(error = '') {
    this.root.classList.remove('loading');
    this.root.replaceChildren(h('div', { class: 'landing' },
      h('div', { class: 'brand' }, h('span', { class: 'logo' }, '▤'), 'memsight'),
      h('div', { class: 'dropzone' },
        h('p', { class: 'big' }, 'Drop a PyTorch memory snapshot here'),
        h('p', null, 'the pickle of torch.cuda.memory._dump_snapshot, plain or as .gz, .zst or .xz'),
        h('button', { type: 'button', class: 'primary', onclick: () => this.picker.click() }, 'Choose a file…')),
      error ? h('pre', { class: 'open-error' }, error) : null,
      h('p', { class: 'fine' },
        'The file is read on this computer by memsight\'s engine, compiled to WebAssembly and part of ',
        'this page: nothing is uploaded, no network is used, and no code from the file ever runs ',
        '(the reader accepts only the data opcodes of pickle). Large files are read in pieces.')));
  }

  open(files, at, how) {
    if (!files.length) return;
    const route = routeFor(files.length);
    if (!route) {
      this.fail(manyFilesText(files.map((f) => f.name), how));
      return;
    }
    this.timing = { dropAt: at };
    route(this, files);
  }

  fail(message) {
    this.setState('error');
    this.status.textContent = '';
    if (this.app) {
      this.status.textContent = message;
      this.status.classList.add('error');
    } else {
      this.showLanding(message);
    }
  }

  // A worker with the engine started in it, waiting for a file: the page
  // keeps one ready, so a file is read at once (compiling the engine takes
  // a few hundred milliseconds).
  startWorker() {
    const source = document.getElementById('memsight-engine-js').textContent;
    const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
    const worker = new Worker(url);
    URL.revokeObjectURL(url);
    const wasm = decodeBase64(document.getElementById('memsight-engine-wasm').textContent.trim());
    worker.postMessage({ wasm }, [wasm.buffer]);
    return worker;
  }

  openSnapshot(file) {
    if (this.worker) this.worker.terminate();
    this.setState('reading');
    this.status.classList.remove('error');
    this.status.textContent = `Reading ${file.name} (${formatSize(file.size, false)})…`;
    const worker = this.spare || this.startWorker();
    this.spare = null;
    this.worker = worker;
    worker.onmessage = (e) => {
      if (worker !== this.worker) return;
      const m = e.data;
      if (m.type === 'progress') {
        const pct = m.total ? Math.round(m.done / m.total * 100) : 0;
        this.status.textContent = `Reading ${file.name}: ${pct}% of ${formatSize(m.total, false)}`;
        return;
      }
      worker.terminate();  // gives the engine's memory back
      this.worker = null;
      this.timing.engine = m.ms;
      this.timing.engineHeap = m.heap;
      if (m.type === 'error') this.fail(m.message);
      else this.show(joinPieces(m.pieces), file);
      this.spare = this.startWorker();  // for the next file
    };
    worker.onerror = (e) => {
      e.preventDefault();
      worker.terminate();
      this.worker = null;
      this.fail(`${file.name}: the browser stopped the reader (${e.message || 'out of memory?'})`);
      this.spare = this.startWorker();
    };
    worker.postMessage({ file });
  }

  show(buffer, file) {
    if (this.app) this.app.dispose();
    this.status.textContent = '';
    document.body.dataset.ready = '';
    this.timing.dataBytes = buffer.byteLength;
    this.app = startApp(buffer, this.root, this.timing);
    const header = this.root.querySelector('header.top .header-controls');
    if (header) {
      header.append(h('button', {
        type: 'button', class: 'open-another', title: 'open another snapshot (or drop it on the page)',
        onclick: () => this.picker.click(),
      }, 'Open…'));
    }
    document.title = `${file.name} - memsight`;
    this.setState('ready');
  }
}

// The standalone page (not node's tests, which import the functions above).
if (typeof document !== 'undefined' && document.getElementById('memsight-engine-js')) {
  window.memsightViewer = new StandaloneViewer(document.getElementById('app'));
}
