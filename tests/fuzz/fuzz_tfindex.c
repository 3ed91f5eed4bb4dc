// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the index sidecar parser dpp_tfindex_parse()
// (src/format/tfindex.c), fed the text of a .idx file, which sits beside the
// data and is not trusted. An accepted index is contiguous from 0 and parses
// again in canonical form with its end as the file size; a refused one leaves
// the result empty and says which line is wrong.
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/tfindex.h"
#include "format/tfrecord.h"
#include "dpp/error.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    dpp_tfindex_t idx;
    char err[128];
    int rc = dpp_tfindex_parse(text, size, UINT64_MAX, &idx, err, sizeof err);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "err not NUL-terminated");

    /* The message is optional; a short buffer only truncates it. */
    char tiny[6];
    dpp_tfindex_t idx2;
    int rc2 = dpp_tfindex_parse(text, size, UINT64_MAX, &idx2, tiny, sizeof tiny);
    FUZZ_CHECK(rc2 == rc && memchr(tiny, '\0', sizeof tiny) != NULL, "rc %d then %d", rc, rc2);
    dpp_tfindex_close(&idx2);
    rc2 = dpp_tfindex_parse(text, size, UINT64_MAX, &idx2, NULL, 0);
    FUZZ_CHECK(rc2 == rc, "rc %d, without err %d", rc, rc2);
    dpp_tfindex_close(&idx2);

    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_EINVAL || rc == -ENOMEM, "rc %d", rc);
        FUZZ_CHECK(rc != DPP_EINVAL || strncmp(err, "line ", 5) == 0, "message: %s", err);
        FUZZ_CHECK(idx.n == 0 && idx.offsets == NULL && idx.sizes == NULL, "refused, not empty");
        return 0;
    }

    uint64_t end = 0;
    for (size_t i = 0; i < idx.n; i++) {
        FUZZ_CHECK(idx.offsets[i] == end && idx.sizes[i] >= DPP_TFRECORD_OVERHEAD &&
                       idx.sizes[i] <= UINT64_MAX - end,
                   "record %zu at %" PRIu64 "+%" PRIu64 ", previous end %" PRIu64, i,
                   idx.offsets[i], idx.sizes[i], end);
        end += idx.sizes[i];
    }

    /* Canonical text: same records; the end is the only file size accepted. */
    size_t cap = idx.n * 44 + 1, used = 0;
    char *canon = malloc(cap);
    FUZZ_CHECK(canon != NULL, "out of memory");
    canon[0] = '\0';
    for (size_t i = 0; i < idx.n; i++)
        used += (size_t)snprintf(canon + used, cap - used, "%" PRIu64 " %" PRIu64 "\n",
                                 idx.offsets[i], idx.sizes[i]);
    rc = dpp_tfindex_parse(canon, used, end, &idx2, err, sizeof err);
    FUZZ_CHECK(rc == 0 && idx2.n == idx.n, "canonical form refused: %s", err);
    for (size_t i = 0; i < idx.n; i++)
        FUZZ_CHECK(idx2.offsets[i] == idx.offsets[i] && idx2.sizes[i] == idx.sizes[i],
                   "canonical form: record %zu differs", i);
    dpp_tfindex_close(&idx2);
    if (end < UINT64_MAX - 1) {
        rc = dpp_tfindex_parse(canon, used, end + 1, &idx2, err, sizeof err);
        FUZZ_CHECK(rc == DPP_EINVAL && idx2.n == 0,
                   "records end at %" PRIu64 " in a file of %" PRIu64, end, end + 1);
    }
    rc = dpp_tfindex_parse(text, size, end, &idx2, err, sizeof err);
    FUZZ_CHECK(rc == 0 && idx2.n == idx.n, "refused with its own end as file size: %s", err);
    dpp_tfindex_close(&idx2);
    free(canon);
    dpp_tfindex_close(&idx);
    return 0;
}
