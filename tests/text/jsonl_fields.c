/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON Lines reader under test, as a filter for tests/text/jsonl_check.py:
 * jsonl_fields FILE FIELD prints, for each line of FILE, "ok KIND HEX" (KIND
 * the field's dpp_json_kind_t number, HEX its unescaped bytes when a string,
 * else "-") or "bad OFFSET WHY". */
#include <stdio.h>
#include <stdlib.h>

#include "format/jsonl.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: jsonl_fields FILE FIELD\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n)
        return 2;
    fclose(f);
    size_t pos = 0, len;
    const uint8_t *line;
    const char *names[] = {argv[2]};
    while (dpp_jsonl_next_line(buf, (size_t)n, &pos, &line, &len)) {
        dpp_json_value_t v;
        size_t at;
        const char *why;
        if (dpp_jsonl_parse(line, len, names, 1, &v, &at, &why) != 0) {
            printf("bad %zu %s\n", at, why);
            continue;
        }
        printf("ok %d ", (int)v.kind);
        if (v.kind == DPP_JSON_STRING) {
            uint8_t *out = malloc(v.len + 1);
            size_t l = dpp_jsonl_unescape(line, &v, out);
            for (size_t i = 0; i < l; i++)
                printf("%02x", out[i]);
            if (l == 0)
                putchar('-');
            free(out);
        } else {
            putchar('-');
        }
        putchar('\n');
    }
    free(buf);
    return 0;
}
