#!/usr/bin/env python3
"""Lists the functions over 120 lines and the files over 700 lines (the house's size limits).

    tools/dev/longfn.py [PATH ...] [--max-function N] [--max-file N] [--exclude PREFIX ...] [--check]

PATHs default to the repository's tracked files (git ls-files); third_party/ and
tests/verify/corpus/ (verifier inputs, not code) are skipped. C and C++ (.c .cc
.cpp .h .hpp) are read with a brace matcher over the source with comments and
string literals blanked: a function is a `{` block opened outside any other
function whose head ends in `)` (or `) const`, `override`, `noexcept`, a
trailing return type); its length counts from the head's first line to the
closing brace. Python functions come from the ast (decorators excluded). A
function's lambdas and local classes count in its length. With --check the exit
status is 1 when anything is listed.
"""
import argparse
import ast
import os
import re
import subprocess
import sys

C_EXT = (".c", ".cc", ".cpp", ".h", ".hpp")
PY_EXT = (".py",)
FILE_EXT = C_EXT + PY_EXT + (".sh", ".mjs", ".js", ".proto", ".cmake")
SKIP = ("third_party/", "tests/verify/corpus/", "build/")
NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "do", "else", "namespace", "class", "struct", "enum",
                 "union", "return", "sizeof", "alignof", "decltype", "static_assert", "extern"}


def blank_comments_and_strings(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i) if c == '"' or j - i < 8 else text[i:j])  # 1'000 digit separators stay
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def looks_like_function(head):
    head = re.sub(r"^\s*#.*$", "", head, flags=re.M).strip()  # preprocessor lines
    if "(" not in head:
        return False
    first = re.match(r"[A-Za-z_]\w*", head)
    if first and first.group(0) in NOT_FUNCTIONS:
        return False
    if re.match(r"^[^(]*=", head) and not re.search(r"\boperator\s*\S*=", head):
        return False  # a lambda or brace initialiser assigned to something
    tail = re.sub(r"(\s*(const|override|final|noexcept(\([^)]*\))?|mutable|&|&&|->\s*[\w:<>,\s*&]+))*$", "", head)
    return tail.endswith(")")


def c_functions(path, text):
    code = blank_comments_and_strings(text)
    found = []
    depth = 0
    fn_depth = None  # the depth at which the current function's body opened
    fn_start = 0
    fn_name = ""
    head_start = 0
    line_of = [0] * (len(code) + 1)
    line = 1
    for i, ch in enumerate(code):
        line_of[i] = line
        if ch == "\n":
            line += 1
    for i, ch in enumerate(code):
        if ch == "{":
            if fn_depth is None:
                head = code[head_start:i]
                if looks_like_function(head):
                    stripped = head.lstrip()
                    fn_start = line_of[head_start + (len(head) - len(stripped))]
                    m = re.search(r"([~\w:]+(?:operator\s*\S+)?)\s*\(", stripped)
                    fn_name = m.group(1) if m else stripped.split("\n")[0][:60]
                    fn_depth = depth
            depth += 1
            head_start = i + 1
        elif ch == "}":
            depth -= 1
            if fn_depth is not None and depth == fn_depth:
                found.append((fn_name, fn_start, line_of[i]))
                fn_depth = None
            head_start = i + 1
        elif ch == ";":
            head_start = i + 1
        elif ch == ":" and fn_depth is None and code[i - 1:i + 1] != "::" and code[i:i + 2] != "::":
            # `public:` / `case x:` labels end a head; a constructor's init list does not
            if re.search(r"\b(public|private|protected)\s*$", code[head_start:i]):
                head_start = i + 1
    return found


def py_functions(path, text):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []

    def visit(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and not inside:
                found.append((child.name, child.lineno, child.end_lineno))
                visit(child, True)
            else:
                visit(child, inside)

    visit(tree, False)
    return found


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [os.path.join(root, p) for p in out.split("\n") if p]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--max-function", type=int, default=120)
    ap.add_argument("--max-file", type=int, default=700)
    ap.add_argument("--exclude", action="append", default=[], metavar="PREFIX",
                    help="skip paths starting with PREFIX (relative to the repository), repeatable")
    ap.add_argument("--check", action="store_true", help="exit 1 when anything is over a limit")
    args = ap.parse_args()

    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip() or "."
    files = []
    if args.paths:
        for p in args.paths:
            if os.path.isdir(p):
                files += [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
            else:
                files.append(p)
    else:
        files = tracked_files(root)
    problems = 0
    for path in sorted(files):
        rel = os.path.relpath(path, root)
        if rel.startswith(SKIP) or any(rel.startswith(x) for x in args.exclude) or not rel.endswith(FILE_EXT):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > args.max_file:
            print(f"{rel}: file {lines} lines (> {args.max_file})")
            problems += 1
        fns = c_functions(path, text) if rel.endswith(C_EXT) else py_functions(path, text) if rel.endswith(PY_EXT) else []
        for name, start, end in fns:
            if end - start + 1 > args.max_function:
                print(f"{rel}:{start}: {name} {end - start + 1} lines (> {args.max_function})")
                problems += 1
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
