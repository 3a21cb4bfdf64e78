// The pages join the modules each viewer/src/*bundle*.txt lists into one
// classic script, imports dropped (src/report/bundle.cpp), so the modules'
// top-level names share one scope there. A repeated `const` or `class` would
// fail as the page loads; a repeated `function` would silently replace the
// first. Neither shows in a module-by-module type check: this lists every
// name declared twice in one bundle, and exits 1 if there is any.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = join(dirname(fileURLToPath(import.meta.url)), 'src');
// A declaration at the start of a line is a top-level one (the sources are
// indented: nested code never starts at column 0).
const DECL = /^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\s*\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)/;

// The files a list names, "@other.txt" expanded, in order.
function files(list) {
  const out = [];
  for (let line of readFileSync(join(SRC, list), 'utf8').split('\n')) {
    line = line.trim();
    if (!line || line.startsWith('#')) continue;
    if (line.startsWith('@')) out.push(...files(line.slice(1)));
    else out.push(line);
  }
  return out;
}

let findings = 0;
for (const list of readdirSync(SRC).filter((f) => f.includes('bundle') && f.endsWith('.txt')).sort()) {
  const seen = new Map();  // name -> "file:line" of its first declaration
  for (const file of files(list)) {
    readFileSync(join(SRC, file), 'utf8').split('\n').forEach((text, i) => {
      const m = DECL.exec(text);
      if (!m) return;
      const where = `${file}:${i + 1}`;
      if (seen.has(m[1])) {
        console.log(`viewer/src/${where}: '${m[1]}' is declared again in ${list}'s script (first at ${seen.get(m[1])})`);
        findings++;
      } else {
        seen.set(m[1], where);
      }
    });
  }
}
process.exit(findings ? 1 : 0);
