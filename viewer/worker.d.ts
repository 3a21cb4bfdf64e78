// The engine's emscripten loader, which comes before engine_worker.js in the
// worker's script (src/report/standalone.cpp): the module it starts, as far
// as the worker uses it (src/wasm/engine.cpp, exported by cmake/wasm.cmake).

interface MemsightEngineModule {
  HEAPU8: Uint8Array;
  lengthBytesUTF8(s: string): number;
  stringToUTF8(s: string, ptr: number, maxBytes: number): void;
  _malloc(n: number): number;
  _memsight_open(fileSize: number, namePtr: number): number;
  _memsight_result(): number;
  _memsight_result_size(): number;
  _memsight_release(): void;
}

interface MemsightEngineOptions {
  wasmBinary: ArrayBuffer | Uint8Array;
  // The engine's byte source and its reports (src/wasm/).
  readChunk(dst: number, offset: number, n: number): number;
  onProgress(done: number, total: number): void;
  onPiece(ptr: number, size: number): void;
}

declare function MemsightEngine(options: MemsightEngineOptions): Promise<MemsightEngineModule>;
