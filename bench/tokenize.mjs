// SPDX-License-Identifier: Apache-2.0
// The peer of bench_tokenize (bench/tokenize.sh): npm tiktoken (WASM of
// OpenAI's Rust core) on one thread. node tokenize.mjs NODE_MODULES ENCODING
// OUT_DIR [SECONDS] writes OUT_DIR/corpus.bin (seeded mixed text: English
// words with punctuation and digits, some accents, CJK and emoji, about
// 8 MB) and OUT_DIR/ENCODING.tiktoken (the package's ranks), then times
// encode_ordinary over the corpus and prints the median round.
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { writeRankFile } from "../tests/text/tiktoken_ranks.mjs";

const [modules, name, out, secondsArg] = process.argv.slice(2);
const require = createRequire(join(modules, "noop.js"));
const { Tiktoken } = require("tiktoken/lite");
const spec = require(`tiktoken/encoders/${name}.json`);

let state = 12345n;
function rand(n) {
  state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return Number((state >> 33n) % BigInt(n));
}
const common = ["the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was",
  "with", "be", "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which",
  "but", "have", "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her",
  "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "training",
  "preprocessing", "tokenizer", "dataset", "throughput", "GPU", "model", "don't", "it's"];
const rare = ["naïve", "café", "Zürich", "日本語の文章", "中文", "😀", "👍🏽", "Привет", "2026",
  "3.14159", "(see §4.2)", "e.g.,", "—", "“quoted”"];
const docs = [];
let total = 0;
while (total < 8e6) {
  const words = [];
  const n = 50 + rand(2000);
  for (let i = 0; i < n; i++) {
    const k = rand(100);
    let w = k < 92 ? common[rand(common.length)] : rare[rand(rare.length)];
    if (rand(12) === 0) w = w[0].toUpperCase() + w.slice(1);
    words.push(w + (rand(15) === 0 ? "." : rand(20) === 0 ? "," : ""));
    if (rand(80) === 0) words.push("\n\n");
  }
  const doc = Buffer.from(words.join(" "));
  docs.push(doc);
  total += doc.length;
}
const parts = [];
for (const d of docs) {
  const len = Buffer.alloc(4);
  len.writeUInt32LE(d.length);
  parts.push(len, d);
}
writeFileSync(join(out, "corpus.bin"), Buffer.concat(parts));
writeRankFile(spec.bpe_ranks, join(out, `${name}.tiktoken`));

const enc = new Tiktoken(spec.bpe_ranks, spec.special_tokens, spec.pat_str);
const texts = docs.map((d) => d.toString("utf-8"));
const times = [];
let tokens = 0;
const end = Date.now() + 1000 * Number(secondsArg || 3);
while (times.length < 3 || Date.now() < end) {
  const t0 = process.hrtime.bigint();
  tokens = 0;
  for (const t of texts) tokens += enc.encode_ordinary(t).length;
  times.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
times.sort((a, b) => a - b);
const med = times[Math.floor(times.length / 2)];
console.log(`tiktoken (npm ${JSON.parse(readFileSync(join(modules, "tiktoken", "package.json"))).version}, WASM): ` +
  `${(total / med / 1e6).toFixed(2)} MB/s, ${(tokens / med / 1e6).toFixed(3)} M tokens/s on one ` +
  `thread (median of ${times.length} rounds; ${docs.length} documents, ${total} bytes, ${tokens} tokens)`);
enc.free();
