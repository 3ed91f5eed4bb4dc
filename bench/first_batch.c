// SPDX-License-Identifier: Apache-2.0
// bench_first_batch MASTER SESSION: opens rank 0 of SESSION and reads it to
// the end; prints the milliseconds from its start to the first batch and to
// the end, and the rows. bench/ttfb.sh starts it right after `dppctl
// submit`, so the first figure plus submit's time is the time to first batch.
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "dpp/client.h"
#include "dpp/error.h"

static double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_first_batch MASTER SESSION\n");
        return 2;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dpp_client_t *c;
    int rc = dpp_client_open(&c, argv[1], argv[2], 0, 10000);
    if (rc) {
        fprintf(stderr, "bench_first_batch: open: %s\n", dpp_strerror(rc));
        return 1;
    }
    double first = -1;
    uint64_t rows = 0;
    for (;;) {
        dpp_batch_t *b;
        rc = dpp_client_next(c, &b, 600000);
        if (rc == DPP_EPOCH_END)
            continue;
        if (rc == DPP_SESSION_END)
            break;
        if (rc != DPP_BATCH) {
            fprintf(stderr, "bench_first_batch: next: %s\n", dpp_strerror(rc));
            return 1;
        }
        if (first < 0)
            first = ms_since(&t0);
        rows += dpp_batch_rows(b);
        dpp_batch_release(b);
    }
    printf("first batch %.0f ms, all %" PRIu64 " rows %.0f ms\n", first, rows, ms_since(&t0));
    dpp_client_close(c);
    return 0;
}
