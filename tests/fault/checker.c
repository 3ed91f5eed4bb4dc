// SPDX-License-Identifier: Apache-2.0
// dpp-fault-check: reads one rank of a session whose spec has a sparse
// feature "row_id" (one id per row, no transforms) and counts, per epoch,
// the rows delivered, the row ids never seen (of the rows this rank should
// get) and the ids seen more than once. Exit 0 only with 0 missing and 0
// duplicates in every epoch.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpp/client.h"

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: dpp-fault-check MASTER SESSION RANK EXPECTED_IDS_FILE [DELAY_MS]\n"
                        "EXPECTED_IDS_FILE: the row ids this rank must get, one per line;\n"
                        "DELAY_MS: time spent per batch, as a trainer's step would\n");
        return 2;
    }
    unsigned delay_ms = argc == 6 ? (unsigned)atoi(argv[5]) : 0;
    FILE *f = fopen(argv[4], "r");
    if (f == NULL) {
        perror(argv[4]);
        return 2;
    }
    size_t n = 0, cap = 1024;
    uint64_t max_id = 0;
    int64_t *want = malloc(cap * sizeof *want);
    long long v;
    while (fscanf(f, "%lld", &v) == 1) {
        if (n == cap)
            want = realloc(want, (cap *= 2) * sizeof *want);
        want[n++] = v;
        if ((uint64_t)v > max_id)
            max_id = (uint64_t)v;
    }
    fclose(f);
    uint8_t *expected = calloc(max_id + 1, 1);
    uint32_t *seen = calloc(max_id + 1, sizeof *seen);
    for (size_t i = 0; i < n; i++)
        expected[want[i]] = 1;

    dpp_client_options_t o;
    dpp_client_options_init(&o);
    o.master = argv[1];
    o.session = argv[2];
    o.rank = (unsigned)atoi(argv[3]);
    o.connect_timeout_ms = 30000;
    dpp_client_t *c;
    int rc = dpp_client_open_opts(&c, &o);
    if (rc) {
        fprintf(stderr, "fault-check: open: %s\n", dpp_strerror(rc));
        return 1;
    }
    int bad = 0;
    uint64_t rows = 0, foreign = 0;
    for (;;) {
        dpp_batch_t *b;
        unsigned epoch = dpp_client_epoch(c);
        rc = dpp_client_next(c, &b, 60000);
        if (rc == DPP_BATCH) {
            const int64_t *ids;
            const int32_t *lens;
            size_t nv;
            if (dpp_batch_sparse(b, "row_id", &ids, &lens, &nv) != 0 || nv != dpp_batch_rows(b)) {
                fprintf(stderr, "fault-check: the spec needs sparse feature row_id\n");
                return 2;
            }
            for (size_t i = 0; i < nv; i++) {
                if (ids[i] < 0 || (uint64_t)ids[i] > max_id || !expected[ids[i]])
                    foreign++;
                else
                    seen[ids[i]]++;
            }
            rows += nv;
            dpp_batch_release(b);
            if (delay_ms)
                usleep(delay_ms * 1000);
            continue;
        }
        if (rc == DPP_EPOCH_END) {
            uint64_t missing = 0, dup = 0;
            for (size_t i = 0; i < n; i++) {
                missing += seen[want[i]] == 0;
                dup += seen[want[i]] > 1 ? seen[want[i]] - 1 : 0;
                seen[want[i]] = 0;
            }
            printf("epoch %u rank %s: rows %" PRIu64 " missing %" PRIu64 " duplicates %" PRIu64
                   " foreign %" PRIu64 "\n",
                   epoch, argv[3], rows, missing, dup, foreign);
            fflush(stdout);
            bad |= missing || dup || foreign;
            rows = foreign = 0;
            continue;
        }
        if (rc == DPP_SESSION_END)
            break;
        fprintf(stderr, "fault-check: next: %s %s\n", dpp_strerror(rc), dpp_client_error(c));
        return 1;
    }
    dpp_client_stats_t st;
    dpp_client_get_stats(c, &st);
    printf("fault-check: blocks %" PRIu64 " duplicates dropped %" PRIu64 " reconnects %" PRIu64
           "\n",
           st.blocks, st.blocks_duplicate, st.reconnects);
    dpp_client_close(c);
    free(want);
    free(expected);
    free(seen);
    return bad ? 1 : 0;
}
