// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the JSON Lines reader (src/format/jsonl.c), fed lines
// of a text table (data, not trusted). A refusal names an offset inside the
// line and a reason; an accepted line's fields lie inside it, and a string
// unescapes into at most its own length of valid UTF-8 (lone surrogates
// become U+FFFD).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "format/jsonl.h"
#include "fuzz_util.h"

/* Valid UTF-8 by the same table the reader uses, written again here. */
static int utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        size_t k = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3
                                : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
        if (k == 0 || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
        if ((b == 0xe0 && s[i + 1] < 0xa0) || (b == 0xed && s[i + 1] > 0x9f) ||
            (b == 0xf0 && s[i + 1] < 0x90) || (b == 0xf4 && s[i + 1] > 0x8f))
            return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"text", "lang", "", "a"};
    size_t pos = 0, len;
    const uint8_t *line;
    while (dpp_jsonl_next_line(data, size, &pos, &line, &len)) {
        FUZZ_CHECK(line >= data && line + len <= data + size, "line outside the input");
        FUZZ_CHECK(memchr(line, '\n', len) == NULL, "a line holds a newline");
        dpp_json_value_t v[4];
        size_t at = 0;
        const char *why = NULL;
        int rc = dpp_jsonl_parse(line, len, names, 4, v, &at, &why);
        if (rc) {
            FUZZ_CHECK(rc == DPP_ECORRUPT && why && *why && at <= len, "rc %d at %zu of %zu", rc,
                       at, len);
            continue;
        }
        for (int k = 0; k < 4; k++) {
            if (v[k].kind == DPP_JSON_ABSENT)
                continue;
            FUZZ_CHECK((size_t)v[k].off + v[k].len <= len, "field %d outside the line", k);
            if (v[k].kind != DPP_JSON_STRING)
                continue;
            uint8_t *out = malloc(v[k].len + 1);
            size_t n = dpp_jsonl_unescape(line, &v[k], out);
            FUZZ_CHECK(n <= v[k].len, "%zu bytes from %u", n, v[k].len);
            FUZZ_CHECK(utf8_ok(out, n), "unescaped text is not UTF-8");
            free(out);
        }
    }
    return 0;
}
