// SPDX-License-Identifier: Apache-2.0
// dpp-fault-check: reads one rank of a session whose spec has a sparse
// feature "row_id" (one id per row, no transforms) and counts, per epoch,
// the rows delivered, the row ids never seen (of the rows this rank should
// get), the ids seen more than once, and the inversions (a row whose id is
// smaller than the row's before it in the same batch: 0 in file order).
// Exit 0 only with 0 missing and 0 duplicates in every epoch.
//
// A text session (spec format "jsonl") has no row_id: with --text 1 a
// row's identity is a hash of its sequence (input_ids and position_ids),
// EXPECTED_IDS_FILE holds those hashes (hex, one per sequence; a sequence
// that occurs k times, k times), and --write-ids FILE writes the hashes of
// the first epoch, from a session read undisturbed, to make that file.
//
// For the determinism and resume tests it can also write a hash of every
// batch (--hashes), write a checkpoint token after a batch (--checkpoint-at
// K --token FILE), kill itself with SIGKILL after a batch (--die-after N,
// as a trainer that crashes), and start from a token (--resume FILE; the
// first epoch is then partial and its missing rows are not counted).
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpp/client.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* FNV-1a over every array the batch hands out, mask included. */
static uint64_t batch_hash(dpp_client_t *c, dpp_batch_t *b)
{
    size_t rows = dpp_batch_rows(b);
    uint64_t h = fnv(0xcbf29ce484222325ull, &rows, sizeof rows);
    const float *f;
    dpp_batch_labels(b, &f);
    h = fnv(h, f, rows * sizeof *f);
    for (unsigned i = 0; i < dpp_client_num_dense(c); i++) {
        unsigned dim;
        dpp_batch_dense_at(b, i, &f, &dim);
        h = fnv(h, f, rows * dim * sizeof *f);
    }
    dpp_kjt_t k;
    dpp_batch_kjt(b, &k);
    h = fnv(h, k.values, k.nvalues * sizeof *k.values);
    h = fnv(h, k.lengths, k.nkeys * rows * sizeof *k.lengths);
    if (k.weights)
        h = fnv(h, k.weights, k.nvalues * sizeof *k.weights);
    return fnv(h, dpp_batch_mask(b), rows);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A text row's identity: its slot among the expected hashes (sorted, ties
 * taken in turn, the last one again for a duplicate), or -1 when the hash
 * is not expected. */
static int64_t text_row_id(const uint64_t *hs, size_t n, const uint32_t *seen, uint64_t h)
{
    const uint64_t *at = bsearch(&h, hs, n, sizeof *hs, cmp_u64);
    if (at == NULL)
        return -1;
    size_t j = (size_t)(at - hs);
    while (j > 0 && hs[j - 1] == h)
        j--;
    while (j + 1 < n && hs[j + 1] == h && seen[j])
        j++;
    return (int64_t)j;
}

static int write_token(dpp_client_t *c, const char *path)
{
    uint8_t tok[DPP_CHECKPOINT_SIZE];
    int n = dpp_client_checkpoint(c, tok, sizeof tok);
    if (n < 0)
        return n;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, tok, (size_t)n) != n || fsync(fd) != 0) {
        perror(path);
        return -1;
    }
    close(fd);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: dpp-fault-check [--hashes FILE] [--checkpoint-at K --token FILE]\n"
            "                       [--die-after N] [--resume FILE] [--prefetch-splits N]\n"
            "                       [--share 1] [--text 1] [--write-ids FILE]\n"
            "                       MASTER SESSION RANK EXPECTED_IDS_FILE [DELAY_MS]\n"
            "EXPECTED_IDS_FILE: the row ids this rank must get, one per line;\n"
            "DELAY_MS: time spent per batch, as a trainer's step would;\n"
            "--share 1: the rank gets a share of them that changes per epoch (shuffle\n"
            "with several ranks): ids not seen are not counted missing;\n"
            "--text 1: a text session; ids are sequence hashes (hex);\n"
            "--write-ids FILE: write the ids of epoch 0 to FILE and stop after it\n");
}

int main(int argc, char **argv)
{
    const char *hashes_path = NULL, *token_path = NULL, *resume_path = NULL, *ids_out = NULL;
    long checkpoint_at = -1, die_after = -1;
    unsigned prefetch_splits = 0;
    int i = 1, share = 0, text = 0;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--hashes") == 0)
            hashes_path = argv[i + 1];
        else if (strcmp(argv[i], "--checkpoint-at") == 0)
            checkpoint_at = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--token") == 0)
            token_path = argv[i + 1];
        else if (strcmp(argv[i], "--die-after") == 0)
            die_after = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--resume") == 0)
            resume_path = argv[i + 1];
        else if (strcmp(argv[i], "--prefetch-splits") == 0)
            prefetch_splits = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--share") == 0)
            share = strcmp(argv[i + 1], "1") == 0;
        else if (strcmp(argv[i], "--text") == 0)
            text = strcmp(argv[i + 1], "1") == 0;
        else if (strcmp(argv[i], "--write-ids") == 0)
            ids_out = argv[i + 1];
        else
            break;
    }
    argc -= i - 1;
    argv += i - 1;
    if ((argc != 5 && argc != 6) || (checkpoint_at >= 0) != (token_path != NULL)) {
        usage();
        return 2;
    }
    unsigned delay_ms = argc == 6 ? (unsigned)atoi(argv[5]) : 0;
    FILE *hashes = hashes_path ? fopen(hashes_path, "a") : NULL;
    if (hashes_path && hashes == NULL) {
        perror(hashes_path);
        return 2;
    }
    uint8_t resume[DPP_CHECKPOINT_SIZE];
    if (resume_path) {
        FILE *rf = fopen(resume_path, "rb");
        if (rf == NULL || fread(resume, 1, sizeof resume, rf) != sizeof resume) {
            fprintf(stderr, "fault-check: cannot read a token from %s\n", resume_path);
            return 2;
        }
        fclose(rf);
    }
    FILE *f = fopen(argv[4], "r");
    if (f == NULL) {
        perror(argv[4]);
        return 2;
    }
    size_t n = 0, cap = 1024;
    uint64_t max_id = 0;
    int64_t *want = malloc(cap * sizeof *want);
    uint64_t *hs = malloc(cap * sizeof *hs); /* --text: the expected hashes, sorted */
    long long v;
    unsigned long long hv;
    while (text ? fscanf(f, "%llx", &hv) == 1 : fscanf(f, "%lld", &v) == 1) {
        if (n == cap) {
            want = realloc(want, (cap *= 2) * sizeof *want);
            hs = realloc(hs, cap * sizeof *hs);
        }
        if (text) {
            hs[n] = hv;
            v = (long long)n;
        }
        want[n++] = v;
        if ((uint64_t)v > max_id)
            max_id = (uint64_t)v;
    }
    fclose(f);
    if (text)
        qsort(hs, n, sizeof *hs, cmp_u64);
    FILE *ids_file = ids_out ? fopen(ids_out, "w") : NULL;
    if (ids_out && ids_file == NULL) {
        perror(ids_out);
        return 2;
    }
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
    o.prefetch_splits = prefetch_splits;
    if (resume_path) {
        o.resume_token = resume;
        o.resume_token_len = sizeof resume;
    }
    dpp_client_t *c;
    int rc = dpp_client_open_opts(&c, &o);
    if (rc) {
        fprintf(stderr, "fault-check: open: %s\n", dpp_strerror(rc));
        return 1;
    }
    int bad = 0, partial = resume_path != NULL;
    uint64_t rows = 0, foreign = 0, inversions = 0, ids_sum = 0;
    long taken = 0;
    unsigned index = 0; /* batch of the epoch */
    for (;;) {
        dpp_batch_t *b;
        unsigned epoch = dpp_client_epoch(c);
        rc = dpp_client_next(c, &b, 60000);
        if (rc == DPP_BATCH) {
            const int64_t *ids;
            const int32_t *lens;
            size_t nv;
            size_t valid = dpp_batch_valid_rows(b);
            int64_t *text_ids = NULL;
            dpp_text_batch_t tb;
            if (text) {
                if (dpp_batch_text(b, &tb) != 0 || tb.rows != valid) {
                    fprintf(stderr, "fault-check: --text 1 needs a text session\n");
                    return 2;
                }
                text_ids = malloc((valid ? valid : 1) * sizeof *text_ids);
                for (size_t j = 0; j < valid; j++) {
                    uint64_t h = fnv(0xcbf29ce484222325ull, tb.input_ids + j * tb.length,
                                     tb.length * sizeof(int64_t));
                    h = fnv(h, tb.position_ids + j * tb.length, tb.length * sizeof(int64_t));
                    if (ids_file && epoch == 0)
                        fprintf(ids_file, "%016" PRIx64 "\n", h);
                    text_ids[j] = text_row_id(hs, n, seen, h);
                    if (text_ids[j] >= 0)
                        seen[text_ids[j]]++; /* taken now: a twin takes the next slot */
                }
                ids = text_ids;
            } else if (dpp_batch_sparse(b, "row_id", &ids, &lens, &nv) != 0 ||
                       nv != dpp_batch_rows(b)) {
                fprintf(stderr, "fault-check: the spec needs sparse feature row_id\n");
                return 2;
            }
            for (size_t j = 0; j < valid; j++) {
                if (ids[j] < 0 || (uint64_t)ids[j] > max_id || !expected[ids[j]])
                    foreign++;
                else if (!text)
                    seen[ids[j]]++;
                inversions += j > 0 && ids[j] < ids[j - 1];
                ids_sum += (uint64_t)ids[j];
            }
            rows += valid;
            free(text_ids);
            if (hashes)
                fprintf(hashes, "%u %u %016" PRIx64 "\n", epoch, index, batch_hash(c, b));
            index++;
            taken++;
            dpp_batch_release(b);
            if (taken == checkpoint_at && (rc = write_token(c, token_path)) != 0) {
                fprintf(stderr, "fault-check: checkpoint: %s\n", dpp_strerror(rc));
                return 1;
            }
            if (taken == die_after) {
                if (hashes)
                    fflush(hashes);
                printf("fault-check: killing myself after %ld batches\n", taken);
                fflush(stdout);
                raise(SIGKILL);
            }
            if (delay_ms)
                usleep(delay_ms * 1000);
            continue;
        }
        if (rc == DPP_EPOCH_END) {
            uint64_t missing = 0, dup = 0;
            for (size_t j = 0; j < n; j++) {
                missing += seen[want[j]] == 0;
                dup += seen[want[j]] > 1 ? seen[want[j]] - 1 : 0;
                seen[want[j]] = 0;
            }
            printf("epoch %u rank %s: rows %" PRIu64 " missing %" PRIu64 " duplicates %" PRIu64
                   " foreign %" PRIu64 " inversions %" PRIu64 " ids_sum %" PRIu64 "%s\n",
                   epoch, argv[3], rows, share ? 0 : missing, dup, foreign, inversions, ids_sum,
                   partial ? " (resumed: partial epoch)" : "");
            fflush(stdout);
            bad |= (missing && !partial && !share) || dup || foreign;
            if (ids_file) /* the ids of an undisturbed epoch: what the faults must keep */
                break;
            rows = foreign = inversions = ids_sum = 0;
            index = 0;
            partial = 0;
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
    if (hashes)
        fclose(hashes);
    if (ids_file) {
        fclose(ids_file);
        bad = 0; /* nothing was expected */
    }
    free(want);
    free(hs);
    free(expected);
    free(seen);
    return bad ? 1 : 0;
}
