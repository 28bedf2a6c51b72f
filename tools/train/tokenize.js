#!/usr/bin/env node
// The corpus tokenizer when no build of qwen3-bpf is at hand: reads {"text": ...} lines on stdin
// and writes one {"ids": [...]} line each, as `qwen3-bpf tokenize --model DIR --jsonl` does
// (special tokens such as <|im_start|> recognised). It uses @lenml/tokenizers, the independent
// implementation the tokenizer's oracle test (tests/tokenizer) checks the C++ tokenizer against.
//   node tools/train/tokenize.js TOKENIZER_DIR JS_DIR < in.jsonl > out.jsonl
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");

const [tokenizer_dir, js_dir] = process.argv.slice(2);
if (!tokenizer_dir || !js_dir) {
  console.error("usage: tokenize.js TOKENIZER_DIR JS_DIR < in.jsonl");
  process.exit(2);
}
const { TokenizerLoader } = require(path.resolve(js_dir, "node_modules", "@lenml/tokenizers"));
const read = (f) => JSON.parse(fs.readFileSync(path.join(tokenizer_dir, f), "utf8"));
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"), tokenizerConfig: read("tokenizer_config.json") });
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on("line", (line) => {
  const text = JSON.parse(line).text;
  out.push(JSON.stringify({ ids: text.length === 0 ? [] : tok.encode(text, { add_special_tokens: false }) }));
  if (out.length >= 64) process.stdout.write(out.splice(0).join("\n") + "\n");
});
rl.on("close", () => { if (out.length) process.stdout.write(out.join("\n") + "\n"); });
