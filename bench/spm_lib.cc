// SPDX-License-Identifier: Apache-2.0
// libsentencepiece linked directly (C++, Debian libsentencepiece-dev): what
// a worker linking the library would pay, for bench/sentencepiece.sh.
// Usage: spm_lib MODEL CORPUS SECONDS; CORPUS is uint32 LE length + bytes
// per document. Prints MB/s and tokens/s on one thread (median of rounds).
#include <sentencepiece_processor.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: spm_lib MODEL CORPUS SECONDS\n");
        return 2;
    }
    sentencepiece::SentencePieceProcessor sp;
    auto st = sp.Load(argv[1]);
    if (!st.ok()) {
        std::fprintf(stderr, "spm_lib: %s: %s\n", argv[1], st.ToString().c_str());
        return 1;
    }
    std::ifstream in(argv[2], std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> docs;
    for (size_t at = 0; at + 4 <= data.size();) {
        uint32_t n = (uint8_t)data[at] | (uint8_t)data[at + 1] << 8 | (uint8_t)data[at + 2] << 16 |
                     (uint32_t)(uint8_t)data[at + 3] << 24;
        docs.emplace_back(data.substr(at + 4, n));
        at += 4 + n;
    }
    size_t bytes = 0;
    for (auto &d : docs)
        bytes += d.size();
    double secs = std::atof(argv[3]);
    std::vector<double> times;
    std::vector<int> ids;
    size_t tokens = 0;
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
    while (times.size() < 3 || std::chrono::steady_clock::now() < until) {
        auto t0 = std::chrono::steady_clock::now();
        tokens = 0;
        for (auto &d : docs) {
            sp.Encode(d, &ids);
            tokens += ids.size();
        }
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    double med = times[times.size() / 2];
    std::printf("libsentencepiece (C++, linked): %.2f MB/s, %.3f M tokens/s on one core (median of "
                "%zu rounds; %zu documents, %zu bytes, %zu tokens)\n",
                bytes / med / 1e6, tokens / med / 1e6, times.size(), docs.size(), bytes, tokens);
    return 0;
}
