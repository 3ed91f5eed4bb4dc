/* SPDX-License-Identifier: Apache-2.0 */
/* Zero-copy decoder of the tf.train.Example wire format. It walks a record
 * once and keeps only the features named in a projection; every other
 * feature is skipped without being materialised and nothing is allocated per
 * record. Wire facts: ../shared/REFERENCE.md, "tf.train.Example". */
#ifndef DPP_FORMAT_EXAMPLE_DECODE_H
#define DPP_FORMAT_EXAMPLE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "format/varint.h"

typedef enum dpp_feat_kind {
    DPP_FEAT_ABSENT = 0,
    DPP_FEAT_BYTES = 1, /* BytesList (Feature field 1) */
    DPP_FEAT_FLOAT = 2, /* FloatList (Feature field 2) */
    DPP_FEAT_INT64 = 3, /* Int64List (Feature field 3) */
} dpp_feat_kind_t;

/* One projected feature of one record. `list` points into the record: the
 * bytes of the FloatList / Int64List / BytesList message. A Feature with no
 * kind set decodes as present with an empty list of kind DPP_FEAT_BYTES.
 *
 * Sources that are not tf.Example (Parquet) hand over their values as they
 * are instead (native = 1): packed host-order float32 for FLOAT, int64 for
 * INT64, and for BYTES one entry per string of a host-order uint32 length
 * then the bytes. The accessors below read both forms. */
typedef struct dpp_feat_ref {
    dpp_feat_kind_t kind;
    const uint8_t *list;
    size_t list_len;
    int native;
} dpp_feat_ref_t;

/* The feature names a decoder looks for, built once per split. Decoding
 * writes to it (it remembers the order of the last record's keys, to try
 * first for the next), so one thread decodes with it at a time. */
typedef struct dpp_projection dpp_projection_t;

/* Builds a projection of n names (copied). Index i of a decode result is
 * names[i]. Returns 0, -ENOMEM or DPP_EINVAL (duplicate or empty name). The
 * caller frees *out with dpp_projection_free(). */
int dpp_projection_new(dpp_projection_t **out, const char *const *names, size_t n);
void dpp_projection_free(dpp_projection_t *p);
size_t dpp_projection_size(const dpp_projection_t *p);

/* Decodes one serialized Example. out has dpp_projection_size(p) entries;
 * every entry is set (DPP_FEAT_ABSENT when the record lacks the feature; a
 * later duplicate key wins). Returns 0 or DPP_EEXAMPLE when the record is not
 * a well-formed Example (bad varint, length past the end, bad wire type,
 * group wire types); out is then unspecified. The list contents are validated
 * by the accessors below, not here, and the Feature of a key outside the
 * projection is skipped by its length without looking inside. Unknown fields
 * are skipped at every level, as is a known field number with an unexpected
 * wire type (as protobuf's C++ parser does). One Feature holding the same
 * list field twice (legal protobuf, to be merged by concatenation; no writer
 * emits it) is DPP_EEXAMPLE, since one reference cannot express it. The refs
 * point into rec and are valid as long as rec. */
int dpp_example_decode(dpp_projection_t *p, const uint8_t *rec, size_t len,
                       dpp_feat_ref_t *out);

/* The feature names of one serialized Example, for messages ("did you
 * mean"): each key, with a NUL after it, into buf[0..buflen), as many as
 * fit, in the record's order (a key twice is there twice). Returns how many.
 * A malformed record gives the keys before the damage. */
size_t dpp_example_keys(const uint8_t *rec, size_t len, char *buf, size_t buflen);

/* Number of values in a float or int64 list, accepting packed and unpacked
 * encodings mixed in one list (kind DPP_FEAT_BYTES counts the byte strings of
 * a BytesList). Returns 0 with *n set, DPP_ETYPE if f is not of `kind` (also
 * when it is absent), DPP_EINVAL if kind is not a list kind, DPP_EEXAMPLE if
 * the list bytes are malformed; *n is 0 on error. */
int dpp_feat_count(const dpp_feat_ref_t *f, dpp_feat_kind_t kind, size_t *n);

/* Copies up to cap values (converted to host order) into out and sets *n to
 * the number of values in the list, which may exceed cap: then only the
 * first cap were written, and the caller can grow out and call again. One
 * pass, so callers need not count first. The whole list is validated even
 * past cap. Same returns as dpp_feat_count(). */
int dpp_feat_floats(const dpp_feat_ref_t *f, float *out, size_t cap, size_t *n);
int dpp_feat_int64s(const dpp_feat_ref_t *f, int64_t *out, size_t cap, size_t *n);

/* dpp_feat_int64s() of an Int64List that is one packed run (field 1,
 * length under 128, filling the list: what writers emit): run and len are
 * the run's bytes, list + 2 and list_len - 2. For a caller that checked
 * that form itself, to skip the checks that find it. */
static inline __attribute__((always_inline)) int
dpp_feat_unpack_int64s(const uint8_t *run, size_t len, int64_t *out, size_t cap, size_t *n)
{
    size_t w = 0, total = 0;
    int rc = dpp_pb_unpack_varints(run, run + len, out, cap, &w, &total);
    *n = rc ? 0 : total;
    return rc;
}

/* Walks the byte strings of a DPP_FEAT_BYTES feature: *pos starts at 0; each
 * call returns 1 with the next string in *s, *len (pointing into the list),
 * 0 after the last, DPP_EEXAMPLE for malformed list bytes, DPP_ETYPE for
 * another kind. */
int dpp_feat_bytes_next(const dpp_feat_ref_t *f, size_t *pos, const uint8_t **s, size_t *len);

#endif
