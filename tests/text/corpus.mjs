// SPDX-License-Identifier: Apache-2.0
// The seeded corpus of the tokenizer checks (tiktoken_ref.mjs, hf_ref.mjs):
// 401 documents mixing ASCII, accents, CJK, Cyrillic, Arabic, emoji with
// modifiers and joiners, digits, whitespace runs, contractions, long runs of
// one letter or space, characters whose whitespace class regex engines
// disagree on (U+180E, U+0085, U+001C, U+200B ...), and bytes that are not
// UTF-8; the last is empty. makeDocs(seed, { specials }): without specials,
// no special token's name appears (a Hugging Face tokenizer would match it).

import { writeFileSync } from "node:fs";

let state = 1n;
function rand(n) { // splitmix64, the draw mod n
  state = (state + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  z ^= z >> 31n;
  return Number(z % BigInt(n));
}

const allWords = ["the", "quick", "Brown", "FOX", "don't", "I'LL", "we've", "She's", "naïve",
  "café", "Ærøskøbing", "straße", "Ōsaka", "日本語", "中文字符", "한국어", "Привет", "мир",
  "مرحبا", "שלום", "👍", "👍🏽", "👨‍👩‍👧", "🚀🚀", "x²", "½", "12345678901", "3.14159",
  "2026-12-02", "1,000,000", " ", "   ", "\t", "\n", "\n\n", "\r\n", "  \n ", "!!!", "...",
  "--", "#include", "<|endoftext|>", "$$", "’", "“quoted”", "a", "A", "e\u0301", "ﬁ",
  "\u00a0", "\u3000", "\u180e", "\u0085", "\u001c", "\u000b", "\u2028", "\u200b", "\ufeff", "😀😃", "🇫🇷", "https://example.com/a?b=c", "snake_case", "CamelCase"];
const invalid = [[0xff], [0x80], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xc0, 0xaf],
  [0xf4, 0x90, 0x80, 0x80], [0xf0, 0x9f, 0x98], [0xfe, 0xfe]];

function codepoint() { // a random character of a few ranges
  const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x4e00, 0x4fff],
    [0x3040, 0x30ff], [0x1f300, 0x1f64f], [0x600, 0x6ff], [0x900, 0x97f]];
  const [lo, hi] = ranges[rand(ranges.length)];
  return String.fromCodePoint(lo + rand(hi - lo + 1));
}

export function makeDocs(seed, { specials }) {
  state = seed;
  const words = specials ? allWords : allWords.filter((w) => !w.startsWith("<|"));
  const docs = [];
  for (let d = 0; d < 400; d++) {
    const parts = [];
    const n = 1 + rand(d % 10 === 0 ? 400 : 40);
    for (let i = 0; i < n; i++) {
      const k = rand(100);
      if (k < 60) parts.push(Buffer.from(words[rand(words.length)] + (rand(3) ? " " : "")));
      else if (k < 80) parts.push(Buffer.from(codepoint()));
      else if (k < 88) parts.push(Buffer.from(String(rand(1e9))));
      else if (k < 93) parts.push(Buffer.from(invalid[rand(invalid.length)]));
      else if (k < 96) parts.push(Buffer.from(" ".repeat(1 + rand(300))));
      else if (k < 98) parts.push(Buffer.from("z".repeat(1 + rand(600))));
      else parts.push(Buffer.from("\n".repeat(1 + rand(5)) + "\t".repeat(rand(4))));
    }
    docs.push(Buffer.concat(parts));
  }
  docs.push(Buffer.alloc(0)); // an empty document: no ids
  return docs;
}

// The documents as tokenize_ids reads them: a uint32 LE length, the bytes.
export function writeCorpus(docs, path) {
  const parts = [];
  for (const doc of docs) {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(doc.length);
    parts.push(len, doc);
  }
  writeFileSync(path, Buffer.concat(parts));
}
