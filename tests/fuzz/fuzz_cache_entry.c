// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: what a worker reads back from its cache directory (a
// file another process wrote, a disk that may flip bits): the entry file
// check (src/worker/cache_store.c) and the split entry inside it
// (src/worker/split_cache.c). The first byte picks the block shape
// (fuzz_shapes.h) and batch size (1 to 4); the rest is an entry file. Both
// parsers run on their own bytes: the file's, and the same bytes taken as a
// payload. Checked: no crash; an accepted file's payload is its bytes after
// the header (all read), its key the header's, and one byte less is
// refused; the outcome does not depend on the error buffer; an accepted
// split entry's rows all lie in its blocks, and every record maps to a row
// before the entry's row count or to none.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_shapes.h"
#include "fuzz_util.h"
#include "worker/cache_store.h"
#include "worker/split_cache.h"

static void check_split(const uint8_t *p, size_t n, const dpp_block_shape_t *shape, uint32_t batch)
{
    /* the store hands payloads 8-byte aligned */
    uint8_t *copy = malloc(n ? n : 1);
    FUZZ_CHECK(copy != NULL, "out of memory");
    memcpy(copy, p, n);
    dpp_split_entry_t e;
    char err[256];
    if (dpp_split_entry_parse(copy, n, shape, batch, &e, err, sizeof err) == 0) {
        uint64_t rows = 0;
        for (size_t b = 0; b < e.nblocks; b++) {
            FUZZ_CHECK(e.block[b] >= copy && e.block[b] + e.block_len[b] <= copy + n,
                       "block %zu outside the entry", b);
            rows += e.block_rows[b];
        }
        FUZZ_CHECK(rows == e.summary.rows, "blocks hold %llu rows, the entry says %llu",
                   (unsigned long long)rows, (unsigned long long)e.summary.rows);
        for (uint64_t g = 0; g < e.ngathered; g++) {
            int64_t r = dpp_split_entry_row(&e, g);
            FUZZ_CHECK(r < (int64_t)rows, "record %llu maps to row %lld of %llu",
                       (unsigned long long)g, (long long)r, (unsigned long long)rows);
        }
        dpp_split_entry_close(&e);
    } else {
        FUZZ_CHECK(err[0] != '\0', "a refusal without a reason");
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const dpp_block_shape_t *shape = &dpp_fuzz_shapes[data[0] % DPP_FUZZ_NSHAPES];
    uint32_t batch = 1 + (data[0] >> 4) % 4;
    data++;
    size--;
    dpp_cache_key_t key;
    const uint8_t *payload;
    size_t plen;
    char err[256];
    err[0] = '\0';
    int rc = dpp_cache_entry_parse(data, size, &key, &payload, &plen, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == DPP_ECORRUPT, "error %d", rc);
    FUZZ_CHECK(dpp_cache_entry_parse(data, size, &key, &payload, &plen, NULL, 0) == rc,
               "the outcome depends on the error buffer");
    if (rc == 0) {
        FUZZ_CHECK(payload >= data && payload + plen == data + size, "payload outside the file");
        fuzz_touch(payload, plen);
        uint64_t hi, lo;
        memcpy(&hi, data + 8, 8);
        memcpy(&lo, data + 16, 8);
        FUZZ_CHECK(key.hi == hi && key.lo == lo, "the key is not the header's");
        FUZZ_CHECK(dpp_cache_entry_parse(data, size - 1, &key, &payload, &plen, NULL, 0) != 0,
                   "accepted one byte short");
        check_split(payload, plen, shape, batch);
    } else {
        FUZZ_CHECK(err[0] != '\0', "a refusal without a reason");
    }
    check_split(data, size, shape, batch);
    return 0;
}
