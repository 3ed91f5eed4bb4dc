/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's store of split outputs (cache_store.h): two tiers, each a
 * hash table of its entries and a list in order of use. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/errtext.h"
#include "base/log.h"
#include "cache_store.h"
#include "dpp/error.h"

#define ENTRY_MAGIC 0x31435044u /* "DPC1" */
#define ENTRY_VERSION 1u

/* An entry's file image in memory (header and payload), shared by the RAM
 * tier and the readers holding it; freed with its last reference. */
struct dpp_cache_ref {
    int refs; /* under the store's lock */
    size_t len;
    dpp_cache_store_t *store;
    uint64_t pad; /* keeps image 16-byte aligned, the payload 8 */
    uint8_t image[];
};

typedef struct node {
    dpp_cache_key_t key;
    struct node *hnext;       /* in its bucket */
    struct node *prev, *next; /* in order of use, most recent first */
    uint64_t bytes;
    dpp_cache_ref_t *ram; /* the RAM tier's image (one reference) */
} node_t;

typedef struct tier {
    node_t **buckets; /* [nbuckets], a power of two */
    size_t nbuckets, n;
    node_t *head, *tail;
    uint64_t bytes, bound;
    dpp_cache_tier_stats_t st;
} tier_t;

struct dpp_cache_store {
    pthread_mutex_t mu;
    tier_t ram, disk;
    int has_ram, has_disk;
    char *dir;
    uint64_t damaged, write_errors, version;
    atomic_uint tmp_seq;
    int warned_write;
};

/* ---- entries' bytes --------------------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* little-endian hosts only, as every dpp format */
}

static void put_le64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static uint32_t get_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The header of an entry of len payload bytes into h[0..40). */
static void write_header(uint8_t *h, const dpp_cache_key_t *key, const uint8_t *payload,
                         size_t len)
{
    put_le32(h, ENTRY_MAGIC);
    put_le32(h + 4, ENTRY_VERSION);
    put_le64(h + 8, key->hi);
    put_le64(h + 16, key->lo);
    put_le64(h + 24, len);
    put_le32(h + 32, dpp_crc32c(0, payload, len));
    put_le32(h + 36, dpp_crc32c(0, h, 36));
}

/* The header alone: 0 with *key and *len, or DPP_ECORRUPT. */
static int parse_header(const uint8_t *h, size_t have, dpp_cache_key_t *key, uint64_t *len,
                        char *err, size_t errlen)
{
    if (have < DPP_CACHE_HEADER_SIZE)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "%zu bytes, shorter than an entry's header",
                        have);
    if (get_le32(h) != ENTRY_MAGIC || get_le32(h + 4) != ENTRY_VERSION)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "not a cache entry of version %u",
                        ENTRY_VERSION);
    if (get_le32(h + 36) != dpp_crc32c(0, h, 36))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "header checksum mismatch");
    key->hi = get_le64(h + 8);
    key->lo = get_le64(h + 16);
    *len = get_le64(h + 24);
    return 0;
}

int dpp_cache_entry_parse(const uint8_t *buf, size_t len, dpp_cache_key_t *key,
                          const uint8_t **payload, size_t *payload_len, char *err, size_t errlen)
{
    uint64_t n = 0;
    int rc = parse_header(buf, len, key, &n, err, errlen);
    if (rc)
        return rc;
    if (n != len - DPP_CACHE_HEADER_SIZE)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "the header says %" PRIu64 " payload bytes, the entry has %zu", n,
                        len - DPP_CACHE_HEADER_SIZE);
    if (get_le32(buf + 32) != dpp_crc32c(0, buf + DPP_CACHE_HEADER_SIZE, (size_t)n))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "payload checksum mismatch");
    *payload = buf + DPP_CACHE_HEADER_SIZE;
    *payload_len = (size_t)n;
    return 0;
}

static dpp_cache_ref_t *ref_new(dpp_cache_store_t *s, size_t len)
{
    dpp_cache_ref_t *r = malloc(sizeof *r + len);
    if (r) {
        r->refs = 1;
        r->len = len;
        r->store = s;
    }
    return r;
}

/* Drops a reference; the caller holds the store's lock. */
static void ref_drop_locked(dpp_cache_ref_t *r)
{
    if (r && --r->refs == 0)
        free(r);
}

const uint8_t *dpp_cache_ref_data(const dpp_cache_ref_t *ref, size_t *len)
{
    *len = ref->len - DPP_CACHE_HEADER_SIZE;
    return ref->image + DPP_CACHE_HEADER_SIZE;
}

void dpp_cache_ref_put(dpp_cache_ref_t *ref)
{
    if (ref == NULL)
        return;
    dpp_cache_store_t *s = ref->store;
    pthread_mutex_lock(&s->mu);
    ref_drop_locked(ref);
    pthread_mutex_unlock(&s->mu);
}

/* ---- a tier: hash table and order of use ------------------------------------ */

static size_t bucket(const tier_t *t, const dpp_cache_key_t *k)
{
    return (size_t)(k->lo ^ (k->hi >> 7)) & (t->nbuckets - 1);
}

static node_t *tier_find(const tier_t *t, const dpp_cache_key_t *k)
{
    if (t->nbuckets == 0)
        return NULL;
    for (node_t *n = t->buckets[bucket(t, k)]; n; n = n->hnext)
        if (n->key.lo == k->lo && n->key.hi == k->hi)
            return n;
    return NULL;
}

static void list_unlink(tier_t *t, node_t *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        t->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        t->tail = n->prev;
    n->prev = n->next = NULL;
}

static void list_front(tier_t *t, node_t *n)
{
    n->prev = NULL;
    n->next = t->head;
    if (t->head)
        t->head->prev = n;
    t->head = n;
    if (t->tail == NULL)
        t->tail = n;
}

static void tier_touch(tier_t *t, node_t *n)
{
    list_unlink(t, n);
    list_front(t, n);
}

/* Adds n (not in t) as the most recent, or at the end (oldest). */
static int tier_insert(tier_t *t, node_t *n, int oldest)
{
    if (t->n >= t->nbuckets) {
        size_t nb = t->nbuckets ? 2 * t->nbuckets : 256;
        node_t **b = calloc(nb, sizeof *b);
        if (b == NULL)
            return -ENOMEM;
        for (size_t i = 0; i < t->nbuckets; i++)
            for (node_t *x = t->buckets[i], *next; x; x = next) {
                next = x->hnext;
                size_t j = (size_t)(x->key.lo ^ (x->key.hi >> 7)) & (nb - 1);
                x->hnext = b[j];
                b[j] = x;
            }
        free(t->buckets);
        t->buckets = b;
        t->nbuckets = nb;
    }
    size_t j = bucket(t, &n->key);
    n->hnext = t->buckets[j];
    t->buckets[j] = n;
    if (oldest) {
        n->next = NULL;
        n->prev = t->tail;
        if (t->tail)
            t->tail->next = n;
        t->tail = n;
        if (t->head == NULL)
            t->head = n;
    } else {
        list_front(t, n);
    }
    t->n++;
    t->bytes += n->bytes;
    t->st.insertions++;
    return 0;
}

/* Takes n out of t (not freed). */
static void tier_remove(tier_t *t, node_t *n)
{
    node_t **pp = &t->buckets[bucket(t, &n->key)];
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
        if (n->ram)
            free(n->ram); /* no reference is left at close */
        free(n);
    }
    free(t->buckets);
    memset(t, 0, sizeof *t);
}

/* ---- files ----------------------------------------------------------------------- */

static void entry_path(const dpp_cache_store_t *s, const dpp_cache_key_t *k, char *out, size_t len)
{
    snprintf(out, len, "%s/%02x/%016" PRIx64 "%016" PRIx64 ".dpc", s->dir,
             (unsigned)(k->hi >> 56), k->hi, k->lo);
}

/* Writes image[0..len) as the entry file of key: a temporary file in the
 * same folder, renamed into place. Returns 0 or -errno. */
static int write_entry(dpp_cache_store_t *s, const dpp_cache_key_t *key, const uint8_t *image,
                       size_t len)
{
    char path[4400], tmp[4400];
    entry_path(s, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/%02x/.tmp-%ld-%u", s->dir, (unsigned)(key->hi >> 56),
             (long)getpid(), atomic_fetch_add(&s->tmp_seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        ssize_t n = write(fd, image + at, len - at);
        if (n < 0 && errno != EINTR)
            rc = -errno;
        else if (n > 0)
            at += (size_t)n;
    }
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

/* Reads the entry file of key whole into a new reference (its size as the
 * index knew it: want). Returns 0, -ENOENT (gone), DPP_ECORRUPT (damaged:
 * the caller deletes it) or -ENOMEM. */
static int read_entry(dpp_cache_store_t *s, const dpp_cache_key_t *key, uint64_t want,
                      dpp_cache_ref_t **out)
{
    char path[4400], why[128];
    entry_path(s, key, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ENOENT : DPP_ECORRUPT;
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != want || want < DPP_CACHE_HEADER_SIZE) {
        close(fd);
        return DPP_ECORRUPT;
    }
    dpp_cache_ref_t *r = ref_new(s, (size_t)want);
    if (r == NULL) {
        close(fd);
        return -ENOMEM;
    }
    size_t at = 0;
    while (at < want) {
        ssize_t n = pread(fd, r->image + at, (size_t)want - at, (off_t)at);
        if (n <= 0 && !(n < 0 && errno == EINTR))
            break;
        if (n > 0)
            at += (size_t)n;
    }
    close(fd);
    dpp_cache_key_t k;
    const uint8_t *payload;
    size_t plen;
    if (at != want ||
        dpp_cache_entry_parse(r->image, at, &k, &payload, &plen, why, sizeof why) != 0 ||
        k.hi != key->hi || k.lo != key->lo) {
        free(r);
        return DPP_ECORRUPT;
    }
    /* its use, for the order after a restart */
    utimensat(AT_FDCWD, path, NULL, 0);
    *out = r;
    return 0;
}

/* Deletes the files of the keys evicted from the disk tier (outside the
 * lock: a reader that opened one still reads it whole). */
static void unlink_keys(dpp_cache_store_t *s, const dpp_cache_key_t *keys, size_t n)
{
    char path[4400];
    for (size_t i = 0; i < n; i++) {
        entry_path(s, &keys[i], path, sizeof path);
        unlink(path);
    }
}

/* ---- eviction -------------------------------------------------------------------- */

/* Makes room for `need` more bytes in tier t (oldest first), sparing
 * `keep`; disk victims' keys go to victims[*nv] (cap of them; any more
 * stay until the next eviction). Caller holds the lock. */
static void evict(dpp_cache_store_t *s, tier_t *t, uint64_t need, const node_t *keep,
                  dpp_cache_key_t *victims, size_t *nv, size_t cap)
{
    while (t->tail && t->bytes + need > t->bound) {
        node_t *n = t->tail;
        if (n == keep)
            break;
        if (t == &s->disk) {
            if (*nv == cap)
                break;
            victims[(*nv)++] = n->key;
        }
        tier_remove(t, n);
        ref_drop_locked(n->ram);
        free(n);
        t->st.evictions++;
        s->version++;
    }
}

/* ---- the store ----------------------------------------------------------------- */

/* Finds the entry files of a folder again (open); damaged headers and
 * leftover temporary files are deleted. */
static void scan_folder(dpp_cache_store_t *s, const char *folder, node_t ***found, size_t *n,
                        size_t *cap, int64_t **stamps)
{
    DIR *d = opendir(folder);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[4200 + 256 + 2];
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        if (strncmp(e->d_name, ".tmp-", 5) == 0) {
            unlink(path); /* a worker stopped while writing it */
            continue;
        }
        size_t l = strlen(e->d_name);
        if (l != 36 || strcmp(e->d_name + 32, ".dpc") != 0)
            continue;
        uint8_t h[DPP_CACHE_HEADER_SIZE];
        struct stat st;
        dpp_cache_key_t key;
        uint64_t len = 0;
        char why[96];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int ok = fd >= 0 && fstat(fd, &st) == 0 &&
                 pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
                 parse_header(h, sizeof h, &key, &len, why, sizeof why) == 0 &&
                 len == (uint64_t)st.st_size - DPP_CACHE_HEADER_SIZE;
        if (fd >= 0)
            close(fd);
        node_t *node = ok ? calloc(1, sizeof *node) : NULL;
        if (ok && *n == *cap) {
            size_t c = *cap ? 2 * *cap : 1024;
            node_t **f = realloc(*found, c * sizeof *f);
            int64_t *t = realloc(*stamps, c * sizeof *t);
            if (f)
                *found = f;
            if (t)
                *stamps = t;
            if (f && t)
                *cap = c;
        }
        if (node == NULL || *n == *cap) {
            free(node);
            if (!ok) {
                unlink(path);
                s->damaged++;
            }
            continue;
        }
        node->key = key;
        node->bytes = (uint64_t)st.st_size;
        (*stamps)[*n] = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        (*found)[(*n)++] = node;
    }
    closedir(d);
}

int dpp_cache_store_open(dpp_cache_store_t **out, const dpp_cache_store_config_t *cfg, char *err,
                         size_t errlen)
{
    *out = NULL;
    dpp_cache_store_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "cache: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->has_ram = cfg->ram_bytes > 0;
    s->ram.bound = cfg->ram_bytes;
    if (cfg->dir == NULL) {
        *out = s;
        return 0;
    }
    s->has_disk = 1;
    s->disk.bound = cfg->disk_bytes;
    if ((s->dir = strdup(cfg->dir)) == NULL) {
        dpp_cache_store_close(s);
        return dpp_errf(-ENOMEM, err, errlen, "cache: out of memory");
    }
    if (mkdir(s->dir, 0750) != 0 && errno != EEXIST) {
        int rc = -errno;
        dpp_cache_store_close(s);
        return dpp_errf(rc, err, errlen, "--cache-dir %s: %s", cfg->dir, strerror(-rc));
    }
    node_t **found = NULL;
    int64_t *stamps = NULL;
    size_t n = 0, cap = 0;
    for (unsigned f = 0; f < 256; f++) {
        char folder[4200];
        snprintf(folder, sizeof folder, "%s/%02x", s->dir, f);
        if (mkdir(folder, 0750) != 0 && errno != EEXIST) {
            int rc = -errno;
            for (size_t i = 0; i < n; i++)
                free(found[i]);
            free(found);
            free(stamps);
            dpp_cache_store_close(s);
            return dpp_errf(rc, err, errlen, "--cache-dir %s: folder %02x: %s", cfg->dir, f,
                            strerror(-rc));
        }
        scan_folder(s, folder, &found, &n, &cap, &stamps);
    }
    /* most recently used first: each found entry goes after the ones used
     * later (insertion sort by stamp would be n^2: sort indexes) */
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; order && i < n; i++)
        order[i] = i;
    for (size_t gap = n / 2; order && gap > 0; gap /= 2) /* Shell sort, newest first */
        for (size_t i = gap; i < n; i++)
            for (size_t j = i; j >= gap && stamps[order[j - gap]] < stamps[order[j]]; j -= gap) {
                size_t t = order[j];
                order[j] = order[j - gap];
                order[j - gap] = t;
            }
    for (size_t i = 0; i < n; i++) {
        node_t *node = found[order ? order[i] : i];
        if (tier_insert(&s->disk, node, 1) != 0)
            free(node);
    }
    s->disk.st.insertions = 0;
    free(order);
    free(found);
    free(stamps);
    dpp_cache_key_t victims[256];
    size_t nv;
    do { /* a smaller bound than last time */
        nv = 0;
        evict(s, &s->disk, 0, NULL, victims, &nv, 256);
        unlink_keys(s, victims, nv);
    } while (nv == 256);
    DPP_INFO("cache_opened dir=%s entries=%zu bytes=%" PRIu64 " damaged_removed=%" PRIu64,
             s->dir, s->disk.n, s->disk.bytes, s->damaged);
    *out = s;
    return 0;
}

void dpp_cache_store_close(dpp_cache_store_t *s)
{
    if (s == NULL)
        return;
    tier_free(&s->ram);
    tier_free(&s->disk);
    pthread_mutex_destroy(&s->mu);
    free(s->dir);
    free(s);
}

/* Puts image r into the RAM tier under key (one more reference), making
 * room. Caller holds the lock. */
static void ram_insert_locked(dpp_cache_store_t *s, const dpp_cache_key_t *key,
                              dpp_cache_ref_t *r)
{
    if (!s->has_ram || r->len > s->ram.bound)
        return;
    node_t *old = tier_find(&s->ram, key);
    if (old) {
        tier_remove(&s->ram, old);
        ref_drop_locked(old->ram);
        free(old);
    }
    evict(s, &s->ram, r->len, NULL, NULL, NULL, 0);
    node_t *n = calloc(1, sizeof *n);
    if (n == NULL)
        return;
    n->key = *key;
    n->bytes = r->len;
    n->ram = r;
    r->refs++;
    if (tier_insert(&s->ram, n, 0) != 0) {
        r->refs--;
        free(n);
        return;
    }
    s->version++;
}

int dpp_cache_store_get(dpp_cache_store_t *s, const dpp_cache_key_t *key, dpp_cache_ref_t **ref,
                        int *tier)
{
    *ref = NULL;
    pthread_mutex_lock(&s->mu);
    node_t *n = s->has_ram ? tier_find(&s->ram, key) : NULL;
    if (n) {
        tier_touch(&s->ram, n);
        n->ram->refs++;
        *ref = n->ram;
        *tier = 0;
        s->ram.st.hits++;
        s->ram.st.bytes_served += n->ram->len - DPP_CACHE_HEADER_SIZE;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (s->has_ram)
        s->ram.st.misses++;
    n = s->has_disk ? tier_find(&s->disk, key) : NULL;
    uint64_t want = n ? n->bytes : 0;
    if (n)
        tier_touch(&s->disk, n);
    else if (s->has_disk)
        s->disk.st.misses++;
    pthread_mutex_unlock(&s->mu);
    if (n == NULL)
        return -ENOENT;

    dpp_cache_ref_t *r = NULL;
    int rc = read_entry(s, key, want, &r);
    pthread_mutex_lock(&s->mu);
    if (rc) {
        node_t *gone = tier_find(&s->disk, key);
        if (gone && gone->bytes == want) { /* not replaced meanwhile */
            tier_remove(&s->disk, gone);
            free(gone);
            s->version++;
        }
        s->disk.st.misses++;
        if (rc == DPP_ECORRUPT)
            s->damaged++;
        pthread_mutex_unlock(&s->mu);
        if (rc == DPP_ECORRUPT) {
            DPP_WARN("cache_entry_damaged dir=%s key=%016" PRIx64 "%016" PRIx64
                     " action=\"deleted: a miss\"",
                     s->dir, key->hi, key->lo);
            unlink_keys(s, key, 1);
        }
        return rc == -ENOMEM ? rc : -ENOENT;
    }
    s->disk.st.hits++;
    s->disk.st.bytes_served += r->len - DPP_CACHE_HEADER_SIZE;
    ram_insert_locked(s, key, r);
    pthread_mutex_unlock(&s->mu);
    *ref = r;
    *tier = 1;
    return 0;
}

int dpp_cache_store_put(dpp_cache_store_t *s, const dpp_cache_key_t *key, const uint8_t *data,
                        size_t len)
{
    size_t image = DPP_CACHE_HEADER_SIZE + len;
    int ram = s->has_ram && image <= s->ram.bound;
    int disk = s->has_disk && image <= s->disk.bound;
    if (!ram && !disk)
        return 0;
    dpp_cache_ref_t *r = ref_new(s, image);
    if (r == NULL)
        return -ENOMEM;
    write_header(r->image, key, data, len);
    memcpy(r->image + DPP_CACHE_HEADER_SIZE, data, len);
    int wrc = disk ? write_entry(s, key, r->image, image) : 0;

    dpp_cache_key_t victims[64];
    size_t nv = 0;
    pthread_mutex_lock(&s->mu);
    if (ram)
        ram_insert_locked(s, key, r);
    int warn = 0;
    if (disk && wrc != 0) {
        s->write_errors++;
        warn = !s->warned_write;
        s->warned_write = 1;
    } else if (disk) {
        node_t *old = tier_find(&s->disk, key);
        if (old) {
            tier_remove(&s->disk, old);
            free(old);
        }
        node_t *n = calloc(1, sizeof *n);
        if (n) {
            n->key = *key;
            n->bytes = image;
            evict(s, &s->disk, image, NULL, victims, &nv, 64);
            if (tier_insert(&s->disk, n, 0) != 0)
                free(n);
            s->version++;
        }
    }
    ref_drop_locked(r);
    pthread_mutex_unlock(&s->mu);
    unlink_keys(s, victims, nv);
    if (warn)
        DPP_WARN("cache_write_failed dir=%s error=\"%s\" effect=\"entries not kept on disk (counted "
                 "in dpp_cache_write_errors_total); this warning is not repeated\"",
                 s->dir, dpp_strerror(wrc));
    return 0;
}

void dpp_cache_store_remove(dpp_cache_store_t *s, const dpp_cache_key_t *key)
{
    pthread_mutex_lock(&s->mu);
    node_t *n = tier_find(&s->ram, key);
    if (n) {
        tier_remove(&s->ram, n);
        ref_drop_locked(n->ram);
        free(n);
        s->version++;
    }
    int on_disk = 0;
    if ((n = tier_find(&s->disk, key)) != NULL) {
        tier_remove(&s->disk, n);
        free(n);
        s->version++;
        on_disk = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (on_disk)
        unlink_keys(s, key, 1);
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
