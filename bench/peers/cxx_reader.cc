// SPDX-License-Identifier: Apache-2.0
// cxx_reader: the C++ peer of bench/peers.sh. Reads a dpp-gen TFRecord table
// the way a careful hand-written C++ trainer input would, in one thread:
// large read()s, both CRC32Cs verified with SSE4.2, protobuf's generated
// tensorflow::Example parsed on a reused arena, features looked up by name,
// the transforms of examples/criteo.json, columnar batches of 4096 rows.
// Prints the totals line dpp-refsum prints for the same table and spec, then
// its rate and CPU time.
#include <fcntl.h>
#include <nmmintrin.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <google/protobuf/arena.h>

#include "example.pb.h"

namespace
{

// examples/criteo.json, hard-coded: the peer is a fixed program for one spec,
// as a trainer's own input code is. bench/peers.sh checks the totals against
// dpp-refsum, which parses the spec file, so a drift shows up as a mismatch.
constexpr int kDense = 13, kSparse = 26;
constexpr int64_t kModulo = 100000;        // {"op": "modulo", "n": 100000}
constexpr size_t kMaxLen = 5;              // {"op": "truncate", "max_len": 5}
constexpr size_t kBatch = 4096;            // "batch_size"
constexpr uint64_t kMaxRecord = 64u << 20; // refuse absurd lengths before buffering
constexpr size_t kReadSize = 1u << 20;     // bytes per read(): a streaming reader's chunk

[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cxx_reader: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

// CRC32C with the SSE4.2 crc32 instruction, 8 bytes a step, one stream.
// Libraries (abseil's, google/crc32c) interleave three streams on long
// buffers; at ~800-byte records the CRC is ~1% of this reader's time (perf),
// so the plain loop does not move the figure.
__attribute__((target("sse4.2"))) uint32_t crc32c(const uint8_t *p, size_t n)
{
    uint64_t c = 0xffffffffu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n > 0; p++, n--)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}

// TFRecord's mask (tensorflow/core/lib/io/record_writer.h).
uint32_t masked_crc(const uint8_t *p, size_t n)
{
    uint32_t crc = crc32c(p, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8); // x86: little-endian already
    return v;
}

uint32_t load_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

bool is_dir(const std::string &path)
{
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The table's data files as dpp-refsum and the master list them: regular
// files not starting with '.' or '_' and not ending in ".idx" in every
// key=value folder (or in DIR itself when it has none), sorted by path.
std::vector<std::string> list_table(const std::string &dir)
{
    std::vector<std::string> parts, files;
    DIR *d = opendir(dir.c_str());
    if (d == nullptr)
        die("%s: %s", dir.c_str(), strerror(errno));
    while (struct dirent *e = readdir(d)) {
        const char *eq = strchr(e->d_name, '=');
        if (e->d_name[0] == '.' || e->d_name[0] == '_' || eq == nullptr || eq == e->d_name)
            continue;
        if (is_dir(dir + "/" + e->d_name))
            parts.push_back(dir + "/" + e->d_name);
    }
    closedir(d);
    if (parts.empty())
        parts.push_back(dir);
    for (const std::string &part : parts) {
        DIR *p = opendir(part.c_str());
        if (p == nullptr)
            die("%s: %s", part.c_str(), strerror(errno));
        while (struct dirent *e = readdir(p)) {
            std::string name = e->d_name;
            if (name[0] == '.' || name[0] == '_' ||
                (name.size() >= 4 && name.compare(name.size() - 4, 4, ".idx") == 0))
                continue;
            std::string path = part + "/" + name;
            struct stat st;
            if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
                files.push_back(path);
        }
        closedir(p);
    }
    std::sort(files.begin(), files.end());
    return files;
}

// One columnar batch, as a trainer's step takes it: dense [rows][13] floats,
// per sparse feature the ids one row after another and a length per row
// (KeyedJaggedTensor-like), the label.
struct Batch {
    size_t rows = 0;
    float dense[kBatch * kDense];
    float label[kBatch];
    int64_t values[kSparse][kBatch * kMaxLen];
    size_t nvalues[kSparse];
    int32_t lengths[kSparse][kBatch];
};

// The totals dpp-refsum prints (tests/integration/refsum.c), summed in its
// order so that even dense_sum comes out bit for bit the same.
struct Totals {
    int64_t rows = 0, batches = 0, skipped = 0;
    double label_sum = 0, dense_sum = 0;
    int64_t sparse_lengths_sum = 0;
    uint64_t sparse_ids_sum = 0, sparse_ids_wsum = 0; // int64 wrapping, as dpp sums them
};

// The consumer: reads every value of the batch once, so nothing before it
// can be optimised away, and empties it.
void consume(Batch &b, Totals &t)
{
    if (b.rows == 0)
        return;
    t.batches++;
    t.rows += (int64_t)b.rows;
    for (size_t r = 0; r < b.rows; r++) {
        t.label_sum += (double)b.label[r];
        for (int k = 0; k < kDense; k++)
            t.dense_sum += (double)b.dense[r * kDense + k];
    }
    for (int i = 0; i < kSparse; i++) {
        uint64_t sum = 0;
        for (size_t k = 0; k < b.nvalues[i]; k++)
            sum += (uint64_t)b.values[i][k];
        int64_t lengths = 0;
        for (size_t r = 0; r < b.rows; r++)
            lengths += b.lengths[i][r];
        t.sparse_lengths_sum += lengths;
        t.sparse_ids_sum += sum;
        t.sparse_ids_wsum += (uint64_t)(i + 1) * sum;
        b.nvalues[i] = 0;
    }
    b.rows = 0;
}

// clamp(min 0), log1p, clamp(0, 20) as docs/spec.md defines them (after
// add_record's fill_missing): log1p in double, rounded to float; NaN passes
// the clamps unchanged.
inline float dense_chain(float x)
{
    if (x < 0.0f)
        x = 0.0f;
    x = (float)log1p((double)x);
    if (x < 0.0f)
        x = 0.0f;
    if (x > 20.0f)
        x = 20.0f;
    return x;
}

struct Names {
    std::string label = "label";
    std::string dense[kDense], sparse[kSparse];
    Names()
    {
        for (int i = 0; i < kDense; i++)
            dense[i] = "i" + std::to_string(i + 1);
        for (int i = 0; i < kSparse; i++)
            sparse[i] = "c" + std::to_string(i + 1);
    }
};

// Adds one parsed record to the batch (consuming the batch when it fills).
// A record without a label or with a dense feature that is not exactly one
// value is skipped, as dpp and dpp-refsum skip it; an absent dense feature
// is 0 (the spec's fill_missing), an absent sparse feature an empty list.
// `at` names the record in an error message.
struct Where {
    const char *path;
    uint64_t off;
};

void add_record(const tensorflow::Example &ex, const Names &names, Where at, Batch &b, Totals &t)
{
    const auto &fmap = ex.features().feature();
    auto it = fmap.find(names.label);
    float label;
    if (it == fmap.end()) {
        t.skipped++;
        return;
    }
    if (it->second.has_int64_list()) {
        const auto &v = it->second.int64_list().value();
        if (v.empty()) {
            t.skipped++;
            return;
        }
        if (v.size() != 1)
            die("%s: record at offset %" PRIu64 ": label has %d values", at.path, at.off, v.size());
        label = (float)v[0];
    } else if (it->second.has_float_list()) {
        const auto &v = it->second.float_list().value();
        if (v.empty()) {
            t.skipped++;
            return;
        }
        if (v.size() != 1)
            die("%s: record at offset %" PRIu64 ": label has %d values", at.path, at.off, v.size());
        label = v[0];
    } else {
        die("%s: record at offset %" PRIu64 ": label is neither int64 nor float", at.path, at.off);
    }

    size_t r = b.rows;
    float *dense = &b.dense[r * kDense];
    for (int i = 0; i < kDense; i++) {
        it = fmap.find(names.dense[i]);
        float x;
        if (it == fmap.end())
            x = 0.0f; // {"op": "fill_missing", "value": 0}
        else if (it->second.has_float_list() && it->second.float_list().value_size() == 1)
            x = it->second.float_list().value(0);
        else if (it->second.has_int64_list() && it->second.int64_list().value_size() == 1)
            x = (float)it->second.int64_list().value(0);
        else if (it->second.has_float_list() || it->second.has_int64_list()) {
            t.skipped++; // the wrong number of values
            return;
        } else
            die("%s: record at offset %" PRIu64 ": dense feature %s is neither a float nor an "
                "int64 list",
                at.path, at.off, names.dense[i].c_str());
        dense[i] = dense_chain(x);
    }

    // Nothing above wrote past the row's own slots; from here the row is kept.
    b.label[r] = label;
    for (int i = 0; i < kSparse; i++) {
        it = fmap.find(names.sparse[i]);
        size_t len = 0;
        if (it != fmap.end()) {
            if (!it->second.has_int64_list())
                die("%s: record at offset %" PRIu64 ": sparse feature %s is not an int64 list",
                    at.path, at.off, names.sparse[i].c_str());
            const auto &v = it->second.int64_list().value();
            // modulo then truncate to the first kMaxLen: the ids past the cut
            // are never seen, so only the kept ones are reduced.
            len = std::min((size_t)v.size(), kMaxLen);
            int64_t *out = &b.values[i][b.nvalues[i]];
            for (size_t k = 0; k < len; k++) {
                int64_t m = v[(int)k] % kModulo;
                out[k] = m < 0 ? m + kModulo : m;
            }
        }
        b.nvalues[i] += len;
        b.lengths[i][r] = (int32_t)len;
    }
    if (++b.rows == kBatch)
        consume(b, t);
}

// A file read in large read()s into one buffer; a record that straddles the
// buffer's end is moved to its front before the next read.
struct FileBuffer {
    std::vector<uint8_t> buf;
    size_t lo = 0, hi = 0;
    int fd = -1;
    bool eof = false;

    // Makes at least `want` bytes available from lo, or fewer at end of file.
    size_t fill(size_t want, const char *path)
    {
        if (hi - lo >= want || eof)
            return hi - lo;
        memmove(buf.data(), buf.data() + lo, hi - lo);
        hi -= lo;
        lo = 0;
        if (want > buf.size()) // a record larger than the buffer
            buf.resize(want + kReadSize);
        while (hi < want && !eof) {
            ssize_t n = read(fd, buf.data() + hi, buf.size() - hi);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                die("%s: %s", path, strerror(errno));
            }
            if (n == 0)
                eof = true;
            hi += (size_t)n;
        }
        return hi - lo;
    }
};

double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double tv_s(const struct timeval &tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void usage()
{
    fputs("usage: cxx_reader --table DIR [--no-arena]\n"
          "Reads every TFRecord file of DIR (dpp-gen's layout) through the transforms of\n"
          "examples/criteo.json in one thread and prints dpp-refsum's totals line for it,\n"
          "then rows/s and CPU seconds. --no-arena parses into one reused heap Example\n"
          "instead of a reused arena.\n",
          stderr);
    exit(2);
}

} // namespace

int main(int argc, char **argv)
{
    GOOGLE_PROTOBUF_VERIFY_VERSION;
    std::string table;
    bool use_arena = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--table") == 0 && i + 1 < argc)
            table = argv[++i];
        else if (strcmp(argv[i], "--no-arena") == 0)
            use_arena = false;
        else
            usage();
    }
    if (table.empty())
        usage();

    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_s(CLOCK_MONOTONIC);

    std::vector<std::string> files = list_table(table);
    if (files.empty())
        die("no data files under %s", table.c_str());
    Names names;
    static Batch batch; // ~5 MB: not on the stack
    Totals totals;
    uint64_t bytes = 0;

    // The arena's first block is ours and survives Reset(), so after the
    // first record a parse allocates nothing from the heap (a record's
    // Example, 40 map nodes, keys and lists take ~7 KB here).
    alignas(16) static char arena_block[256 << 10];
    google::protobuf::ArenaOptions opts;
    opts.initial_block = arena_block;
    opts.initial_block_size = sizeof arena_block;
    google::protobuf::Arena arena(opts);
    tensorflow::Example heap_example;

    FileBuffer fb;
    fb.buf.resize(kReadSize);
    for (const std::string &path : files) {
        fb.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fb.fd < 0)
            die("%s: %s", path.c_str(), strerror(errno));
        fb.lo = fb.hi = 0;
        fb.eof = false;
        uint64_t off = 0;
        for (;;) {
            size_t have = fb.fill(12, path.c_str());
            if (have == 0)
                break; // a clean end of file
            Where at{path.c_str(), off};
            if (have < 12)
                die("%s: truncated record at offset %" PRIu64, at.path, at.off);
            const uint8_t *h = fb.buf.data() + fb.lo;
            if (masked_crc(h, 8) != load_le32(h + 8))
                die("%s: corrupted record at offset %" PRIu64 " (length CRC)", at.path, at.off);
            uint64_t len = load_le64(h);
            if (len > kMaxRecord)
                die("%s: record at offset %" PRIu64 ": length %" PRIu64 " over the limit", at.path,
                    at.off, len);
            size_t frame = 12 + (size_t)len + 4;
            if (fb.fill(frame, path.c_str()) < frame)
                die("%s: truncated record at offset %" PRIu64, at.path, at.off);
            const uint8_t *payload = fb.buf.data() + fb.lo + 12;
            if (masked_crc(payload, (size_t)len) != load_le32(payload + len))
                die("%s: corrupted record at offset %" PRIu64 " (payload CRC)", at.path, at.off);
            if (use_arena) {
                auto *ex = google::protobuf::Arena::CreateMessage<tensorflow::Example>(&arena);
                if (!ex->ParseFromArray(payload, (int)len))
                    die("%s: record at offset %" PRIu64 ": not a tf.Example", at.path, at.off);
                add_record(*ex, names, at, batch, totals);
                arena.Reset();
            } else {
                if (!heap_example.ParseFromArray(payload, (int)len))
                    die("%s: record at offset %" PRIu64 ": not a tf.Example", at.path, at.off);
                add_record(heap_example, names, at, batch, totals);
            }
            fb.lo += frame;
            off += frame;
        }
        close(fb.fd);
        bytes += off;
    }
    consume(batch, totals); // remainder "keep": the last, smaller batch

    double secs = now_s(CLOCK_MONOTONIC) - t0;
    getrusage(RUSAGE_SELF, &ru1);
    double user = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
    double sys = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);

    printf("{\"epoch\":0,\"rows\":%" PRId64 ",\"batches\":%" PRId64
           ",\"label_sum\":%.17g,\"dense_sum\":%.17g,\"sparse_lengths_sum\":%" PRId64
           ",\"sparse_ids_sum\":%" PRId64 ",\"sparse_ids_wsum\":%" PRId64 "}\n",
           totals.rows, totals.batches, totals.label_sum, totals.dense_sum,
           totals.sparse_lengths_sum, (int64_t)totals.sparse_ids_sum,
           (int64_t)totals.sparse_ids_wsum);
    if (totals.skipped)
        fprintf(stderr, "cxx_reader: %" PRId64 " records skipped\n", totals.skipped);
    printf("cxx_reader: %" PRId64 " rows, %zu files, %.1f MB, %s, in %.3f s: %.0f rows/s; "
           "CPU %.3f s (user %.3f + sys %.3f): %.0f rows per CPU-s\n",
           totals.rows, files.size(), (double)bytes / 1e6, use_arena ? "arena" : "reused Example",
           secs, (double)totals.rows / secs, user + sys, user, sys,
           (double)totals.rows / (user + sys));
    google::protobuf::ShutdownProtobufLibrary();
    return 0;
}
