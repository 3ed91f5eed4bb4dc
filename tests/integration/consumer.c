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
        rows += dpp_batch_rows(b);
        batches++;
        dpp_batch_release(b);
    }
    dpp_client_close(c);
    printf("rows %llu batches %llu epochs %llu\n", rows, batches, epochs);
    return 0;
}
