// SPDX-License-Identifier: Apache-2.0
// A trainer that stops reading (default: takes one batch, then calls nothing
// for a while, so the worker's queue for it can only grow up to the worker's
// memory bound), or with --hold one that takes every batch it can and never
// releases one (so only its own memory budget can stop the data), reporting
// how many rows it holds and how much its memory grew.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dpp/client.h"

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    dpp_client_options_t o;
    dpp_client_options_init(&o);
    int hold = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--hold") == 0)
            hold = 1;
        else if (strcmp(argv[i], "--budget-mb") == 0 && i + 1 < argc)
            o.memory_budget = (size_t)atol(argv[++i]) << 20;
        else if (strcmp(argv[i], "--prefetch") == 0 && i + 1 < argc)
            o.prefetch = (unsigned)atoi(argv[++i]);
        else
            break;
    }
    if (argc - i != 3) {
        fprintf(stderr, "usage: dpp-stall-client [--hold] [--budget-mb N] [--prefetch N] "
                        "MASTER SESSION SECONDS\n");
        return 2;
    }
    o.master = argv[i];
    o.session = argv[i + 1];
    unsigned secs = (unsigned)atoi(argv[i + 2]);
    long base = rss_kb();
    dpp_client_t *c;
    int rc = dpp_client_open_opts(&c, &o);
    if (rc) {
        fprintf(stderr, "stall: open: %s\n", dpp_strerror(rc));
        return 1;
    }
    if (!hold) {
        dpp_batch_t *b;
        rc = dpp_client_next(c, &b, 60000);
        if (rc != DPP_BATCH) {
            fprintf(stderr, "stall: next: %d %s\n", rc, dpp_strerror(rc));
            return 1;
        }
        printf("stall: got a batch of %zu rows; not reading for %u s\n", dpp_batch_rows(b), secs);
        fflush(stdout);
        sleep(secs);
        dpp_batch_release(b);
        dpp_client_close(c);
        return 0;
    }
    /* Take batches until none has come for `secs` seconds; keep them all. */
    size_t n = 0, cap = 1024, rows = 0;
    dpp_batch_t **held = malloc(cap * sizeof *held);
    for (;;) {
        dpp_batch_t *b;
        rc = dpp_client_next(c, &b, (int)secs * 1000);
        if (rc != DPP_BATCH)
            break;
        if (n == cap)
            held = realloc(held, (cap *= 2) * sizeof *held);
        held[n++] = b;
        rows += dpp_batch_rows(b);
    }
    if (rc != DPP_ETIMEDOUT && rc != DPP_EPOCH_END && rc != DPP_SESSION_END) {
        fprintf(stderr, "stall: next: %d %s\n", rc, dpp_strerror(rc));
        return 1;
    }
    dpp_client_stats_t st;
    dpp_client_get_stats(c, &st);
    printf("stall: held_rows=%zu batches=%zu rss_growth_kb=%ld received_kb=%llu stopped_by=%s\n",
           rows, n, rss_kb() - base, (unsigned long long)(st.bytes_raw >> 10), dpp_strerror(rc));
    for (size_t j = 0; j < n; j++)
        dpp_batch_release(held[j]);
    free(held);
    dpp_client_close(c);
    return 0;
}
