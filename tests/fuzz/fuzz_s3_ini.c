// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the reader of the AWS shared credentials and config
// files (dpp_s3_ini_get, src/storage/s3_config.c). A lookup either finds a
// value that fits its buffer, finds none, or names a line of the input; the
// same lookup gives the same answer twice.
#include <stdint.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "storage/s3_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    static const char *const lookups[][2] = {
        {"default", "aws_access_key_id"}, {"profile ci", "region"}, {"x", ""}};
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        char v[32], w[32];
        unsigned line = 0, line2 = 0;
        int rc = dpp_s3_ini_get(text, size, lookups[i][0], lookups[i][1], v, sizeof v, &line);
        FUZZ_CHECK(rc == 0 || rc == 1 || rc == DPP_EINVAL, "rc %d", rc);
        FUZZ_CHECK(rc != 1 || strlen(v) < sizeof v, "a value of %zu bytes", strlen(v));
        FUZZ_CHECK(rc != DPP_EINVAL || (line >= 1 && line <= lines), "line %u of %zu", line, lines);
        int rc2 = dpp_s3_ini_get(text, size, lookups[i][0], lookups[i][1], w, sizeof w, &line2);
        FUZZ_CHECK(rc2 == rc && (rc != 1 || strcmp(v, w) == 0) && line2 == line,
                   "the same lookup gave %d, then %d", rc, rc2);
    }
    return 0;
}
