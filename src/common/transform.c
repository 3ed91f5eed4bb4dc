// SPDX-License-Identifier: Apache-2.0
// Transform chains over one dense value or one sparse id list. The math is
// the contract in docs/spec.md ("Transforms"); change both together.
#include <math.h>

#include "dpp/error.h"
#include "transform.h"

int dpp_transform_dense(const dpp_transform_t *ops, unsigned nops, int present, float in,
                        float *out)
{
    float x = in;
    unsigned i = 0;

    /* fill_missing is only valid first (the parser enforces it) and leaves a
     * present value alone. */
    if (nops > 0 && ops[0].op == DPP_OP_FILL_MISSING) {
        if (!present)
            x = (float)ops[0].value;
        i = 1;
    } else if (!present) {
        return DPP_EMISSING;
    }
    for (; i < nops; i++) {
        const dpp_transform_t *t = &ops[i];
        switch (t->op) {
        case DPP_OP_CLAMP:
            /* In double so that a bound that is not exactly a float compares
             * as written; NaN fails both tests and stays NaN. */
            if ((double)x < t->min)
                x = (float)t->min;
            else if ((double)x > t->max)
                x = (float)t->max;
            break;
        case DPP_OP_LOG1P:
            x = (float)log1p((double)x);
            break;
        case DPP_OP_FILL_MISSING:
        case DPP_OP_MODULO:
        case DPP_OP_TRUNCATE:
            break; /* not in a validated dense chain */
        }
    }
    *out = x;
    return 0;
}

size_t dpp_transform_sparse(const dpp_transform_t *ops, unsigned nops, int64_t *ids, size_t len)
{
    for (unsigned i = 0; i < nops; i++) {
        const dpp_transform_t *t = &ops[i];
        switch (t->op) {
        case DPP_OP_MODULO:
            if (t->n <= 0)
                break; /* not in a validated chain; avoids dividing by zero */
            for (size_t k = 0; k < len; k++) {
                /* C's % truncates toward zero; shift negatives into [0, n).
                 * n >= 1 so INT64_MIN % n cannot overflow. */
                int64_t r = ids[k] % t->n;
                if (r < 0)
                    r += t->n;
                ids[k] = r;
            }
            break;
        case DPP_OP_TRUNCATE:
            if (len > t->max_len)
                len = t->max_len;
            break;
        case DPP_OP_FILL_MISSING:
        case DPP_OP_CLAMP:
        case DPP_OP_LOG1P:
            break; /* not in a validated sparse chain */
        }
    }
    return len;
}
