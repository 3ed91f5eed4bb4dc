// SPDX-License-Identifier: Apache-2.0
// The npm tiktoken package's ranks as a tiktoken rank file: its encoders'
// `bpe_ranks` are lines of "<marker> <first rank> <base64> <base64> ...",
// ranks consecutive from the first (../shared/REFERENCE.md); a rank file is
// one "BASE64 RANK" line per token. Shared by tests/text/tiktoken_ref.mjs and
// bench/tokenize.mjs.
import { writeFileSync } from "node:fs";

export function writeRankFile(bpeRanks, path) {
  const lines = [];
  for (const line of bpeRanks.split("\n")) {
    if (!line) continue;
    const [, first, ...tokens] = line.split(" ");
    tokens.forEach((t, i) => lines.push(`${t} ${Number(first) + i}`));
  }
  writeFileSync(path, lines.join("\n") + "\n");
}
