// SPDX-License-Identifier: Apache-2.0
// The reference side of tests/text/hf.sh: Hugging Face's tokenizers as the
// npm `@huggingface/tokenizers` package implements them (its own JS, never
// dpp's code). node hf_ref.mjs NODE_MODULES OUT_DIR SEED writes three
// tokenizer.json files of byte-level BPE models, OUT_DIR/NAME.json, the ids
// the package gives each document of OUT_DIR/corpus.bin (corpus.mjs, without
// special token names) as OUT_DIR/NAME.expected, one line each:
//  - gpt2: GPT-2's ranks (the npm tiktoken package's gpt2 encoder) as
//    vocab and merges, ByteLevel with its regex; gpt2_split the same with
//    that regex as a Split;
//  - split: cl100k_base's ranks, a Split on cl100k's pattern then ByteLevel
//    without its regex, ignore_merges (the Llama 3 layout);
//  - pairs: a small model whose merge lines do not follow the ids and whose
//    tokens can be made by several pairs (the merge rule by pair, not by
//    the merged token), add_prefix_space.
// The package's ByteLevel applies GPT-2's regex with JavaScript's \s
// (U+FEFF in, U+0085 out), where the Rust crate's Oniguruma has Unicode's
// White_Space (U+0085 in, U+FEFF out), as dpp does; a Split's pattern the
// package translates to Oniguruma's meaning. So the expected ids of a
// ByteLevel-with-regex file are computed from the same model with that
// regex as a Split (the two mean the same in the Rust crate).
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { makeDocs, writeCorpus } from "./corpus.mjs";

const [modules, out, seedArg] = process.argv.slice(2);
const require = createRequire(join(modules, "noop.js"));
const { Tokenizer } = await import(join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs"));

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
// others for U+0100 onwards in byte order.
const byteChar = [];
let next = 256;
for (let b = 0; b < 256; b++) {
  const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  byteChar[b] = String.fromCodePoint(printable ? b : next++);
}
const toChars = (bytes) => Array.from(bytes, (b) => byteChar[b]).join("");

// ranks (token bytes as base64 -> rank) from a tiktoken encoder: the vocab,
// and merges by the usual conversion: every split of a token into two
// tokens, ordered by the token's rank, then by the parts' ranks.
function fromRanks(bpeRanks) {
  const ranks = new Map();
  for (const line of bpeRanks.split("\n")) {
    if (!line) continue;
    const [, first, ...tokens] = line.split(" ");
    tokens.forEach((t, i) => ranks.set(Buffer.from(t, "base64").toString("latin1"), Number(first) + i));
  }
  const vocab = {};
  const merges = [];
  const sorted = [...ranks.entries()].sort((a, b) => a[1] - b[1]);
  for (const [tok, rank] of sorted) {
    vocab[toChars(Buffer.from(tok, "latin1"))] = rank;
    if (tok.length < 2) continue;
    const local = [];
    for (let i = 1; i < tok.length; i++) {
      const l = tok.slice(0, i), r = tok.slice(i);
      if (ranks.has(l) && ranks.has(r)) local.push([l, r]);
    }
    local.sort((a, b) => ranks.get(a[0]) - ranks.get(b[0]) || ranks.get(a[1]) - ranks.get(b[1]));
    for (const [l, r] of local)
      merges.push([toChars(Buffer.from(l, "latin1")), toChars(Buffer.from(r, "latin1"))]);
  }
  return { vocab, merges };
}

function tokenizerJson(model, preTokenizer, added) {
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added.map(([content, id]) => ({ id, content, single_word: false, lstrip: false,
      rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: preTokenizer,
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ...model },
  };
}

const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
// ByteLevel's regex as a Split, then ByteLevel without it
const asSplit = (addPrefixSpace) => ({ type: "Sequence", pretokenizers: [
  { type: "Split", pattern: { Regex: GPT2_PATTERN }, behavior: "Isolated", invert: false },
  { type: "ByteLevel", add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: false }] });

const files = {};
const refs = {}; // the file the reference encodes with, when not the same
const gpt2 = require("tiktoken/encoders/gpt2.json");
const gpt2Model = { ...fromRanks(gpt2.bpe_ranks), ignore_merges: false };
files.gpt2 = tokenizerJson(gpt2Model,
  { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  [["<|endoftext|>", 50256]]);
files.gpt2_split = tokenizerJson(gpt2Model, asSplit(false), [["<|endoftext|>", 50256]]);
refs.gpt2 = files.gpt2_split;
const cl = require("tiktoken/encoders/cl100k_base.json");
files.split = tokenizerJson({ ...fromRanks(cl.bpe_ranks), ignore_merges: true },
  { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: cl.pat_str }, behavior: "Isolated", invert: false },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
  [["<|endoftext|>", 100257]]);
{
  const vocab = {};
  for (let b = 0; b < 256; b++) vocab[byteChar[b]] = 255 - b; // ids not in byte order
  const extra = ["ab", "bc", "abc", "cd", "bcd", "abcd", "Ġa", "Ġab", "da", "aa", "aaa", "aaaa"];
  extra.forEach((t, i) => { vocab[t] = 256 + i; });
  // lines out of id order, and abc/abcd reachable by more than one pair
  const merges = ["b c", "a b", "c d", "a bc", "bc d", "ab cd", "a bcd", "d a", "Ġ a", "Ġa b",
    "a a", "aa aa", "a aa", "aa a"].map((m) => m.split(" "));
  files.pairs = tokenizerJson({ vocab, merges, ignore_merges: false },
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true }, []);
  // add_prefix_space on the one piece a lone ByteLevel starts from: a space
  // before the text (after a Split it would be one before every piece)
  refs.pairs = tokenizerJson({ vocab, merges, ignore_merges: false }, asSplit(false), []);
}

const docs = makeDocs(BigInt(seedArg || "1"), { specials: false });
// the pairs model sees its letters often, in runs whose merges differ by
// rule ("abcd": by pair abc + d, by merged token abcd)
const runs = ["abcd", "abc", "bcd", "aaaa", "aaa", "aaaaa", "dabcd", "cd", "a", "b", "abab"];
for (let i = 0; i < 100; i++) {
  let s = "";
  for (let j = 0; j < 3 + (i * 7) % 40; j++)
    s += runs[(i * 31 + j * 17 + (j * j) % 5) % runs.length] + ((i + j) % 3 ? " " : "");
  docs.push(Buffer.from(s));
}
writeCorpus(docs, join(out, "corpus.bin"));
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
for (const [name, json] of Object.entries(files)) {
  writeFileSync(join(out, `${name}.json`), JSON.stringify(json));
  const tok = new Tokenizer(refs[name] || json, {});
  const prefix = name === "pairs";
  const expected = docs.map((d) => {
    let text = decoder.decode(d);
    if (prefix && text.length > 0 && !text.startsWith(" ")) text = " " + text;
    return tok.encode(text, { add_special_tokens: false }).ids.join(" ");
  });
  writeFileSync(join(out, `${name}.expected`), expected.join("\n") + "\n");
}
