// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the ListObjectsV2 page and error response parsers
// (src/storage/s3_list.c), fed what an object store (or anything between it
// and the master) answers. A page is parsed twice into one listing: an
// accepted page adds its objects each time, a refused one adds nothing and
// says why; every key is a NUL-terminated string of at most 1024 bytes.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "storage/s3_list.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *xml = (const char *)data;
    dpp_s3_listing_t l = {0};
    char err[192];
    int rc = dpp_s3_list_parse(&l, xml, size, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == DPP_EINVAL || rc == -ENOMEM, "rc %d", rc);
    FUZZ_CHECK(rc == 0 || (l.n == 0 && err[0] != '\0'), "a refused page added %zu", l.n);
    size_t first = l.n;
    int rc2 = dpp_s3_list_parse(&l, xml, size, err, sizeof err);
    FUZZ_CHECK(rc2 == rc, "the same page gave %d, then %d", rc, rc2);
    FUZZ_CHECK(l.n == 2 * first, "the same page added %zu, then %zu", first, l.n - first);
    FUZZ_CHECK(!l.truncated || (l.next_token && l.next_token[0]), "truncated without a token");
    for (size_t i = 0; i < l.n; i++) {
        size_t kl = strlen(l.objs[i].key);
        FUZZ_CHECK(kl > 0 && kl <= DPP_S3_KEY_MAX, "key of %zu bytes", kl);
        FUZZ_CHECK(strlen(l.objs[i].etag) < DPP_S3_ETAG_MAX, "etag not terminated");
    }
    dpp_s3_listing_close(&l);
    char code[64], msg[256];
    dpp_s3_error_parse(xml, size, code, sizeof code, msg, sizeof msg);
    FUZZ_CHECK(memchr(code, '\0', sizeof code) && memchr(msg, '\0', sizeof msg),
               "error fields not terminated");
    return 0;
}
