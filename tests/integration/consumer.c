// SPDX-License-Identifier: Apache-2.0
// A trainer-like program built only from an installed dpp (pkg-config
// dppclient): reads a session through libdppclient.so and prints what it got.
// It must never be killed by the library: errors come back as return values.
#include <stdio.h>
#include <stdlib.h>

#include <dpp/client.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: consumer MASTER SESSION\n");
        return 2;
    }
    dpp_client_t *c = NULL;
    /* Errors first: nobody listens on port 1, and a session that does not exist. */
    int rc = dpp_client_open(&c, "127.0.0.1:1", argv[2], 0, 2000);
    if (rc >= 0 || c != NULL) {
        fprintf(stderr, "consumer: open against a closed port returned %d\n", rc);
        return 1;
    }
    printf("closed port: %s (%s)\n", dpp_strerror(rc), dpp_err_name(rc));
    rc = dpp_client_open(&c, argv[1], "s-no-such-session", 0, 5000);
    if (rc != DPP_ENOSESSION) {
        fprintf(stderr, "consumer: unknown session returned %d\n", rc);
        return 1;
    }
    printf("unknown session: %s\n", dpp_strerror(rc));

    rc = dpp_client_open(&c, argv[1], argv[2], 0, 5000);
    if (rc != 0) {
        fprintf(stderr, "consumer: open: %s\n", dpp_strerror(rc));
        return 1;
    }
    unsigned long long rows = 0, batches = 0, epochs = 0;
    for (;;) {
        dpp_batch_t *b;
        rc = dpp_client_next(c, &b, 60000);
        if (rc == DPP_EPOCH_END) {
            epochs++;
            continue;
        }
        if (rc == DPP_SESSION_END)
            break;
        if (rc != DPP_BATCH) {
            fprintf(stderr, "consumer: next: %s\n", dpp_strerror(rc));
            return 1;
        }
        const float *labels, *dense;
        unsigned dim;
        if (dpp_batch_labels(b, &labels) != 0 ||
            dpp_batch_dense(b, dpp_client_dense_name(c, 0), &dense, &dim) != 0 || dim != 1 ||
            dpp_batch_dense(b, "no-such-feature", &dense, &dim) != DPP_ENOFEATURE) {
            fprintf(stderr, "consumer: accessors misbehave\n");
            return 1;
        }
        /* The KJT view and the per-feature views are the same memory. */
        dpp_kjt_t kjt;
        if (dpp_batch_kjt(b, &kjt) != 0 || kjt.nkeys != dpp_client_num_sparse(c) ||
            kjt.stride != dpp_batch_rows(b) || kjt.offsets[0] != 0) {
            fprintf(stderr, "consumer: bad KJT view\n");
            return 1;
        }
        size_t total = 0;
        for (unsigned k = 0; k < kjt.nkeys; k++) {
            const int64_t *v;
            const int32_t *l;
            size_t n;
            if (dpp_batch_sparse_at(b, k, &v, &l, &n) != 0 ||
                l != kjt.lengths + (size_t)k * kjt.stride || v != kjt.values + total) {
                fprintf(stderr, "consumer: KJT and per-key views disagree at key %u\n", k);
                return 1;
            }
            for (size_t r = 0; r < kjt.stride; r++)
                if (kjt.offsets[k * kjt.stride + r + 1] - kjt.offsets[k * kjt.stride + r] != l[r]) {
                    fprintf(stderr, "consumer: offsets are not the prefix sums\n");
                    return 1;
                }
            total += n;
        }
        if (total != kjt.nvalues || (size_t)kjt.offsets[kjt.nkeys * kjt.stride] != total) {
            fprintf(stderr, "consumer: KJT value count %zu != %zu\n", kjt.nvalues, total);
            return 1;
        }
        rows += dpp_batch_rows(b);
        batches++;
        dpp_batch_release(b);
    }
    dpp_client_stats_t st;
    dpp_client_get_stats(c, &st);
    if (st.rows != rows || st.batches != batches || st.bytes_raw == 0 || st.blocks == 0) {
        fprintf(stderr, "consumer: stats disagree: rows %llu batches %llu\n",
                (unsigned long long)st.rows, (unsigned long long)st.batches);
        return 1;
    }
    dpp_client_close(c);
    printf("rows %llu batches %llu epochs %llu\n", rows, batches, epochs);
    return 0;
}
