// The extension against the real orch-lsp, in Node with a stand-in for the `vscode` module
// (VS Code itself cannot be installed where the tests run): activation starts the server, an
// opened .orch file gets orchc's three diagnostics, an edit leaves two, and the hover,
// definition, references, symbol and completion providers answer from the server.
//   node --test test/extension_test.js   (ORCH_LSP: the orch-lsp to run; ORCH_SOURCE_DIR: the checkout)
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const Module = require('module');

const server = process.env.ORCH_LSP;
const sourceDir = process.env.ORCH_SOURCE_DIR || path.resolve(__dirname, '../../..');

// ---- the stand-in for VS Code's API: what extension.js uses, recording what it registers ----
class Position { constructor(line, character) { this.line = line; this.character = character; } }
class Range {
  constructor(a, b, c, d) { this.start = new Position(a, b); this.end = new Position(c, d); }
}
class Uri {
  constructor(s) { this.s = s; }
  toString() { return this.s; }
  static parse(s) { return new Uri(s); }
}
class Emitter {
  constructor() { this.listeners = []; }
  event = (fn) => { this.listeners.push(fn); return { dispose() {} }; };
  fire(x) { this.listeners.forEach((fn) => fn(x)); }
}
const events = { open: new Emitter(), change: new Emitter(), save: new Emitter(), close: new Emitter(), config: new Emitter() };
const providers = {};
const published = new Map();  // uri -> diagnostics
let publishedCount = 0;
const vscode = {
  Position, Range, Uri,
  Location: class { constructor(uri, range) { this.uri = uri; this.range = range; } },
  Hover: class { constructor(contents, range) { this.contents = contents; this.range = range; } },
  MarkdownString: class { constructor(value) { this.value = value; } },
  Diagnostic: class { constructor(range, message, severity) { Object.assign(this, { range, message, severity }); } },
  DiagnosticRelatedInformation: class { constructor(location, message) { Object.assign(this, { location, message }); } },
  DocumentSymbol: class {
    constructor(name, detail, kind, range, selectionRange) { Object.assign(this, { name, detail, kind, range, selectionRange }); }
  },
  CompletionItem: class { constructor(label, kind) { Object.assign(this, { label, kind }); } },
  window: { showErrorMessage: (m) => { throw new Error(m); } },
  commands: { registerCommand: () => ({ dispose() {} }) },
  workspace: {
    textDocuments: [],
    workspaceFolders: undefined,
    getConfiguration: () => ({
      get: (key) => ({ 'server.path': server, 'server.args': ['--no-compile-on-save'], debounceMs: 0 })[key],
    }),
    onDidOpenTextDocument: events.open.event,
    onDidChangeTextDocument: events.change.event,
    onDidSaveTextDocument: events.save.event,
    onDidCloseTextDocument: events.close.event,
    onDidChangeConfiguration: events.config.event,
  },
  languages: {
    createDiagnosticCollection: () => ({
      set: (uri, list) => { published.set(uri.toString(), list); publishedCount++; },
      clear: () => published.clear(),
      dispose() {},
    }),
    registerHoverProvider: (_, p) => { providers.hover = p; return { dispose() {} }; },
    registerDefinitionProvider: (_, p) => { providers.definition = p; return { dispose() {} }; },
    registerReferenceProvider: (_, p) => { providers.references = p; return { dispose() {} }; },
    registerDocumentSymbolProvider: (_, p) => { providers.symbols = p; return { dispose() {} }; },
    registerCompletionItemProvider: (_, p) => { providers.completion = p; return { dispose() {} }; },
  },
};
const load = Module._load;
Module._load = function (request, ...rest) { return request === 'vscode' ? vscode : load.call(this, request, ...rest); };
const extension = require('../extension.js');

function doc(file, text, version = 1) {
  return { uri: Uri.parse('file://' + file), languageId: 'orch', version, getText: () => text };
}

async function until(what, predicate, ms = 10000) {
  const end = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const threeErrors = `pipeline three
param n: u32 = 1024
buffer a: f32[n]
buffer b: i32[n]
kernel k(n: u32, a: inout f32[]) source """
extern "C" __global__ void k(unsigned n, float* a) {}
"""
graph main {
  k<<<1, 2048>>>(n, a)
  copy a -> b
  fill c = 0
}
`;

test('the extension drives orch-lsp', { skip: !server && 'ORCH_LSP is not set' }, async () => {
  const context = { subscriptions: [] };
  extension.activate(context);
  const three = doc('/tmp/three.orch', threeErrors);
  events.open.fire(three);
  await until('three diagnostics', () => (published.get(three.uri.toString()) || []).length === 3);
  const d = published.get(three.uri.toString());
  assert.deepStrictEqual(d.map((x) => x.code), ['E0201', 'E0301', 'E0101']);
  assert.deepStrictEqual([d[2].range.start.line, d[2].range.start.character, d[2].range.end.character], [10, 7, 8]);
  assert.strictEqual(d[0].severity, 0);  // vscode.DiagnosticSeverity.Error
  assert.deepStrictEqual(d[1].relatedInformation.map((r) => r.message), ['`a` is declared here', '`b` is declared here']);

  // An edit that fixes the copy: two diagnostics.
  const before = publishedCount;
  three.version = 2;
  events.change.fire({ document: three, contentChanges: [{ range: new Range(3, 10, 3, 13), text: 'f32' }] });
  await until('two diagnostics', () => publishedCount > before && published.get(three.uri.toString()).length === 2);

  const jacobiPath = path.join(sourceDir, 'examples/jacobi.orch');
  const jacobiText = fs.readFileSync(jacobiPath, 'utf8');
  const jacobi = doc(jacobiPath, jacobiText);
  events.open.fire(jacobi);
  await until('jacobi checked', () => published.has(jacobi.uri.toString()));
  assert.deepStrictEqual(published.get(jacobi.uri.toString()), []);
  const lines = jacobiText.split('\n');
  const find = (needle) => {
    const line = lines.findIndex((l) => l.includes(needle));
    return new Position(line, lines[line].indexOf(needle));
  };
  const hover = await providers.hover.provideHover(jacobi, find('sweep<<<'));
  assert.match(hover.contents.value, /kernel sweep\(n: u32, src: in f32\[\]/);
  assert.match(hover.contents.value, /After, in the DAG/);
  const defs = await providers.definition.provideDefinition(jacobi, find('residual > tol'));
  assert.strictEqual(defs.length, 1);
  assert.strictEqual(defs[0].range.start.line, find('buffer residual').line);
  const refs = await providers.references.provideReferences(jacobi, find('residual > tol'), { includeDeclaration: true });
  assert.strictEqual(refs.length, 6);
  const symbols = await providers.symbols.provideDocumentSymbols(jacobi);
  assert.deepStrictEqual(symbols.map((s) => s.name).slice(-2), ['sweep', 'main']);
  assert.strictEqual(symbols[symbols.length - 2].kind, 11);  // vscode.SymbolKind.Function
  const items = await providers.completion.provideCompletionItems(jacobi, new Position(find('copy u -> u_host').line, 2));
  assert.ok(items.some((i) => i.label === 'copy' && i.kind === 13));  // vscode.CompletionItemKind.Keyword
  assert.ok(items.some((i) => i.label === 'sweep'));

  await extension.deactivate();
});
