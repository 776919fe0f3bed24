// A JSON-RPC connection to orch-lsp over its stdin and stdout, with LSP's Content-Length
// framing. Plain Node (no npm packages, no VS Code API), so the extension installs with nothing
// but itself and this file is tested on its own (test/extension_test.js).
'use strict';

const childProcess = require('child_process');

class Connection {
  // onNotification(method, params), onExit(code, signal), onError(error): all optional.
  constructor(command, args, handlers = {}) {
    this.handlers = handlers;
    this.nextId = 1;
    this.pending = new Map();
    this.buffer = Buffer.alloc(0);
    this.closed = false;
    this.proc = childProcess.spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (chunk) => this.receive(chunk));
    this.proc.stderr.on('data', (chunk) => handlers.onLog && handlers.onLog(chunk.toString()));
    this.proc.on('error', (err) => {
      this.closed = true;
      this.failAll(err);
      if (handlers.onError) handlers.onError(err);
    });
    this.proc.on('exit', (code, signal) => {
      this.closed = true;
      this.failAll(new Error(`orch-lsp exited (${signal || code})`));
      if (handlers.onExit) handlers.onExit(code, signal);
    });
    this.proc.stdin.on('error', () => {});  // a server that died: reported through 'exit'
  }

  failAll(err) {
    for (const { reject } of this.pending.values()) reject(err);
    this.pending.clear();
  }

  write(message) {
    if (this.closed) return;
    const body = Buffer.from(JSON.stringify(message), 'utf8');
    this.proc.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
    this.proc.stdin.write(body);
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('orch-lsp is not running'));
      this.pending.set(id, { resolve, reject });
      this.write({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method, params) {
    this.write({ jsonrpc: '2.0', method, params });
  }

  receive(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const header = this.buffer.slice(0, end).toString('ascii');
      const match = /content-length:\s*(\d+)/i.exec(header);
      if (!match) {  // not LSP: drop the header
        this.buffer = this.buffer.slice(end + 4);
        continue;
      }
      const length = Number(match[1]);
      if (this.buffer.length < end + 4 + length) return;
      const body = this.buffer.slice(end + 4, end + 4 + length).toString('utf8');
      this.buffer = this.buffer.slice(end + 4 + length);
      let message;
      try {
        message = JSON.parse(body);
      } catch (e) {
        continue;
      }
      this.dispatch(message);
    }
  }

  dispatch(message) {
    if (message.id !== undefined && message.method === undefined) {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.error) waiter.reject(new Error(message.error.message));
      else waiter.resolve(message.result);
    } else if (message.method && this.handlers.onNotification) {
      this.handlers.onNotification(message.method, message.params);
    }
  }

  // shutdown, then exit; resolves once the process has ended (or after `timeoutMs`).
  stop(timeoutMs = 2000) {
    return new Promise((resolve) => {
      if (this.closed) return resolve();
      const timer = setTimeout(() => {
        this.proc.kill();
        resolve();
      }, timeoutMs);
      this.proc.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.request('shutdown', null).then(() => this.notify('exit', null), () => this.proc.kill());
    });
  }
}

module.exports = { Connection };
