"""Conversations about kernel topics, built from the documentation's own question-and-answer
structure: each section title becomes a user question and the prose of the section the
assistant's answer (literal blocks, directives and tables left out, so the answers are prose).

    sections(text)          -> [(title, body)] of an .rst document
    questions_and_answers() -> [(question, answer)] ready for the chat template
"""
import hashlib
import re

_ADORNMENT = re.compile(r"^([=\-~^\"'`*+#.:_])\1{2,}\s*$")
_DIRECTIVE = re.compile(r"^\s*\.\. ")
_TABLE = re.compile(r"^\s*[+|=][-=+| ]*$|^\s*\+[-=+]+\+|^\s*\|.*\|\s*$")  # borders, grid-table rows
# Section titles that say nothing without the document's title.
_GENERIC = {"introduction", "overview", "description", "usage", "background", "summary", "motivation",
            "examples", "example", "details", "notes", "note", "design", "implementation", "api",
            "interface", "limitations", "references", "purpose", "requirements", "configuration",
            "abstract", "theory of operation", "how it works", "basics", "concepts", "definitions"}
_SKIP = {"contents", "table of contents", "see also", "references", "authors", "author", "credits",
         "acknowledgements", "acknowledgments", "license", "copyright", "changelog", "todo", "index"}
MAX_ANSWER_CHARS = 900
MIN_ANSWER_CHARS = 80
TURNS_PER_CONVERSATION = 3
GENERIC_SYSTEM_PROMPT = "You are a helpful assistant who answers questions about the Linux kernel in plain English."


def sections(text):
    """[(title, body_lines)] of an .rst document; a title is a line underlined (and maybe
    overlined) with a repeated punctuation character at least as long as the title."""
    lines = text.splitlines()
    titles = []  # (index of the title line, first body line)
    i = 0
    while i + 1 < len(lines):
        t, u = lines[i].rstrip(), lines[i + 1].rstrip()
        if t and not t[0].isspace() and not _ADORNMENT.match(t) and _ADORNMENT.match(u) and len(u) >= len(t.strip()):
            titles.append((i, i + 2))
            i += 2
            continue
        i += 1
    out = []
    for k, (ti, body0) in enumerate(titles):
        end = titles[k + 1][0] if k + 1 < len(titles) else len(lines)
        if end > 0 and k + 1 < len(titles) and _ADORNMENT.match(lines[end - 1].rstrip() or "x"):
            end -= 1  # the next title's overline
        out.append((lines[ti].strip(), lines[body0:end]))
    return out


def _inline(s):
    """RST inline markup as a reader writes it: ``x`` -> `x`, :ref:`text <target>` -> text."""
    s = re.sub(r":[a-z:]+:`([^`<]*?)\s*<[^`>]*>`", r"\1", s)
    s = re.sub(r":[a-z:]+:`([^`]*)`", r"`\1`", s)
    s = s.replace("``", "`")
    s = re.sub(r"`([^`]+?)`_+", r"\1", s)
    return s


def prose(body_lines):
    """The paragraphs of a section body that are prose: no literal blocks (the indented block
    after a paragraph ending in '::'), no directives and their bodies, no tables, no code."""
    paras, cur, skip_indented = [], [], False
    for raw in body_lines + [""]:
        line = raw.rstrip()
        if skip_indented:
            if not line or line[0].isspace():
                continue
            skip_indented = False
        if _DIRECTIVE.match(line):
            skip_indented = True
            if cur:
                paras.append(cur)
                cur = []
            if paras and paras[-1][-1].endswith(":"):
                paras.pop()  # it introduced the block left out
            continue
        if not line:
            if cur:
                paras.append(cur)
                cur = []
            continue
        if _TABLE.match(line) or _ADORNMENT.match(line):
            continue
        cur.append(line)
        if line.endswith("::"):
            cur = []  # a paragraph that introduces a literal block goes with it
            skip_indented = True
    out = []
    for p in paras:
        text = " ".join(l.strip() for l in p)
        if p[0][:1].isspace() and not re.match(r"^\s*[-*] ", p[0]):
            continue  # an indented block: a quote or code that escaped the '::' rule
        if sum(text.count(c) for c in "{};=") > 3:
            continue  # code, not prose
        if re.match(r"^[-*] ", p[0].strip()):
            text = "\n".join("- " + l.strip()[2:] if re.match(r"^[-*] ", l.strip()) else "  " + l.strip() for l in p)
        out.append(_inline(text))
    return out


def answer_of(body_lines):
    """The first paragraphs of the prose, up to MAX_ANSWER_CHARS, ending at a paragraph."""
    parts, size = [], 0
    for p in prose(body_lines):
        if re.match(r"^A:\s*", p) and not parts:
            p = re.sub(r"^A:\s*", "", p)
        if parts and size + len(p) > MAX_ANSWER_CHARS:
            break
        parts.append(p)
        size += len(p) + 2
    text = "\n\n".join(parts).strip()
    return text if len(text) >= MIN_ANSWER_CHARS and len(text) <= 2 * MAX_ANSWER_CHARS else ""


def _pick(key, options):
    return options[int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % len(options)]


def question_of(title, doc_title, key):
    """A user question from a section title: a title that is a question stays one; a generic
    title ('Introduction') is asked about the document's subject."""
    t = re.sub(r"^Q:\s*", "", _inline(title)).strip().rstrip(".:")
    if t.endswith("?"):
        return t
    if t.lower() in _GENERIC and doc_title and doc_title != title:
        subject = _inline(doc_title).strip().rstrip(".:")
        return _pick(key, [f"Tell me about {subject}: {t.lower()}.", f"{subject}: what about the {t.lower()}?",
                           f"Explain {subject} ({t.lower()})."])
    return _pick(key, [f"What is {t}?", f"Tell me about {t}.", f"Explain {t}.", f"What should I know about {t}?",
                       f"Can you describe {t}?"])


def questions_and_answers(path, text):
    """[(question, answer)] of one document, in document order."""
    secs = sections(text)
    doc_title = secs[0][0] if secs else ""
    out = []
    for title, body in secs:
        t = re.sub(r"^Q:\s*", "", title).strip().lower().rstrip(":")
        if t in _SKIP or len(title) > 150:
            continue
        a = answer_of(body)
        if a:
            out.append((question_of(title, doc_title, path + "#" + title), a))
    return out


def render_conversations(path, text):
    """The chat texts of one document (Qwen3 chat template, thinking off: every assistant turn
    opens with the empty think block, as the daemon's chat computes it): up to
    TURNS_PER_CONVERSATION sections a conversation; half of them with a generic system prompt,
    half with none."""
    qa = questions_and_answers(path, text)
    out = []
    for c in range(0, len(qa), TURNS_PER_CONVERSATION):
        key = f"{path}#{c}"
        s = ""
        if _pick(key, [True, False]):
            s += "<|im_start|>system\n" + GENERIC_SYSTEM_PROMPT + "<|im_end|>\n"
        for q, a in qa[c:c + TURNS_PER_CONVERSATION]:
            s += "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" + a + "<|im_end|>\n"
        out.append(s)
    return out
