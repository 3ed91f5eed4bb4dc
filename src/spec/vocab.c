/* SPDX-License-Identifier: Apache-2.0 */
/* Vocabulary files (vocab.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "spec/vocab.h"

struct dpp_vocab {
    uint8_t *text;   /* the file */
    uint64_t *start; /* line i is text[start[i] .. start[i + 1] - 1) */
    size_t n;
    uint32_t *slots; /* line + 1, 0 empty; a power of two, at most half full */
    uint64_t mask;
};

uint64_t dpp_string_hash(const uint8_t *s, size_t len, int64_t salt)
{
    return XXH3_64bits_withSeed(s, len, (uint64_t)salt);
}

size_t dpp_vocab_size(const dpp_vocab_t *v)
{
    return v->n;
}

static const uint8_t *line(const dpp_vocab_t *v, size_t i, size_t *len)
{
    *len = (size_t)(v->start[i + 1] - v->start[i] - 1);
    return v->text + v->start[i];
}

int64_t dpp_vocab_find(const dpp_vocab_t *v, const uint8_t *s, size_t len)
{
    for (uint64_t h = dpp_string_hash(s, len, 0) & v->mask;; h = (h + 1) & v->mask) {
        uint32_t e = v->slots[h];
        if (e == 0)
            return -1;
        size_t l;
        const uint8_t *t = line(v, e - 1, &l);
        if (l == len && memcmp(t, s, len) == 0)
            return (int64_t)e - 1;
    }
}

void dpp_vocab_free(dpp_vocab_t *v)
{
    if (v == NULL)
        return;
    free(v->text);
    free(v->start);
    free(v->slots);
    free(v);
}

/* Indexes the lines of v->text[0..size) (allocated with a byte to spare). */
static int vocab_index(dpp_vocab_t *v, size_t size, const char *name, char *err, size_t errlen)
{
    int rc = 0;
    if (size > 0 && v->text[size - 1] != '\n')
        v->text[size++] = '\n';
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += v->text[i] == '\n';
    if (lines > DPP_VOCAB_MAX_ENTRIES) {
        rc = dpp_errf(DPP_EINVAL, err, errlen, "vocabulary %s: %zu lines, over the limit of %u",
                      name, lines, DPP_VOCAB_MAX_ENTRIES);
        goto out;
    }
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)lines)
        cap *= 2;
    v->start = malloc((lines + 1) * sizeof *v->start);
    v->slots = calloc(cap, sizeof *v->slots);
    if (v->start == NULL || v->slots == NULL) {
        rc = dpp_errf(-ENOMEM, err, errlen, "vocabulary %s: out of memory for %zu lines", name,
                      lines);
        goto out;
    }
    v->mask = cap - 1;
    v->start[0] = 0;
    for (size_t i = 0, k = 0; i < size; i++)
        if (v->text[i] == '\n')
            v->start[++k] = i + 1;
    for (size_t i = 0; i < lines; i++) {
        size_t len;
        const uint8_t *s = line(v, i, &len);
        int64_t seen = dpp_vocab_find(v, s, len);
        if (seen >= 0) {
            rc = dpp_errf(DPP_EINVAL, err, errlen,
                          "vocabulary %s: line %zu repeats line %lld; every string must have "
                          "one id",
                          name, i + 1, (long long)seen + 1);
            goto out;
        }
        uint64_t h = dpp_string_hash(s, len, 0) & v->mask;
        while (v->slots[h] != 0)
            h = (h + 1) & v->mask;
        v->slots[h] = (uint32_t)i + 1;
        v->n = i + 1;
    }
out:
    return rc;
}

int dpp_vocab_load(const char *path, const char *name, dpp_vocab_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = 0;
    dpp_vocab_t *v = calloc(1, sizeof *v);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (v == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "vocabulary %s: out of memory", name);
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = dpp_errf(-errno, err, errlen, "vocabulary %s: %s", name, strerror(errno));
        goto out;
    }
    if ((uint64_t)st.st_size >= DPP_VOCAB_MAX_BYTES) {
        rc = dpp_errf(DPP_EINVAL, err, errlen, "vocabulary %s: %lld bytes, over the 4 GiB limit",
                      name, (long long)st.st_size);
        goto out;
    }
    size_t size = (size_t)st.st_size;
    /* one byte more: a '\n' is added after a last line that lacks one */
    if ((v->text = malloc(size + 1)) == NULL) {
        rc = dpp_errf(-ENOMEM, err, errlen, "vocabulary %s: out of memory", name);
        goto out;
    }
    for (size_t got = 0; got < size;) {
        ssize_t r = read(fd, v->text + got, size - got);
        if (r <= 0) {
            rc = dpp_errf(r < 0 ? -errno : -EIO, err, errlen, "vocabulary %s: %s", name,
                          r < 0 ? strerror(errno) : "the file shrank while read");
            goto out;
        }
        got += (size_t)r;
    }
    rc = vocab_index(v, size, name, err, errlen);
out:
    if (fd >= 0)
        close(fd);
    if (rc) {
        dpp_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int dpp_vocab_new(const uint8_t *buf, size_t len, const char *name, dpp_vocab_t **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    if ((uint64_t)len >= DPP_VOCAB_MAX_BYTES)
        return dpp_errf(DPP_EINVAL, err, errlen, "vocabulary %s: %zu bytes, over the 4 GiB limit",
                        name, len);
    dpp_vocab_t *v = calloc(1, sizeof *v);
    if (v == NULL || (v->text = malloc(len + 1)) == NULL) {
        dpp_vocab_free(v);
        return dpp_errf(-ENOMEM, err, errlen, "vocabulary %s: out of memory", name);
    }
    memcpy(v->text, buf, len);
    int rc = vocab_index(v, len, name, err, errlen);
    if (rc) {
        dpp_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}
