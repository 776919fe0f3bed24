#!/usr/bin/env python3
"""The TextMate grammar (syntaxes/orch.tmLanguage.json) on the project's pipelines (ctest:
orch_textmate_grammar).

  grammar_test.py SOURCE_DIR

A small TextMate tokenizer (match, begin/end, captures, contentName, includes; the grammar uses
only regex features Python's `re` shares with Oniguruma) scopes every line of examples/,
examples/errors/, pipelines/, test/every_construct.orch and the orch code blocks of docs/language.md and docs/diagnostics.md. An independent
lexer that follows grammar/Orch.g4's token rules then says what each token is, and the test
checks that the scope there is the one expected: keywords (every keyword of Orch.g4, taken from
the .g4 itself, must be seen), the words that are keywords only in some places (`out` as a
buffer's name is a name), declared names, kernel parameters, launches, types, built-ins,
numbers, strings, comments, operators, and the CUDA of `source` blocks embedded as CUDA.
Exits non-zero on the first mismatch; prints a count per class.
"""
import collections
import json
import pathlib
import re
import sys

ROOT = "source.orch"


class Grammar:
    def __init__(self, path):
        self.g = json.loads(pathlib.Path(path).read_text())
        self.cache = {}

    def patterns(self, rule_patterns):
        """Flattened patterns, includes resolved (#name, $self); other grammars are absent here."""
        out = []
        for p in rule_patterns:
            inc = p.get("include")
            if inc is None:
                out.append(p)
            elif inc == "$self":
                out.extend(self.patterns(self.g["patterns"]))
            elif inc.startswith("#"):
                rule = self.g["repository"][inc[1:]]
                out.extend(self.patterns(rule["patterns"]) if "patterns" in rule and not ("match" in rule or "begin" in rule)
                           else [rule])
            # source.cuda-cpp and other grammars: VS Code's, not loaded in this test.
        return out

    def regex(self, text):
        if text not in self.cache:
            self.cache[text] = re.compile(text)
        return self.cache[text]


def tokenize(grammar, text):
    """Per line, per character: the list of scopes."""
    root = grammar.patterns(grammar.g["patterns"])
    stack = []  # (rule, scopes inside it)
    out = []
    for line in text.split("\n"):
        scopes = [[ROOT] for _ in line]
        pos = 0
        while pos <= len(line):
            if stack:
                rule, inner = stack[-1]
                candidates = [("end", rule, grammar.regex(rule["end"]))]
                candidates += [("pat", p, grammar.regex(p.get("match") or p["begin"]))
                               for p in grammar.patterns(rule.get("patterns", []))]
            else:
                inner = [ROOT]
                candidates = [("pat", p, grammar.regex(p.get("match") or p["begin"])) for p in root]
            best = None
            for kind, rule, rx in candidates:
                m = rx.search(line, pos)
                if m and (best is None or m.start() < best[2].start()):
                    best = (kind, rule, m)
            if best is None:
                for i in range(pos, len(line)):
                    scopes[i] = list(inner)
                break
            kind, rule, m = best
            for i in range(pos, m.start()):
                scopes[i] = list(inner)

            def paint(base, name, caps):
                whole = base + ([name] if name else [])
                for i in range(m.start(), m.end()):
                    scopes[i] = list(whole)
                for group, cap in (caps or {}).items():
                    g = int(group)
                    if g <= (m.re.groups) and m.start(g) >= 0:
                        for i in range(m.start(g), m.end(g)):
                            scopes[i] = whole + [cap["name"]]

            if kind == "end":
                _, inner_scopes = stack.pop()
                outer = inner_scopes[:-1] if rule.get("contentName") else inner_scopes
                paint(outer, None, rule.get("endCaptures") or rule.get("captures"))
                if rule.get("name"):
                    pass  # the name is already in outer
                stack_top_inner = stack[-1][1] if stack else [ROOT]
                for i in range(m.start(), m.end()):
                    if rule.get("name") and rule["name"] not in scopes[i]:
                        scopes[i] = stack_top_inner + [rule["name"]] + scopes[i][len(stack_top_inner):]
            elif "match" in rule:
                paint(inner, rule.get("name"), rule.get("captures"))
            else:
                base = inner + ([rule["name"]] if rule.get("name") else [])
                paint(base[:len(inner)], rule.get("name"), rule.get("beginCaptures") or rule.get("captures"))
                content = base + ([rule["contentName"]] if rule.get("contentName") else [])
                stack.append((rule, content))
            if m.end() == pos and kind != "end" and "begin" not in rule:
                pos += 1  # an empty match: step on
            else:
                pos = max(m.end(), pos + (1 if m.end() == m.start() and kind == "end" else 0))
        out.append(scopes)
    return out


# ---- an independent lexer, after grammar/Orch.g4 --------------------------------------------------

def g4_keywords(g4):
    """Orch.g4's keyword tokens, in two groups: before IN (always keywords) and from IN on
    (words that stay usable as names)."""
    hard, soft, seen_in = [], [], False
    for name, literal in re.findall(r"^([A-Z_]+)\s*:\s*'([a-z_]+)'\s*;", g4, re.M):
        if name == "IN":
            seen_in = True
        (soft if seen_in else hard).append(literal)
    return hard, soft


OPS = ["<<<", ">>>", "->", "+=", "-=", "*=", "/=", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
       "<", ">", "=", "+", "-", "*", "/", "%", "!", "~", "&", "^", "|"]
TOKEN = re.compile(r'''(?P<block>/\*.*?\*/)|(?P<line>//[^\n]*)|(?P<triple>""".*?""")|(?P<string>"(?:[^"\\\n]|\\.)*")|'''
                   r"(?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)|"
                   r"(?P<int>0[xX][0-9a-fA-F]+|\d+)|(?P<id>[A-Za-z_]\w*)|(?P<op>" +
                   "|".join(re.escape(o) for o in OPS) + r")|(?P<ws>\s+)|(?P<other>.)", re.S)


def lex(text):
    tokens = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if kind != "ws":
            tokens.append((kind, m.group(), m.start()))
    return tokens


TYPES = {"u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "bool"}
DECL = {"pipeline", "param", "buffer", "comm", "kernel", "graph"}


def expected(tokens, i, hard, soft):
    """(class, predicate on the scopes at the token's first character)."""
    kind, text, _ = tokens[i]
    prev = tokens[i - 1][1] if i > 0 else ""
    prev2 = tokens[i - 2][1] if i > 1 else ""
    nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
    def has(prefix):
        return lambda s: any(x.startswith(prefix) for x in s)
    keywordish = lambda s: any(x.startswith(("keyword.", "storage.modifier", "constant.language", "variable.language"))
                               for x in s)
    if kind in ("line", "block"):
        return "comment", has("comment.")
    if kind == "string":
        return "string", has("string.quoted.double")
    if kind in ("int", "float"):
        return "number", has("constant.numeric")
    if kind == "op":
        if text in ("<<<", ">>>"):
            return "launch operator", has("keyword.operator.launch")
        if text == "->":
            return "arrow", has("keyword.operator.arrow")
        return "operator", has("keyword.operator")
    if kind != "id":
        return None
    declaring = prev in DECL and not (prev == "kernel" and nxt == "{") and prev2 != ":" and nxt not in (")", ",", "[]")
    if prev == "graph" and (prev2 == ":" or nxt in (")", ",")):
        declaring = False
    if declaring:
        return "declared name", lambda s: any(x.startswith(("entity.name", "variable.other.declaration")) for x in s)
    if prev == "[" and nxt == ":" and prev2 not in ("",) and i >= 3 and tokens[i - 3][1] == "graph":
        return "family index", has("variable.parameter.family-index")
    if nxt == ":" and text not in TYPES:
        return "parameter name", has("variable.parameter")
    if nxt == "<<<":
        return "launched kernel", has("entity.name.function.call")
    if text in hard:
        return "keyword", keywordish
    if text in ("cond", "self", "rank", "world_size", "my_pe", "n_pes"):
        return "built-in name", has("variable.language")
    if text in soft:
        # Where the parser takes a name (an operand, an argument, a copy's ends), it is one.
        name_role = (prev in ("(", ",", "copy", "->", "fill", "call", "launch", "=", "<<<", "on") or
                     nxt in (",", ")", "->", "=", "+=", "-=", "*=", "/=", "<<<", "["))
        if name_role:
            return "soft keyword as a name", lambda s: not keywordish(s)
        return "soft keyword", keywordish
    if text in TYPES:  # element types, `flops[f64]`
        return "type", has("storage.type.scalar")
    if text in ("min", "max", "ceil_div", "dim3") and nxt == "(":
        return "built-in function", has("support.function.builtin")
    return "plain name", lambda s: s == [ROOT]


def sources(source_dir):
    for d in ("examples", "examples/errors", "pipelines"):
        for f in sorted((source_dir / d).glob("*.orch")):
            yield str(f.relative_to(source_dir)), f.read_text()
    here = pathlib.Path(__file__).resolve().parent / "test/every_construct.orch"
    yield "editors/vscode/test/every_construct.orch", here.read_text()
    # The orch code blocks of the language reference: every construct, keyword and operator.
    doc = (source_dir / "docs/language.md").read_text()
    for n, block in enumerate(re.findall(r"^```\n(.*?)^```", doc, re.M | re.S)):
        if re.search(r"\.orch:\d+|^\s*(orchc|orch-run|\$) ", block, re.M):
            continue  # compiler output or a shell session, not orch code
        if "<<<" in block or re.search(r"^\s*(pipeline|param|buffer|graph|kernel|while|if|switch|launch|copy|fill|"
                                       r"allreduce|broadcast|allgather|reduce_scatter|comm|target|call)\b", block, re.M):
            yield f"docs/language.md block {n + 1}", block
    # Every pipeline of docs/diagnostics.md (a failing and a fixed one per rule).
    doc = (source_dir / "docs/diagnostics.md").read_text()
    for n, block in enumerate(re.findall(r"^```\n(pipeline .*?)^```", doc, re.M | re.S)):
        yield f"docs/diagnostics.md pipeline {n + 1}", block


def main():
    source_dir = pathlib.Path(sys.argv[1])
    grammar = Grammar(pathlib.Path(__file__).resolve().parent / "syntaxes/orch.tmLanguage.json")
    hard, soft = g4_keywords((source_dir / "grammar/Orch.g4").read_text())
    assert "pipeline" in hard and "out" in soft, (hard, soft)
    counts = collections.Counter()
    keywords_seen = set()
    for name, text in sources(source_dir):
        scoped = tokenize(grammar, text)
        line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

        def scopes_at(offset):
            line = max(i for i, s in enumerate(line_starts) if s <= offset)
            col = offset - line_starts[line]
            return scoped[line][col] if col < len(scoped[line]) else [ROOT]

        tokens = lex(text)
        for i, (kind, text_, at) in enumerate(tokens):
            if kind == "triple":
                begin, end = scopes_at(at), scopes_at(at + len(text_) - 1)
                inner = [scopes_at(k) for k in range(at + 3, at + len(text_) - 3) if text[k] not in "\n"]
                ok = ("punctuation.definition.string.begin.orch" in begin and
                      "punctuation.definition.string.end.orch" in end and
                      all("meta.embedded.block.cuda" in s for s in inner))
                where = f"{name}: source block at offset {at}"
                if not ok:
                    print(f"FAIL: {where}: begin {begin}, end {end}")
                    return 1
                counts["embedded CUDA"] += 1
                continue
            e = expected(tokens, i, hard, soft)
            if e is None:
                continue
            cls, pred = e
            s = scopes_at(at)
            if not pred(s):
                line = text.count("\n", 0, at) + 1
                print(f"FAIL: {name}:{line}: `{text_}` should be a {cls}; scopes {s}")
                print("  line:", text.split("\n")[line - 1])
                return 1
            counts[cls] += 1
            if cls in ("keyword", "soft keyword", "built-in name"):
                keywords_seen.add(text_)
    missing = [k for k in hard + soft if k not in keywords_seen]
    if missing:
        print("FAIL: keywords of Orch.g4 never seen scoped as keywords:", missing)
        return 1
    for cls in ["comment", "string", "number", "operator", "launch operator", "arrow", "declared name",
                "family index", "parameter name", "launched kernel", "keyword", "soft keyword",
                "soft keyword as a name", "built-in name", "type", "built-in function", "plain name", "embedded CUDA"]:
        if counts[cls] == 0:
            print(f"FAIL: no {cls} in the corpus")
            return 1
    for cls, n in sorted(counts.items()):
        print(f"ok: {n:5d} {cls}")
    print(f"all {len(hard) + len(soft)} keywords of Orch.g4 scoped as keywords")
    return 0


if __name__ == "__main__":
    sys.exit(main())
