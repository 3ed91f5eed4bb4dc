/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's store of split outputs (cache_store.h): two tiers, each a
 * hash table of its entries and a list in order of use, behind one mutex;
 * entries' bytes are read and written outside it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/crc32c.h"
#include "base/errtext.h"
#include "base/log.h"
#include "base/util.h"
#include "cache_store.h"
#include "dpp/error.h"

#define HDR DPP_CACHE_HEADER_SIZE
#define ENTRY_MAGIC 0x31435044u /* "DPC1" read as a little-endian u32 */
#define ENTRY_VERSION 1u

/* An entry's file image (header, then payload), shared by the RAM tier and
 * the readers holding it, freed with its last reference. The count is
 * atomic so that a reference needs no store: it outlives eviction,
 * replacement and the store's close. */
struct dpp_cache_ref {
    atomic_uint refs;
    size_t len; /* image bytes */
    uint8_t image[];
};
/* malloc aligns image to 16 at this offset, and the header is a multiple
 * of 8: callers parse the payload's blocks in place. */
_Static_assert(offsetof(struct dpp_cache_ref, image) % 16 == 0 && HDR % 8 == 0,
               "payloads must be 8-byte aligned");

/* An entry of one tier; a key in both tiers has a node in each. */
typedef struct node {
    dpp_cache_key_t key;
    struct node *hnext;       /* in its bucket */
    struct node *prev, *next; /* in order of use, most recent first */
    uint64_t bytes;           /* image (RAM) or file (disk) bytes */
    uint64_t seq;             /* disk: which write of the key the file is */
    dpp_cache_ref_t *ram;     /* RAM: the tier's reference */
} node_t;

typedef struct tier {
    node_t **buckets; /* [nbuckets], a power of two, grown with n */
    size_t nbuckets, n;
    node_t *head, *tail;
    uint64_t bytes, bound;
    dpp_cache_tier_stats_t st; /* counters; entries and bytes filled in by stats */
} tier_t;

struct dpp_cache_store {
    pthread_mutex_t mu;
    tier_t ram, disk;
    int has_ram, has_disk;
    char *dir;
    int lock_fd; /* dir/lock, flock'd: one store a dir */
    uint64_t damaged, write_errors, version, seq;
    int warned_write;
};

/* ---- the entry format ----------------------------------------------------- */

static void write_header(uint8_t *h, const dpp_cache_key_t *key, const uint8_t *payload, size_t len)
{
    dpp_store_le32(h, ENTRY_MAGIC);
    dpp_store_le32(h + 4, ENTRY_VERSION);
    dpp_store_le64(h + 8, key->hi);
    dpp_store_le64(h + 16, key->lo);
    dpp_store_le64(h + 24, len);
    dpp_store_le32(h + 32, dpp_crc32c(0, payload, len));
    dpp_store_le32(h + 36, dpp_crc32c(0, h, 36));
}

/* The header in h[0..have) alone: 0 with *key and the payload length
 * *len, or DPP_ECORRUPT. */
static int parse_header(const uint8_t *h, size_t have, dpp_cache_key_t *key, uint64_t *len,
                        char *err, size_t errlen)
{
    if (have < HDR)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "%zu bytes, shorter than an entry's header",
                        have);
    if (dpp_load_le32(h) != ENTRY_MAGIC || dpp_load_le32(h + 4) != ENTRY_VERSION)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "not a cache entry of version %u",
                        ENTRY_VERSION);
    if (dpp_load_le32(h + 36) != dpp_crc32c(0, h, 36))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "header checksum mismatch");
    key->hi = dpp_load_le64(h + 8);
    key->lo = dpp_load_le64(h + 16);
    *len = dpp_load_le64(h + 24);
    if (*len > DPP_CACHE_MAX_PAYLOAD)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "payload of %" PRIu64 " bytes, over the limit",
                        *len);
    return 0;
}

int dpp_cache_entry_parse(const uint8_t *buf, size_t len, dpp_cache_key_t *key,
                          const uint8_t **payload, size_t *payload_len, char *err, size_t errlen)
{
    uint64_t n = 0;
    int rc = parse_header(buf, len, key, &n, err, errlen);
    if (rc)
        return rc;
    if (n != len - HDR)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "the header says %" PRIu64 " payload bytes, the entry has %zu", n,
                        len - HDR);
    if (dpp_load_le32(buf + 32) != dpp_crc32c(0, buf + HDR, (size_t)n))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "payload checksum mismatch");
    *payload = buf + HDR;
    *payload_len = (size_t)n;
    return 0;
}

/* ---- references ------------------------------------------------------------ */

static dpp_cache_ref_t *ref_new(size_t len)
{
    dpp_cache_ref_t *r = malloc(sizeof *r + len);
    if (r) {
        atomic_init(&r->refs, 1);
        r->len = len;
    }
    return r;
}

const uint8_t *dpp_cache_ref_data(const dpp_cache_ref_t *ref, size_t *len)
{
    *len = ref->len - HDR;
    return ref->image + HDR;
}

void dpp_cache_ref_put(dpp_cache_ref_t *ref)
{
    if (ref && atomic_fetch_sub(&ref->refs, 1) == 1)
        free(ref);
}

/* ---- a tier: hash table and order of use ------------------------------------ */

static size_t slot(const dpp_cache_key_t *k, size_t nbuckets)
{
    return (size_t)(k->lo ^ k->hi) & (nbuckets - 1); /* keys are hashes already */
}

static node_t *tier_find(const tier_t *t, const dpp_cache_key_t *k)
{
    if (t->nbuckets == 0)
        return NULL;
    for (node_t *n = t->buckets[slot(k, t->nbuckets)]; n; n = n->hnext)
        if (n->key.lo == k->lo && n->key.hi == k->hi)
            return n;
    return NULL;
}

static void list_unlink(tier_t *t, node_t *n)
{
    *(n->prev ? &n->prev->next : &t->head) = n->next;
    *(n->next ? &n->next->prev : &t->tail) = n->prev;
    n->prev = n->next = NULL;
}

static void list_front(tier_t *t, node_t *n)
{
    n->prev = NULL;
    n->next = t->head;
    *(t->head ? &t->head->prev : &t->tail) = n;
    t->head = n;
}

static void tier_touch(tier_t *t, node_t *n)
{
    list_unlink(t, n);
    list_front(t, n);
}

/* Adds n (its key not in t) as the most recently used. */
static void tier_insert(tier_t *t, node_t *n)
{
    if (t->n >= t->nbuckets) {
        size_t nb = t->nbuckets ? 2 * t->nbuckets : 256;
        node_t **b = dpp_xcalloc(nb, sizeof *b);
        for (size_t i = 0; i < t->nbuckets; i++)
            for (node_t *x = t->buckets[i], *next; x; x = next) {
                next = x->hnext;
                x->hnext = b[slot(&x->key, nb)];
                b[slot(&x->key, nb)] = x;
            }
        free(t->buckets);
        t->buckets = b;
        t->nbuckets = nb;
    }
    node_t **head = &t->buckets[slot(&n->key, t->nbuckets)];
    n->hnext = *head;
    *head = n;
    list_front(t, n);
    t->n++;
    t->bytes += n->bytes;
    t->st.insertions++;
}

/* Takes n out of t (not freed). */
static void tier_remove(tier_t *t, node_t *n)
{
    node_t **pp = &t->buckets[slot(&n->key, t->nbuckets)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    list_unlink(t, n);
    t->n--;
    t->bytes -= n->bytes;
}

static void tier_free(tier_t *t)
{
    for (node_t *n = t->head, *next; n; n = next) {
        next = n->next;
        dpp_cache_ref_put(n->ram);
        free(n);
    }
    free(t->buckets);
}

/* ---- the index and the files -------------------------------------------------- */

static char *entry_path(const dpp_cache_store_t *s, const dpp_cache_key_t *k, char *out)
{
    snprintf(out, PATH_MAX, "%s/%02x/%016" PRIx64 "%016" PRIx64 ".dpc", s->dir,
             (unsigned)(k->hi >> 56), k->hi, k->lo);
    return out;
}

static int held(const dpp_cache_store_t *s, const dpp_cache_key_t *k)
{
    return tier_find(&s->ram, k) || tier_find(&s->disk, k);
}

/* Takes n out of t and frees it: the RAM tier's reference is given back,
 * the disk tier's file deleted. Under the lock, as is every rename into
 * place, so that the folders always match the index: an unlink after
 * unlocking could delete the file a concurrent put has just renamed over
 * the same name. A reader that opened the file still reads it whole. */
static void drop(dpp_cache_store_t *s, tier_t *t, node_t *n)
{
    char path[PATH_MAX];
    tier_remove(t, n);
    if (t == &s->disk)
        unlink(entry_path(s, &n->key, path));
    dpp_cache_ref_put(n->ram);
    free(n);
}

/* Makes room for need more bytes in t, least recently used first. Under
 * the lock. */
static void evict(dpp_cache_store_t *s, tier_t *t, uint64_t need)
{
    while (t->tail && t->bytes + need > t->bound) {
        dpp_cache_key_t k = t->tail->key;
        drop(s, t, t->tail);
        t->st.evictions++;
        if (!held(s, &k))
            s->version++;
    }
}

/* Makes r the RAM tier's image of key (not in the tier; r fits its bound),
 * with a reference of the tier's own. Under the lock. */
static void ram_insert(dpp_cache_store_t *s, const dpp_cache_key_t *key, dpp_cache_ref_t *r)
{
    evict(s, &s->ram, r->len);
    node_t *n = dpp_xcalloc(1, sizeof *n);
    n->key = *key;
    n->bytes = r->len;
    n->ram = r;
    atomic_fetch_add(&r->refs, 1);
    tier_insert(&s->ram, n);
}

/* Writes image[0..len) to a new temporary file in key's folder, its path
 * into tmp (PATH_MAX bytes). Returns 0 or -errno, leaving no file. */
static int write_tmp(const dpp_cache_store_t *s, const dpp_cache_key_t *key, const uint8_t *image,
                     size_t len, char *tmp)
{
    snprintf(tmp, PATH_MAX, "%s/%02x/.tmp-XXXXXX", s->dir, (unsigned)(key->hi >> 56));
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        ssize_t n = write(fd, image + at, len - at);
        if (n > 0)
            at += (size_t)n;
        else if (n == 0 || errno != EINTR)
            rc = n == 0 ? -EIO : -errno;
    }
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

/* Reads key's file whole into a new reference and checks it; its size must
 * be want, the index's. Returns 0 (the file's mtime set to now: its use,
 * for the order after a restart), -ENOENT (no file), DPP_ECORRUPT with the
 * reason in why, -ENOMEM, or another -errno (unreadable for now). */
static int read_entry(const dpp_cache_store_t *s, const dpp_cache_key_t *key, uint64_t want,
                      dpp_cache_ref_t **out, char *why, size_t whylen)
{
    char path[PATH_MAX];
    int fd = open(entry_path(s, key, path), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    dpp_cache_ref_t *r = NULL;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if ((uint64_t)st.st_size != want)
        rc = dpp_errf(DPP_ECORRUPT, why, whylen, "%jd bytes, the index says %" PRIu64,
                      (intmax_t)st.st_size, want);
    else if ((r = ref_new((size_t)want)) == NULL)
        rc = -ENOMEM;
    for (size_t at = 0; rc == 0 && at < want;) {
        ssize_t n = pread(fd, r->image + at, (size_t)want - at, (off_t)at);
        if (n > 0)
            at += (size_t)n;
        else if (n == 0 || errno == EIO)
            rc = dpp_errf(DPP_ECORRUPT, why, whylen, "%s at byte %zu", n ? "I/O error" : "cut", at);
        else if (errno != EINTR)
            rc = -errno;
    }
    dpp_cache_key_t k;
    const uint8_t *p;
    size_t plen;
    if (rc == 0 &&
        (rc = dpp_cache_entry_parse(r->image, r->len, &k, &p, &plen, why, whylen)) == 0 &&
        (k.hi != key->hi || k.lo != key->lo))
        rc = dpp_errf(DPP_ECORRUPT, why, whylen, "the header holds another key");
    if (rc == 0)
        futimens(fd, NULL);
    close(fd);
    if (rc) {
        dpp_cache_ref_put(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* ---- open: the scan ------------------------------------------------------------ */

typedef struct found {
    int64_t mtime_ns;
    node_t *node;
} found_t;

static int by_mtime(const void *a, const void *b)
{
    int64_t x = ((const found_t *)a)->mtime_ns, y = ((const found_t *)b)->mtime_ns;
    return (x > y) - (x < y);
}

/* The key an entry file's name spells (32 lowercase hex digits and
 * ".dpc"): 0, or -1 for another name. */
static int name_key(const char *name, dpp_cache_key_t *k)
{
    if (strlen(name) != 36 || strcmp(name + 32, ".dpc") != 0)
        return -1;
    uint64_t half[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        int c = name[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        half[i / 16] = half[i / 16] << 4 | (unsigned)v;
    }
    *k = (dpp_cache_key_t){half[0], half[1]};
    return 0;
}

/* Indexes the entry files of folder f into *found, deleting leftover
 * temporary files and entries whose header or name is wrong. Payloads are
 * checked when read: checking them here would read the whole cache at each
 * start. Names not ours are left alone. */
static void scan_folder(dpp_cache_store_t *s, unsigned f, found_t **found, size_t *n, size_t *cap)
{
    char folder[PATH_MAX], path[PATH_MAX];
    snprintf(folder, sizeof folder, "%s/%02x", s->dir, f);
    DIR *d = opendir(folder);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        dpp_cache_key_t named, key;
        int tmp = strncmp(e->d_name, ".tmp-", 5) == 0;
        if ((!tmp && name_key(e->d_name, &named) != 0) ||
            snprintf(path, sizeof path, "%s/%s", folder, e->d_name) >= (int)sizeof path)
            continue;
        uint8_t h[HDR];
        struct stat st;
        uint64_t len = 0;
        char why[96];
        int fd = tmp ? -1 : open(path, O_RDONLY | O_CLOEXEC);
        int ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                 pread(fd, h, HDR, 0) == HDR &&
                 parse_header(h, HDR, &key, &len, why, sizeof why) == 0 &&
                 len == (uint64_t)st.st_size - HDR && key.hi == named.hi && key.lo == named.lo &&
                 key.hi >> 56 == f;
        if (fd >= 0)
            close(fd);
        if (!ok) {
            unlink(path); /* a worker stopped while writing it; or damaged */
            s->damaged += !tmp;
            continue;
        }
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 1024;
            *found = dpp_xrealloc(*found, *cap * sizeof **found);
        }
        node_t *node = dpp_xcalloc(1, sizeof *node);
        node->key = key;
        node->bytes = (uint64_t)st.st_size;
        node->seq = ++s->seq;
        (*found)[(*n)++] =
            (found_t){(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, node};
    }
    closedir(d);
}

/* mkdir -p of path (changed and restored on the way). Returns 0 or -errno. */
static int make_dirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        int rc = mkdir(path, 0750) != 0 && errno != EEXIST ? -errno : 0;
        *p = c;
        if (rc || c == '\0')
            return rc;
    }
}

static int open_dir(dpp_cache_store_t *s, char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat st;
    int rc;
    if (s->dir[0] == '\0' || strlen(s->dir) + 48 > PATH_MAX)
        return dpp_errf(-ENAMETOOLONG, err, errlen, "cache dir \"%.64s...\": %s", s->dir,
                        s->dir[0] ? "path too long" : "empty path");
    if ((rc = make_dirs(s->dir)) != 0 || (rc = stat(s->dir, &st) != 0 ? -errno : 0) != 0 ||
        (rc = S_ISDIR(st.st_mode) ? 0 : -ENOTDIR) != 0)
        return dpp_errf(rc, err, errlen, "cache dir %s: %s", s->dir, strerror(-rc));
    snprintf(path, sizeof path, "%s/lock", s->dir);
    if ((s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) < 0)
        return dpp_errf(-errno, err, errlen, "cache dir %s: %s", s->dir, strerror(errno));
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return errno == EWOULDBLOCK
                   ? dpp_errf(-EBUSY, err, errlen,
                              "cache dir %s: in use by another worker (each needs its own)", s->dir)
                   : dpp_errf(-errno, err, errlen, "cache dir %s: lock: %s", s->dir,
                              strerror(errno));
    found_t *found = NULL;
    size_t n = 0, cap = 0;
    for (unsigned f = 0; f < 256 && rc == 0; f++) {
        snprintf(path, sizeof path, "%s/%02x", s->dir, f);
        if (mkdir(path, 0750) != 0 && errno != EEXIST)
            rc = dpp_errf(-errno, err, errlen, "cache dir %s: folder %02x: %s", s->dir, f,
                          strerror(errno));
        else
            scan_folder(s, f, &found, &n, &cap);
    }
    /* oldest first, each then made the most recently used */
    if (rc == 0 && n > 0)
        qsort(found, n, sizeof *found, by_mtime);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            tier_insert(&s->disk, found[i].node);
        else
            free(found[i].node);
    }
    free(found);
    if (rc)
        return rc;
    s->disk.st.insertions = 0; /* found, not stored */
    evict(s, &s->disk, 0);     /* the bound may be smaller than last time */
    DPP_INFO("cache_opened dir=%s entries=%zu bytes=%" PRIu64 " bound=%" PRIu64
             " damaged_removed=%" PRIu64,
             s->dir, s->disk.n, s->disk.bytes, s->disk.bound, s->damaged);
    return 0;
}

/* ---- the store ----------------------------------------------------------------- */

int dpp_cache_store_open(dpp_cache_store_t **out, const dpp_cache_store_config_t *cfg, char *err,
                         size_t errlen)
{
    dpp_cache_store_t *s = dpp_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->lock_fd = -1;
    s->has_ram = cfg->ram_bytes > 0;
    s->ram.bound = cfg->ram_bytes;
    int rc = 0;
    if (cfg->dir) {
        s->has_disk = 1;
        s->disk.bound = cfg->disk_bytes;
        s->dir = dpp_xstrdup(cfg->dir);
        rc = open_dir(s, err, errlen);
    }
    if (rc) {
        dpp_cache_store_close(s);
        s = NULL;
    }
    *out = s;
    return rc;
}

void dpp_cache_store_close(dpp_cache_store_t *s)
{
    if (s == NULL)
        return;
    tier_free(&s->ram);
    tier_free(&s->disk);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    pthread_mutex_destroy(&s->mu);
    free(s->dir);
    free(s);
}

int dpp_cache_store_get(dpp_cache_store_t *s, const dpp_cache_key_t *key, dpp_cache_ref_t **ref,
                        int *tier)
{
    char path[PATH_MAX];
    *ref = NULL;
    pthread_mutex_lock(&s->mu);
    node_t *r = tier_find(&s->ram, key), *d = tier_find(&s->disk, key);
    if (d) /* a RAM hit is a use too: the disk copy must not age meanwhile */
        tier_touch(&s->disk, d);
    if (r) {
        tier_touch(&s->ram, r);
        atomic_fetch_add(&r->ram->refs, 1);
        *ref = r->ram;
        *tier = 0;
        s->ram.st.hits++;
        s->ram.st.bytes_served += r->bytes - HDR;
        pthread_mutex_unlock(&s->mu);
        if (d) /* its use, for the order after a restart */
            utimensat(AT_FDCWD, entry_path(s, key, path), NULL, 0);
        return 0;
    }
    s->ram.st.misses += s->has_ram;
    if (d == NULL) {
        s->disk.st.misses += s->has_disk;
        pthread_mutex_unlock(&s->mu);
        return -ENOENT;
    }
    uint64_t want = d->bytes, seq = d->seq;
    pthread_mutex_unlock(&s->mu);

    dpp_cache_ref_t *img = NULL;
    char why[128];
    int rc = read_entry(s, key, want, &img, why, sizeof why);
    pthread_mutex_lock(&s->mu);
    /* Unchanged while unlocked (no put, remove or eviction of key): the
     * file read is the one the index knows. Otherwise a failure is not the
     * entry's, and a success may be older than what the key holds now: it
     * is served (it was current when looked up) but not promoted. */
    d = tier_find(&s->disk, key);
    int same = d && d->seq == seq;
    if (rc == 0) {
        s->disk.st.hits++;
        s->disk.st.bytes_served += img->len - HDR;
        if (same && s->has_ram && img->len <= s->ram.bound && !tier_find(&s->ram, key))
            ram_insert(s, key, img);
    } else {
        s->disk.st.misses++;
        if (same && (rc == -ENOENT || rc == DPP_ECORRUPT)) {
            s->damaged += rc == DPP_ECORRUPT;
            drop(s, &s->disk, d);
            if (!held(s, key))
                s->version++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == DPP_ECORRUPT && same)
        DPP_WARN("cache_entry_damaged file=%s reason=\"%s\" action=\"deleted: a miss\"",
                 entry_path(s, key, path), why);
    if (rc)
        return rc == -ENOMEM ? rc : -ENOENT;
    *ref = img;
    *tier = 1;
    return 0;
}

dpp_cache_ref_t *dpp_cache_ref_new(size_t len)
{
    return len <= SIZE_MAX - HDR - sizeof(dpp_cache_ref_t) ? ref_new(HDR + len) : NULL;
}

uint8_t *dpp_cache_ref_payload(dpp_cache_ref_t *ref)
{
    return ref->image + HDR;
}

int dpp_cache_store_put(dpp_cache_store_t *s, const dpp_cache_key_t *key, const uint8_t *data,
                        size_t len)
{
    dpp_cache_ref_t *r = dpp_cache_ref_new(len);
    if (r == NULL)
        return -ENOMEM;
    memcpy(r->image + HDR, data, len);
    dpp_cache_store_put_ref(s, key, r);
    dpp_cache_ref_put(r);
    return 0;
}

void dpp_cache_store_put_ref(dpp_cache_store_t *s, const dpp_cache_key_t *key,
                             dpp_cache_ref_t *r)
{
    size_t len = r->len - HDR;
    int fits = len <= DPP_CACHE_MAX_PAYLOAD;
    size_t image = r->len;
    int ram = fits && s->has_ram && image <= s->ram.bound;
    int disk = fits && s->has_disk && image <= s->disk.bound;
    char tmp[PATH_MAX], path[PATH_MAX];
    int wrc = 0, warn = 0;
    if (ram || disk) {
        write_header(r->image, key, r->image + HDR, len);
        if (disk)
            wrc = write_tmp(s, key, r->image, image, tmp);
    }

    pthread_mutex_lock(&s->mu);
    int was = held(s, key);
    /* what key held is stale in every tier, also where the new entry does not go */
    node_t *n = tier_find(&s->ram, key);
    if (n)
        drop(s, &s->ram, n);
    if (ram)
        ram_insert(s, key, r);
    n = tier_find(&s->disk, key);
    if (disk && wrc == 0) {
        if (n) { /* its file stays until the rename replaces it: readers never miss it */
            tier_remove(&s->disk, n);
            free(n);
        }
        evict(s, &s->disk, image);
        if (rename(tmp, entry_path(s, key, path)) == 0) {
            n = dpp_xcalloc(1, sizeof *n);
            n->key = *key;
            n->bytes = image;
            n->seq = ++s->seq;
            tier_insert(&s->disk, n);
        } else {
            wrc = -errno;
            unlink(tmp);
            unlink(path);
        }
    } else if (n) {
        drop(s, &s->disk, n);
    }
    if (disk && wrc) {
        s->write_errors++;
        warn = !s->warned_write;
        s->warned_write = 1;
    }
    if (was != held(s, key))
        s->version++;
    pthread_mutex_unlock(&s->mu);
    if (warn)
        DPP_WARN("cache_write_failed dir=%s error=\"%s\" effect=\"entries not kept on disk "
                 "(counted in dpp_cache_write_errors_total); this warning is not repeated\"",
                 s->dir, dpp_strerror(wrc));
}

void dpp_cache_store_remove(dpp_cache_store_t *s, const dpp_cache_key_t *key)
{
    pthread_mutex_lock(&s->mu);
    node_t *n;
    int was = held(s, key);
    if ((n = tier_find(&s->ram, key)) != NULL)
        drop(s, &s->ram, n);
    if ((n = tier_find(&s->disk, key)) != NULL)
        drop(s, &s->disk, n);
    s->version += was;
    pthread_mutex_unlock(&s->mu);
}

void dpp_cache_store_stats(dpp_cache_store_t *s, dpp_cache_store_stats_t *out)
{
    pthread_mutex_lock(&s->mu);
    out->ram = s->ram.st;
    out->ram.entries = s->ram.n;
    out->ram.bytes = s->ram.bytes;
    out->disk = s->disk.st;
    out->disk.entries = s->disk.n;
    out->disk.bytes = s->disk.bytes;
    out->damaged = s->damaged;
    out->write_errors = s->write_errors;
    pthread_mutex_unlock(&s->mu);
}

size_t dpp_cache_store_keys(dpp_cache_store_t *s, uint64_t *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (node_t *x = s->ram.head; x; x = x->next, n++)
        if (n < max)
            out[n] = x->key.lo;
    for (node_t *x = s->disk.head; x; x = x->next) {
        if (tier_find(&s->ram, &x->key))
            continue;
        if (n < max)
            out[n] = x->key.lo;
        n++;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

uint64_t dpp_cache_store_version(dpp_cache_store_t *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t v = s->version;
    pthread_mutex_unlock(&s->mu);
    return v;
}
