// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the ListObjectsV2 page and error response parsers
// (src/storage/s3_list.c), fed what an object store (or anything between it
// and the master) answers, and the listing they make taken through the
// master's key selection (src/master/s3_table.c, dpp_s3_table_from_listing)
// as a submit's listing is. A page is parsed twice into one listing: an
// accepted page adds its objects each time, a refused one adds nothing and
// says why; every key is a NUL-terminated string of at most 1024 bytes. The
// table made of the listing (one page, and the page twice, whose keys then
// repeat) holds only keys under the prefix asked for, each once and with an
// ETag, or is refused with a reason.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "master/s3_table.h"
#include "spec/spec.h"
#include "storage/s3_list.h"

/* A table of spec over listing l of prefix in bucket "b": made or refused,
 * never anything else; what is made keeps the rules. */
static void check_table(const dpp_spec_t *spec, const char *prefix, const dpp_s3_listing_t *l)
{
    dpp_s3_table_t t;
    char err[1024];
    err[0] = '\0';
    int rc = dpp_s3_table_from_listing(spec, "b", prefix, l, &t, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == DPP_ESPEC || rc == DPP_ESTORAGE, "rc %d", rc);
    FUZZ_CHECK(rc == 0 || (t.n == 0 && t.files == NULL && err[0] != '\0'), "refused, yet %zu", t.n);
    FUZZ_CHECK(t.n <= l->n, "%zu files of %zu keys", t.n, l->n);
    char want[DPP_S3_KEY_MAX + 16];
    int wl = snprintf(want, sizeof want, "s3://b/%s", prefix);
    for (size_t i = 0; i < t.n; i++) {
        FUZZ_CHECK(strncmp(t.files[i], want, (size_t)wl) == 0, "%s is not under %s", t.files[i],
                   want);
        FUZZ_CHECK(t.etags[i][0] != '\0', "%s kept without an ETag", t.files[i]);
        for (size_t k = 0; k < i; k++)
            FUZZ_CHECK(strcmp(t.files[k], t.files[i]) != 0, "%s twice", t.files[i]);
    }
    FUZZ_CHECK(rc != 0 || strncmp(t.table_path, "s3://b", 6) == 0, "table path %s", t.table_path);
    dpp_s3_table_close(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dpp_spec_t all, part;
    static int specs;
    if (!specs) {
        static const char fmt[] = "{\"table\":\"s3://b/t\",\"batch_size\":4,%s\"features\":"
                                  "{\"sparse\":[{\"name\":\"c1\"}]},\"label\":{\"name\":\"l\"}}";
        char json[256], err[DPP_SPEC_ERRLEN];
        snprintf(json, sizeof json, fmt, "");
        FUZZ_CHECK(dpp_spec_parse(json, strlen(json), &all, err, sizeof err) == 0, "%s", err);
        snprintf(json, sizeof json, fmt, "\"partitions\":[\"ds=1\"],");
        FUZZ_CHECK(dpp_spec_parse(json, strlen(json), &part, err, sizeof err) == 0, "%s", err);
        specs = 1;
    }
    const char *xml = (const char *)data;
    dpp_s3_listing_t l = {0};
    char err[192];
    int rc = dpp_s3_list_parse(&l, xml, size, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == DPP_EINVAL || rc == -ENOMEM, "rc %d", rc);
    FUZZ_CHECK(rc == 0 || (l.n == 0 && err[0] != '\0'), "a refused page added %zu", l.n);
    size_t first = l.n;
    if (rc == 0) {
        check_table(&all, "t/", &l);
        check_table(&part, "t/", &l);
        check_table(&all, "", &l);
    }
    int rc2 = dpp_s3_list_parse(&l, xml, size, err, sizeof err);
    FUZZ_CHECK(rc2 == rc, "the same page gave %d, then %d", rc, rc2);
    FUZZ_CHECK(l.n == 2 * first, "the same page added %zu, then %zu", first, l.n - first);
    FUZZ_CHECK(!l.truncated || (l.next_token && l.next_token[0]), "truncated without a token");
    for (size_t i = 0; i < l.n; i++) {
        size_t kl = strlen(l.objs[i].key);
        FUZZ_CHECK(kl > 0 && kl <= DPP_S3_KEY_MAX, "key of %zu bytes", kl);
        FUZZ_CHECK(strlen(l.objs[i].etag) < DPP_S3_ETAG_MAX, "etag not terminated");
    }
    if (first > 0) { /* every key now twice: no table */
        dpp_s3_table_t t;
        char terr[1024];
        FUZZ_CHECK(dpp_s3_table_from_listing(&all, "b", "", &l, &t, terr, sizeof terr) ==
                       DPP_ESTORAGE,
                   "a listing of every key twice was taken");
    }
    dpp_s3_listing_close(&l);
    char code[64], msg[256];
    dpp_s3_error_parse(xml, size, code, sizeof code, msg, sizeof msg);
    FUZZ_CHECK(memchr(code, '\0', sizeof code) && memchr(msg, '\0', sizeof msg),
               "error fields not terminated");
    return 0;
}
