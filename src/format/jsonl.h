/* SPDX-License-Identifier: Apache-2.0 */
/* JSON Lines for text sessions: one JSON object per line, the document's
 * text in a field the spec names (and, for a filter, other string fields).
 * The reader walks a line once and hands back only the top-level fields it
 * is asked for, as spans of the line; a string is unescaped on demand.
 * Every byte of the line is validated (RFC 8259 grammar, UTF-8 in strings,
 * nesting bounded), so a line is either a well-formed object or refused
 * with the offset and what was expected. No allocation. */
#ifndef DPP_FORMAT_JSONL_H
#define DPP_FORMAT_JSONL_H

#include <stddef.h>
#include <stdint.h>

#define DPP_JSONL_MAX_DEPTH 64 /* nesting of arrays and objects in a line */

typedef enum dpp_json_kind {
    DPP_JSON_ABSENT = 0, /* the line has no such field */
    DPP_JSON_STRING,
    DPP_JSON_NUMBER,
    DPP_JSON_BOOL,
    DPP_JSON_NULL,
    DPP_JSON_OBJECT,
    DPP_JSON_ARRAY,
} dpp_json_kind_t;

/* A field's value: line[off, off + len), for a string without its quotes
 * (escapes still in it; escaped = 1 when it has any). A later duplicate
 * key wins, as in most JSON readers. */
typedef struct dpp_json_value {
    dpp_json_kind_t kind;
    uint32_t off, len;
    int escaped;
} dpp_json_value_t;

/* Parses line[0..len) (no newline; a trailing '\r' and spaces are allowed)
 * as one JSON object and fills vals[i] for top-level field names[i] (n of
 * them, compared byte for byte with the unescaped key). Returns 0, or
 * DPP_ECORRUPT with *at the offset of the first wrong byte and why a phrase
 * ("expected ':' after a key", "invalid UTF-8 in a string", "nesting deeper
 * than 64", "not an object", "text after the object"). */
int dpp_jsonl_parse(const uint8_t *line, size_t len, const char *const *names, size_t n,
                    dpp_json_value_t *vals, size_t *at, const char **why);

/* Unescapes string value v of line into out (room for v->len bytes is
 * always enough): \uXXXX as UTF-8, surrogate pairs joined, a lone surrogate
 * as U+FFFD. Returns the length written. v must come from
 * dpp_jsonl_parse() on the same line (it validated the escapes). */
size_t dpp_jsonl_unescape(const uint8_t *line, const dpp_json_value_t *v, uint8_t *out);

/* The next line of buf[*pos..len): sets *line and *line_len (without the
 * '\n', with a '\r' before it removed) and moves *pos past it. Returns 1,
 * or 0 when nothing is left. A last line without '\n' is a line. */
int dpp_jsonl_next_line(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **line,
                        size_t *line_len);

#endif
