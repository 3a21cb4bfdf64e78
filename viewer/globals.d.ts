// What the viewer uses beyond TypeScript's own lib files (checked by
// scripts/lint_viewer.sh; nothing here is emitted).

interface Uint8ArrayConstructor {
  // The browser's base64 decoder (ES2026); data.js falls back to its own
  // where the browser lacks it.
  fromBase64?: (text: string) => Uint8Array;
}

interface Window {
  // Handles for the browser tests and for poking at a page by hand.
  memsight?: {
    app: object;
    page: import('./src/data.js').PageData;
    timing: Record<string, number>;
  };
  memsightViewer?: object;
}
