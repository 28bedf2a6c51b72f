#!/usr/bin/env node
// Test oracle for the C++ Qwen3 tokenizer. Builds a deterministic corpus of at
// least --min-bytes of UTF-8 (the committed samples in --corpus-dir, expanded
// by a seeded generator), encodes and decodes it with the independent JS
// implementation @lenml/tokenizers, renders the chat cases with the real Jinja
// template via @huggingface/jinja, and writes the expectations to --out:
//   corpus.jsonl  {"kind", "text", "ids", "decoded", ["plain_ids"], ["nfc"]}
//   decode.jsonl  {"ids", "text", "text_skip_special"}
//   chat.jsonl    {"name", "messages", "add_generation_prompt", "enable_thinking", "text", "ids"}
//   summary.json  {"documents", "bytes", "seed", "tokenizer_dir"}
// Fails (exit 1) with a clear message if the oracle packages or files are missing.
"use strict";
const fs = require("fs");
const path = require("path");

function parse_args(argv) {
  const args = { seed: 20240229, "min-bytes": 1200000 };
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const key of ["tokenizer-dir", "js-dir", "corpus-dir", "chat-cases", "out"]) {
    if (!args[key]) throw new Error(`missing --${key}`);
  }
  args.seed = Number(args.seed);
  args["min-bytes"] = Number(args["min-bytes"]);
  return args;
}

function require_from(js_dir, name) {
  const where = path.join(js_dir, "node_modules", name);
  if (!fs.existsSync(where)) {
    throw new Error(`${name} is not installed in ${js_dir}/node_modules (run scripts/setup-deps.sh)`);
  }
  return require(where);
}

function read_json(file) {
  if (!fs.existsSync(file)) throw new Error(`${file} is missing (run scripts/setup-deps.sh)`);
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

// mulberry32: small, seedable, identical on every platform.
function make_rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // inclusive
    pick: (list) => list[Math.floor(next() * list.length)],
  };
}

// Code point ranges for random text. All are assigned with the same category in
// Unicode 14 (PCRE2 10.42), 15 (ICU 72) and the newer tables of node's V8, so the
// three engines classify them alike (see docs/tokenizer.md, "oracle differences").
const RANGES = [
  [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0xa0, 0xff], [0x100, 0x17e], [0x180, 0x24f],
  [0x250, 0x2af], [0x300, 0x36f], [0x391, 0x3a1], [0x3a3, 0x3ce], [0x400, 0x4ff],
  [0x531, 0x556], [0x561, 0x587], [0x5d0, 0x5ea], [0x620, 0x64a], [0x660, 0x669],
  [0x905, 0x939], [0x93e, 0x94d], [0x966, 0x96f], [0xe01, 0xe3a], [0xe40, 0xe5b],
  [0x10d0, 0x10fa], [0x1100, 0x1112], [0x1161, 0x1175], [0x11a8, 0x11c2], [0x1e00, 0x1eff],
  [0x2010, 0x2027], [0x2030, 0x205e], [0x20a0, 0x20bf], [0x2100, 0x214f], [0x2190, 0x21ff],
  [0x2200, 0x22ff], [0x2460, 0x24ff], [0x2500, 0x257f], [0x3001, 0x303f], [0x3041, 0x3096],
  [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xff01, 0xff5e],
  [0xff61, 0xff9f], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6c5], [0x1f900, 0x1f9ff],
  [0x1d400, 0x1d454], [0x20000, 0x2a6d6],
];
// White_Space except U+0085 and U+FEFF handling differs in JS (documented).
const SPACES = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\u00a0", "\u1680", "\u2000", "\u2003",
                "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "  ", "\r\n", "\n\n"];
const JOINERS = ["\u200d", "\ufe0f", "\ufe0e", "\u200b", "\u200c", "\u20e3", "\u{1f3fb}", "\u{1f3ff}"];

function random_code_point_text(rng, length) {
  let s = "";
  for (let i = 0; i < length; ++i) {
    const r = rng.next();
    if (r < 0.12) s += rng.pick(SPACES);
    else if (r < 0.16) s += rng.pick(JOINERS);
    else {
      const [lo, hi] = rng.pick(RANGES);
      s += String.fromCodePoint(rng.int(lo, hi));
    }
  }
  return s;
}

const CONTRACTIONS = ["s", "t", "re", "ve", "m", "ll", "d"];
function random_case(rng, s) {
  return Array.from(s, (c) => (rng.next() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join("");
}

function contraction_text(rng, words) {
  const parts = [];
  const n = rng.int(3, 25);
  for (let i = 0; i < n; ++i) {
    let w = random_case(rng, rng.pick(words));
    const r = rng.next();
    if (r < 0.5) w += "'" + random_case(rng, rng.pick(CONTRACTIONS));
    else if (r < 0.6) w = "'" + random_case(rng, rng.pick(CONTRACTIONS)) + w;
    else if (r < 0.7) w += "''" + rng.pick(CONTRACTIONS).toUpperCase();
    else if (r < 0.75) w += "'" + rng.pick(["x", "ss", "lld", "reve", "S'T"]);
    parts.push(w);
  }
  return parts.join(rng.pick([" ", " ", "\n", "", "  ", "\t", "-", ", "]));
}

function code_points(s) { return Array.from(s); }

function fragment(rng, line) {
  const cps = code_points(line);
  if (cps.length < 4) return line;
  const a = rng.int(0, cps.length - 1);
  const b = rng.int(a + 1, Math.min(cps.length, a + 1 + rng.int(1, 80)));
  return cps.slice(a, b).join("");
}

function long_document(rng, kind, special_tokens) {
  switch (kind % 8) {
    case 0: return Array.from({ length: rng.int(2000, 6000) }, () => rng.pick("abcdefghijklmnopqrstuvwxyz")).join("");
    case 1: return Array.from({ length: rng.int(2000, 8000) }, () => String(rng.int(0, 9))).join("");
    case 2: return " ".repeat(rng.int(1000, 5000)) + "x" + "\n".repeat(rng.int(100, 900)) + "y";
    case 3: return "\u{1f600}\u200d".repeat(rng.int(300, 900)) + "\u{1f1fa}\u{1f1f8}".repeat(rng.int(100, 300));
    case 4: return "a".repeat(rng.int(3000, 9000));
    case 5: return "\u4e2d\u6587".repeat(rng.int(500, 1500));
    case 6: return Array.from({ length: rng.int(200, 600) }, () => rng.pick(special_tokens) + rng.pick(["", " ", "x", "\n"])).join("");
    default: return (" \t\r\n".repeat(rng.int(200, 800))) + "end";
  }
}

function build_corpus(args, special_tokens) {
  const rng = make_rng(args.seed);
  const files = fs.readdirSync(args["corpus-dir"]).filter((f) => f.endsWith(".txt")).sort();
  if (files.length === 0) throw new Error(`no *.txt samples in ${args["corpus-dir"]}`);
  const docs = [];
  const lines = [];
  const words = [];
  for (const f of files) {
    const text = fs.readFileSync(path.join(args["corpus-dir"], f), "utf8");
    docs.push({ kind: `file:${f}`, text });
    for (const line of text.split("\n")) {
      if (line.length === 0) continue;
      lines.push(line);
      docs.push({ kind: `line:${f}`, text: line });
      for (const w of line.split(/[^\p{L}]+/u)) if (w.length > 1 && w.length < 12) words.push(w);
    }
  }
  const separators = ["", " ", "  ", "\n", "\n\n", "\r\n", "\t", " \n ", "\n   ", "... ", ", ", "123", " 4567 "];
  let long_count = 0;
  let bytes = docs.reduce((n, d) => n + Buffer.byteLength(d.text), 0);
  while (bytes < args["min-bytes"]) {
    const r = rng.next();
    let doc;
    if (r < 0.40) {
      const n = rng.int(1, 12);
      const parts = [];
      for (let i = 0; i < n; ++i) {
        const line = rng.pick(lines);
        parts.push(rng.next() < 0.5 ? line : fragment(rng, line));
        const s = rng.next();
        if (s < 0.08) parts.push(rng.pick(special_tokens));
        else parts.push(rng.pick(separators));
      }
      doc = { kind: "mix", text: parts.join("") };
    } else if (r < 0.60) {
      doc = { kind: "unicode", text: random_code_point_text(rng, rng.int(1, 300)) };
    } else if (r < 0.72) {
      doc = { kind: "contractions", text: contraction_text(rng, words) };
    } else if (r < 0.82) {
      const line = rng.pick(lines);
      doc = { kind: "nfd", text: line.normalize(rng.next() < 0.7 ? "NFD" : "NFKD") };
    } else if (r < 0.92) {
      // Whitespace and digit soup around short words.
      const parts = [];
      const n = rng.int(2, 40);
      for (let i = 0; i < n; ++i) {
        const q = rng.next();
        if (q < 0.4) parts.push(Array.from({ length: rng.int(1, 6) }, () => rng.pick(SPACES)).join(""));
        else if (q < 0.7) parts.push(String(rng.int(0, 10 ** rng.int(1, 9))));
        else parts.push(rng.pick(words));
      }
      doc = { kind: "whitespace", text: parts.join("") };
    } else if (r < 0.93 && long_count < 24) {
      doc = { kind: "long", text: long_document(rng, long_count++, special_tokens) };
    } else {
      // A multi-line document of whole sample lines.
      const n = rng.int(2, 30);
      doc = { kind: "lines", text: Array.from({ length: n }, () => rng.pick(lines)).join(rng.pick(["\n", "\n\n", "\r\n"])) };
    }
    // 'ſ after an apostrophe is a contraction to Oniguruma/PCRE2 (Unicode case
    // folding) but not to the JS oracle's rewritten regex: keep it out.
    doc.text = doc.text.replace(/'\u017f/g, "'s");
    docs.push(doc);
    bytes += Buffer.byteLength(doc.text);
  }
  return { docs, bytes };
}

function main() {
  const args = parse_args(process.argv);
  const { TokenizerLoader } = require_from(args["js-dir"], "@lenml/tokenizers");
  const { Template } = require_from(args["js-dir"], "@huggingface/jinja");
  const tokenizer_json = read_json(path.join(args["tokenizer-dir"], "tokenizer.json"));
  const tokenizer_config = read_json(path.join(args["tokenizer-dir"], "tokenizer_config.json"));
  const chat_cases = read_json(args["chat-cases"]);
  fs.mkdirSync(args.out, { recursive: true });

  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokenizer_json, tokenizerConfig: tokenizer_config });
  // parse_special=false: special added tokens are plain text, the others still match.
  const plain_tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: { ...tokenizer_json, added_tokens: tokenizer_json.added_tokens.filter((t) => !t.special) },
    tokenizerConfig: { ...tokenizer_config, additional_special_tokens: [] },
  });
  const encode = (t, text) => (text.length === 0 ? [] : t.encode(text, { add_special_tokens: false }));
  const special_tokens = tokenizer_json.added_tokens.map((t) => t.content);
  const has_special_text = (text) => special_tokens.some((s) => text.includes(s));

  const { docs, bytes } = build_corpus(args, special_tokens);
  const out = [];
  for (const doc of docs) {
    const ids = encode(tok, doc.text);
    const rec = { kind: doc.kind, text: doc.text, ids, decoded: ids.length ? tok.decode(ids) : "" };
    const nfc = doc.text.normalize("NFC");
    if (nfc !== doc.text) rec.nfc = nfc;
    if (has_special_text(doc.text)) rec.plain_ids = encode(plain_tok, doc.text);
    out.push(JSON.stringify(rec));
  }
  fs.writeFileSync(path.join(args.out, "corpus.jsonl"), out.join("\n") + "\n");

  // Random id sequences, including lone bytes of multi-byte characters and special tokens.
  const rng = make_rng(args.seed ^ 0x5eed);
  const byte_ids = [];
  const vocab = tokenizer_json.model.vocab;
  const bytes_to_unicode = (() => {
    const bs = [];
    for (let b = 0x21; b <= 0x7e; ++b) bs.push(b);
    for (let b = 0xa1; b <= 0xac; ++b) bs.push(b);
    for (let b = 0xae; b <= 0xff; ++b) bs.push(b);
    const map = new Map(bs.map((b) => [b, String.fromCodePoint(b)]));
    let n = 0;
    for (let b = 0; b < 256; ++b) if (!map.has(b)) map.set(b, String.fromCodePoint(256 + n++));
    return map;
  })();
  for (let b = 0x80; b < 0x100; ++b) byte_ids.push(vocab[bytes_to_unicode.get(b)]);
  const added_ids = tokenizer_json.added_tokens.map((t) => t.id);
  const vocab_count = Object.keys(vocab).length;
  const decode_out = [];
  for (let i = 0; i < 400; ++i) {
    const n = rng.int(1, 40);
    const ids = [];
    for (let k = 0; k < n; ++k) {
      const r = rng.next();
      if (r < 0.45) ids.push(rng.pick(byte_ids));
      else if (r < 0.6) ids.push(rng.pick(added_ids));
      else ids.push(rng.int(0, vocab_count - 1));
    }
    decode_out.push(JSON.stringify({
      ids, text: tok.decode(ids), text_skip_special: tok.decode(ids, { skip_special_tokens: true }),
    }));
  }
  fs.writeFileSync(path.join(args.out, "decode.jsonl"), decode_out.join("\n") + "\n");

  if (typeof tokenizer_config.chat_template !== "string") {
    throw new Error("tokenizer_config.json has no chat_template string");
  }
  const template = new Template(tokenizer_config.chat_template);
  const chat_out = [];
  for (const c of chat_cases) {
    for (const add_generation_prompt of [true, false]) {
      for (const enable_thinking of [true, false]) {
        const text = template.render({ messages: c.messages, add_generation_prompt, enable_thinking });
        chat_out.push(JSON.stringify({
          name: c.name, messages: c.messages, add_generation_prompt, enable_thinking, text, ids: encode(tok, text),
        }));
      }
    }
  }
  fs.writeFileSync(path.join(args.out, "chat.jsonl"), chat_out.join("\n") + "\n");
  fs.writeFileSync(path.join(args.out, "summary.json"),
                   JSON.stringify({ documents: docs.length, bytes, seed: args.seed, tokenizer_dir: path.resolve(args["tokenizer-dir"]) }) + "\n");
  console.log(`oracle: ${docs.length} documents, ${bytes} bytes, ${decode_out.length} decode cases, ` +
              `${chat_out.length} chat renders -> ${args.out}`);
}

try {
  main();
} catch (err) {
  console.error(`make_oracle.js: ${err.message}`);
  process.exit(1);
}
