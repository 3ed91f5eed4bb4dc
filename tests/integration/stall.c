// SPDX-License-Identifier: Apache-2.0
// A trainer that stops reading: takes one batch, then holds it and calls
// nothing for a while, so the worker's queue for it can only grow — up to
// the worker's memory bound.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dpp/client.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: dpp-stall-client MASTER SESSION SECONDS\n");
        return 2;
    }
    dpp_client_t *c;
    int rc = dpp_client_open(&c, argv[1], argv[2], 0, 10000);
    if (rc) {
        fprintf(stderr, "stall: open: %s\n", dpp_strerror(rc));
        return 1;
    }
    dpp_batch_t *b;
    rc = dpp_client_next(c, &b, 60000);
    if (rc != DPP_BATCH) {
        fprintf(stderr, "stall: next: %d %s\n", rc, dpp_strerror(rc));
        return 1;
    }
    printf("stall: got a batch of %zu rows; not reading for %s s\n", dpp_batch_rows(b), argv[3]);
    fflush(stdout);
    sleep((unsigned)atoi(argv[3]));
    dpp_batch_release(b);
    dpp_client_close(c);
    return 0;
}
