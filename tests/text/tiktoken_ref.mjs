// SPDX-License-Identifier: Apache-2.0
// The reference side of tests/text/tiktoken.sh: OpenAI's tokenizer as the
// npm `tiktoken` package builds it (WASM of the Rust core), never dpp's code.
// node tiktoken_ref.mjs NODE_MODULES OUT_DIR SEED writes, for cl100k_base and
// o200k_base, OUT_DIR/NAME.tiktoken (the package's ranks as a tiktoken rank
// file: "BASE64 RANK" lines) and OUT_DIR/NAME.expected (the ids of each
// document of OUT_DIR/corpus.bin, one line each), and the corpus: seeded
// documents of corpus.mjs. The reference encodes what a UTF-8 decoder
// (WHATWG, replacement) makes of the bytes.
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { makeDocs, writeCorpus } from "./corpus.mjs";
import { writeRankFile } from "./tiktoken_ranks.mjs";

const [modules, out, seedArg] = process.argv.slice(2);
const require = createRequire(join(modules, "noop.js"));
const { Tiktoken } = require("tiktoken/lite");

const docs = makeDocs(BigInt(seedArg || "1"), { specials: true });
writeCorpus(docs, join(out, "corpus.bin"));

// ignoreBOM: a leading U+FEFF is text, as dpp reads it (the default decoder drops it)
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
for (const name of ["cl100k_base", "o200k_base"]) {
  const spec = require(`tiktoken/encoders/${name}.json`);
  writeRankFile(spec.bpe_ranks, join(out, `${name}.tiktoken`));
  const enc = new Tiktoken(spec.bpe_ranks, spec.special_tokens, spec.pat_str);
  const expected = docs.map((doc) => Array.from(enc.encode_ordinary(decoder.decode(doc))).join(" "));
  writeFileSync(join(out, `${name}.expected`), expected.join("\n") + "\n");
  enc.free();
}
