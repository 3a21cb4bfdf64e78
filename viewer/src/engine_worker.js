// The standalone viewer's Web Worker (a classic script, placed after
// emscripten's loader of the engine, MemsightEngine, in one blob). It starts
// the engine as soon as the page is open, then reads
// the dropped File in pieces with synchronous slices, feeding the engine's
// byte source as the engine asks for bytes, so the file is never held whole;
// it posts back progress, then the page's data in pieces (transferred, not
// copied: the header, then the columns as the engine packed them) or the
// engine's one-line error. The page ends the worker afterwards, which gives
// the engine's memory back, and only then joins the pieces.
/* global MemsightEngine, FileReaderSync */

// Each piece read is a new buffer, garbage once copied. While the engine
// runs, this worker never returns to its event loop, so the collector gets
// no chance to free them and they pile up (over a gigabyte of a 2 GB file).
// Short-lived objects make it run its quick young-generation collections,
// which free the pieces (about 0.2 s a gigabyte read, in node on the
// development VM).
let junk = null;
function letCollectorRun() {
  for (let i = 0; i < 20000; i++) junk = { i, next: i & 1023 ? junk : null };
}

// The engine, started as soon as the worker gets the WebAssembly (while the
// user is still choosing a file), then used for one file.
let engine = null;
let file = null;
let pieces = [];
let lastReport = 0;
const reader = new FileReaderSync();

async function start(wasm) {
  engine = await MemsightEngine({
    wasmBinary: wasm,
    // Copies up to n bytes of the file at `offset` into the engine's memory at dst.
    readChunk(dst, offset, n) {
      const end = Math.min(file.size, offset + n);
      if (end <= offset) return 0;
      const bytes = new Uint8Array(reader.readAsArrayBuffer(file.slice(offset, end)));
      engine.HEAPU8.set(bytes, dst);
      letCollectorRun();
      return bytes.length;
    },
    onProgress(done, total) {
      const now = performance.now();
      if (now - lastReport < 100) return;
      lastReport = now;
      self.postMessage({ type: 'progress', done, total });
    },
    onPiece(ptr, size) {
      pieces.push(engine.HEAPU8.slice(ptr, ptr + size).buffer);
    },
  });
}

function read() {
  const started = performance.now();
  const name = file.name || 'snapshot';
  const len = engine.lengthBytesUTF8(name) + 1;
  const namePtr = engine._malloc(len) >>> 0;
  engine.stringToUTF8(name, namePtr, len);
  const rc = engine._memsight_open(file.size, namePtr);
  const ptr = engine._memsight_result() >>> 0;  // an address; may be past 2 GiB
  const size = engine._memsight_result_size();
  const out = engine.HEAPU8.slice(ptr, ptr + size);  // a copy that outlives the engine
  engine._memsight_release();
  const ms = performance.now() - started;
  if (rc === 0) {
    pieces.unshift(out.buffer);
    self.postMessage({ type: 'done', pieces, ms, heap: engine.HEAPU8.length }, pieces);
  } else {
    self.postMessage({ type: 'error', message: new TextDecoder().decode(out), ms });
  }
}

// {wasm}: start the engine; {file}: read it, once the engine has started.
let started = null;
self.onmessage = async (msg) => {
  try {
    if (msg.data.wasm) {
      started = start(msg.data.wasm);
      await started;
      return;
    }
    file = msg.data.file;
    pieces = [];
    await started;
    read();
  } catch (err) {
    // The engine reports every problem of the file itself; this is the
    // browser refusing (no WebAssembly, memory exhausted, unreadable file).
    const what = file ? file.name : 'the engine';
    self.postMessage({ type: 'error', message: `${what}: ${err && err.message ? err.message : err}` });
  }
};
