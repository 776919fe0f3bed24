"""A small scripted LSP client over stdio, for orch-lsp's session test and latency benchmark.

Starts the server, frames JSON-RPC messages with Content-Length headers, and reads what the
server sends on a thread, so a test can wait for a reply or a notification with a timeout.
Only the standard library: CI needs nothing from PyPI for it.
"""
import json
import pathlib
import queue
import subprocess
import threading
import time


def uri(path):
    return pathlib.Path(path).resolve().as_uri()


class Client:
    def __init__(self, server, args=(), env=None):
        self.proc = subprocess.Popen([server, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.inbox = queue.Queue()
        self.seen = []  # every message received, in order
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = out.read(length)
            self.inbox.put((time.perf_counter(), json.loads(body)))

    def write_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        body = json.dumps(message).encode()
        self.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return time.perf_counter()

    def notify(self, method, params):
        return self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait(self, predicate, timeout=20.0):
        """The first message, received from now on or already queued, for which predicate holds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching message from the server")
            item = self.inbox.get(timeout=left)
            if item is None:
                raise EOFError("the server closed its output (exit code %s)" % self.proc.wait())
            received, message = item
            self.seen.append(message)
            if predicate(message):
                message["_received"] = received
                return message

    def request(self, method, params, timeout=20.0):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def diagnostics(self, doc_uri, version=None, timeout=20.0):
        """The next publishDiagnostics for doc_uri (of that version, when given)."""
        def match(m):
            if m.get("method") != "textDocument/publishDiagnostics" or m["params"]["uri"] != doc_uri:
                return False
            return version is None or m["params"].get("version") == version
        return self.wait(match, timeout)

    def initialize(self, capabilities=None, options=None):
        reply = self.request("initialize", {"processId": None, "rootUri": None,
                                            "capabilities": capabilities or {},
                                            "initializationOptions": options or {}})
        self.notify("initialized", {})
        return reply

    def open(self, doc_uri, text, version=1):
        self.notify("textDocument/didOpen", {"textDocument": {"uri": doc_uri, "languageId": "orch",
                                                               "version": version, "text": text}})

    def change(self, doc_uri, version, changes):
        return self.notify("textDocument/didChange", {"textDocument": {"uri": doc_uri, "version": version},
                                                      "contentChanges": changes})

    def close(self, timeout=10.0):
        """shutdown, exit, and the server's exit code."""
        self.request("shutdown", None)
        self.notify("exit", None)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.proc.stdin.close()
