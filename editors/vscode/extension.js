// The VS Code side of orch-lsp: starts the server, keeps it in step with the open .orch files,
// and turns its answers into VS Code's diagnostics, hovers, locations, symbols and
// completions. A small client of its own (lsp_connection.js) rather than vscode-languageclient,
// so the extension has no dependencies to fetch and packs as it is (package_vsix.py).
'use strict';

const vscode = require('vscode');
const { Connection } = require('./lsp_connection');

let connection = null;
let diagnostics = null;
let output = null;
const selector = { language: 'orch' };

// LSP and VS Code count lines and UTF-16 characters alike.
const toPosition = (p) => ({ line: p.line, character: p.character });
const toRange = (r) => ({ start: toPosition(r.start), end: toPosition(r.end) });
const fromRange = (r) => new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
const fromLocation = (l) => new vscode.Location(vscode.Uri.parse(l.uri), fromRange(l.range));
const at = (doc, pos) => ({ textDocument: { uri: doc.uri.toString() }, position: toPosition(pos) });
const isOrch = (doc) => doc.languageId === 'orch';

function settings() {
  const c = vscode.workspace.getConfiguration('orch');
  return {
    command: c.get('server.path') || 'orch-lsp',
    args: c.get('server.args') || [],
    init: {
      debounceMs: c.get('debounceMs'),
      compileOnSave: c.get('compileOnSave'),
      target: c.get('target') || '',
      targetsDir: c.get('targetsDir') || '',
    },
  };
}

function publish(params) {
  const list = params.diagnostics.map((d) => {
    const diag = new vscode.Diagnostic(fromRange(d.range), d.message, (d.severity || 1) - 1);
    diag.code = d.code;
    diag.source = 'orch';
    if (d.relatedInformation)
      diag.relatedInformation = d.relatedInformation.map(
        (r) => new vscode.DiagnosticRelatedInformation(fromLocation(r.location), r.message));
    return diag;
  });
  diagnostics.set(vscode.Uri.parse(params.uri), list);
}

function open(doc) {
  if (!connection || !isOrch(doc)) return;
  connection.notify('textDocument/didOpen', {
    textDocument: { uri: doc.uri.toString(), languageId: 'orch', version: doc.version, text: doc.getText() },
  });
}

function start() {
  const s = settings();
  connection = new Connection(s.command, s.args, {
    onNotification: (method, params) => {
      if (method === 'textDocument/publishDiagnostics') publish(params);
    },
    onLog: (text) => output && output.append(text),
    onError: (err) => vscode.window.showErrorMessage(
      `orch: cannot start ${s.command} (${err.message}); set orch.server.path to orch-lsp's path`),
  });
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  connection.request('initialize', {
    processId: process.pid,
    rootUri: folder ? folder.uri.toString() : null,
    capabilities: { general: { positionEncodings: ['utf-16'] } },
    initializationOptions: s.init,
  }).then(() => connection.notify('initialized', {}), () => {});
  // Requests go out in order, so documents may be opened before initialize is answered.
  vscode.workspace.textDocuments.forEach(open);
}

async function stop() {
  if (!connection) return;
  const c = connection;
  connection = null;
  await c.stop();
  if (diagnostics) diagnostics.clear();
}

// The answer of a request, or `fallback` when the server is down or refused.
async function ask(method, params, fallback) {
  if (!connection) return fallback;
  try {
    const result = await connection.request(method, params);
    return result === null || result === undefined ? fallback : result;
  } catch (e) {
    return fallback;
  }
}

function toSymbol(s) {
  const sym = new vscode.DocumentSymbol(s.name, s.detail || '', s.kind - 1, fromRange(s.range), fromRange(s.selectionRange));
  sym.children = (s.children || []).map(toSymbol);
  return sym;
}

function activate(context) {
  diagnostics = vscode.languages.createDiagnosticCollection('orch');
  output = vscode.window.createOutputChannel ? vscode.window.createOutputChannel('orch-lsp') : null;
  const subs = context.subscriptions;
  subs.push(diagnostics);
  start();
  subs.push(vscode.workspace.onDidOpenTextDocument(open));
  subs.push(vscode.workspace.onDidChangeTextDocument((e) => {
    if (!connection || !isOrch(e.document) || e.contentChanges.length === 0) return;
    connection.notify('textDocument/didChange', {
      textDocument: { uri: e.document.uri.toString(), version: e.document.version },
      contentChanges: e.contentChanges.map((c) => ({ range: toRange(c.range), text: c.text })),
    });
  }));
  subs.push(vscode.workspace.onDidSaveTextDocument((doc) => {
    if (connection && isOrch(doc)) connection.notify('textDocument/didSave', { textDocument: { uri: doc.uri.toString() } });
  }));
  subs.push(vscode.workspace.onDidCloseTextDocument((doc) => {
    if (connection && isOrch(doc)) connection.notify('textDocument/didClose', { textDocument: { uri: doc.uri.toString() } });
  }));
  subs.push(vscode.languages.registerHoverProvider(selector, {
    async provideHover(doc, pos) {
      const h = await ask('textDocument/hover', at(doc, pos), null);
      if (!h) return null;
      return new vscode.Hover(new vscode.MarkdownString(h.contents.value), h.range ? fromRange(h.range) : undefined);
    },
  }));
  subs.push(vscode.languages.registerDefinitionProvider(selector, {
    async provideDefinition(doc, pos) {
      return (await ask('textDocument/definition', at(doc, pos), [])).map(fromLocation);
    },
  }));
  subs.push(vscode.languages.registerReferenceProvider(selector, {
    async provideReferences(doc, pos, context) {
      const params = at(doc, pos);
      params.context = { includeDeclaration: !!(context && context.includeDeclaration) };
      return (await ask('textDocument/references', params, [])).map(fromLocation);
    },
  }));
  subs.push(vscode.languages.registerDocumentSymbolProvider(selector, {
    async provideDocumentSymbols(doc) {
      return (await ask('textDocument/documentSymbol', { textDocument: { uri: doc.uri.toString() } }, [])).map(toSymbol);
    },
  }));
  subs.push(vscode.languages.registerCompletionItemProvider(selector, {
    async provideCompletionItems(doc, pos) {
      return (await ask('textDocument/completion', at(doc, pos), [])).map((c) => {
        const item = new vscode.CompletionItem(c.label, (c.kind || 1) - 1);
        item.detail = c.detail;
        return item;
      });
    },
  }, '>', ':'));
  subs.push(vscode.commands.registerCommand('orch.restartServer', async () => {
    await stop();
    start();
  }));
  subs.push(vscode.workspace.onDidChangeConfiguration(async (e) => {
    if (e.affectsConfiguration('orch')) {
      await stop();
      start();
    }
  }));
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate };
