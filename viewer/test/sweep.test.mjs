// Every file of viewer/src: no argument spreading (`f(...arr)`: a call with
// 200,000 arguments overflows the stack, as the profile page did with
// 200,000 steps) and no function that calls itself (a tree walk by recursion
// overflows on a stack 100,000 frames deep). Arrays go to h() as arrays and
// to the DOM through fill(); walks use an explicit stack.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const SRC = new URL('../src/', import.meta.url).pathname;

// The source with comments and the insides of strings and templates blanked
// (same length, same lines), so that only code is searched.
function codeOnly(src) {
  let out = '';
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    const d = src[i + 1];
    if (c === '/' && d === '/') {
      while (i < src.length && src[i] !== '\n') { out += ' '; i++; }
    } else if (c === '/' && d === '*') {
      while (i < src.length && !(src[i] === '*' && src[i + 1] === '/')) { out += src[i] === '\n' ? '\n' : ' '; i++; }
      out += '  ';
      i += 2;
    } else if (c === '"' || c === '\'' || c === '`') {
      out += c;
      i++;
      while (i < src.length && src[i] !== c) {
        const skip = src[i] === '\\' ? 2 : 1;
        for (let k = 0; k < skip; k++) out += src[i + k] === '\n' ? '\n' : ' ';
        i += skip;
      }
      out += c;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

const lineOf = (s, at) => s.slice(0, at).split('\n').length;

// Spreads inside parentheses that are a call's arguments (a rest parameter
// in a declaration is followed by ") {" or ") =>", and is allowed).
export function spreadCalls(src) {
  const s = codeOnly(src);
  const found = [];
  for (const m of s.matchAll(/\.\.\./g)) {
    let depth = 0;
    let k = m.index - 1;
    let open = null;
    for (; k >= 0; k--) {
      const ch = s[k];
      if (ch === ')' || ch === ']' || ch === '}') depth++;
      else if (ch === '(' || ch === '[' || ch === '{') {
        if (depth === 0) { open = ch; break; }
        depth--;
      }
    }
    if (open !== '(') continue;
    let close = m.index;
    for (depth = 0; close < s.length; close++) {
      const ch = s[close];
      if (ch === '(' || ch === '[' || ch === '{') depth++;
      else if (ch === ')' || ch === ']' || ch === '}') {
        if (depth === 0) break;
        depth--;
      }
    }
    if (/^\)\s*(\{|=>)/.test(s.slice(close, close + 8))) continue;  // a rest parameter
    found.push(lineOf(s, m.index));
  }
  return found;
}

// Functions, methods and arrow functions whose body calls them by name.
export function selfCalls(src) {
  const s = codeOnly(src);
  const found = [];
  const defs = /(?:function\s+([A-Za-z_$][\w$]*)\s*\(|^\s+(?:static\s+|async\s+|get\s+)?([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*\{|(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:\([^)]*\)|[A-Za-z_$][\w$]*)\s*=>)/gm;
  for (const m of s.matchAll(defs)) {
    const name = m[1] || m[2] || m[3];
    if (['if', 'for', 'while', 'switch', 'catch', 'constructor'].includes(name)) continue;
    let i = m[3] ? m.index + m[0].length : s.indexOf('{', m.index + m[0].length - 1);
    while (/\s/.test(s[i])) i++;
    let end;
    if (s[i] === '{') {
      let depth = 0;
      for (end = i; end < s.length; end++) {
        if (s[end] === '{') depth++;
        else if (s[end] === '}' && --depth === 0) break;
      }
    } else {
      end = s.indexOf(';', i);
    }
    const body = s.slice(i, end);
    const call = m[2] ? new RegExp(`this\\.${name}\\s*\\(`) : new RegExp(`(?<![.\\w$])${name.replace(/\$/g, '\\$')}\\s*\\(`);
    if (call.test(body)) found.push(`${name} (line ${lineOf(s, m.index)})`);
  }
  return found;
}

test('the checks find what they look for', () => {
  assert.deepEqual(spreadCalls('const m = Math.max(...values);\nout.push(...rows);'), [1, 2]);
  assert.deepEqual(spreadCalls('function h(tag, ...children) {}\nconst f = (...a) => a;\nconst b = [...a];\nconst o = { ...p };'), []);
  assert.deepEqual(spreadCalls('// f(...x)\nconst s = "g(...y)";'), []);
  assert.deepEqual(selfCalls('function walk(n) { for (const c of n.kids) walk(c); }'), ['walk (line 1)']);
  assert.deepEqual(selfCalls('class T {\n  walk(n) {\n    return this.walk(n.parent);\n  }\n}'), ['walk (line 2)']);
  assert.deepEqual(selfCalls('const walk = (n) => n && walk(n.next);'), ['walk (line 1)']);
  assert.deepEqual(selfCalls('function a(n) { return b(n); }\nfunction b(n) { return n; }'), []);
});

test('no argument spreading and no recursion anywhere in viewer/src', () => {
  const files = readdirSync(SRC).filter((f) => f.endsWith('.js'));
  assert.ok(files.length >= 12, files.join(' '));
  const problems = [];
  for (const f of files) {
    const src = readFileSync(join(SRC, f), 'utf8');
    for (const line of spreadCalls(src)) problems.push(`${f}:${line}: argument spreading`);
    for (const what of selfCalls(src)) problems.push(`${f}: ${what} calls itself`);
  }
  assert.deepEqual(problems, []);
});
