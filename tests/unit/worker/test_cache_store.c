// SPDX-License-Identifier: Apache-2.0
// The worker's cache store: both tiers' round trips and least-recently-used
// eviction within their bounds, a restart that finds the disk entries (and
// their order) again, damaged entries (a flipped payload byte, a truncated
// file, a garbage header, a misnamed file) that are misses and deleted,
// leftover temporary files removed, references that outlive eviction,
// replacement in every tier, the key set for the master, a write that
// fails, the dir's lock, and four threads at once.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dpp/error.h"
#include "test_tmpdir.h"
#include "worker/cache_store.h"

#define PLEN (PATH_MAX + 64) /* a path under dir */
#define IMG(len) ((uint64_t)(len) + DPP_CACHE_HEADER_SIZE)

static char dir[PATH_MAX];

static dpp_cache_key_t key(uint64_t i)
{
    /* keys spread over the 256 folders, low halves distinct */
    return (dpp_cache_key_t){i * UINT64_C(0x9E3779B97F4A7C15), i + 1};
}

/* An entry's payload: len bytes that tell which key and length made them. */
static void fill(uint8_t *buf, size_t len, uint64_t i)
{
    for (size_t k = 0; k < len; k++)
        buf[k] = (uint8_t)(i * 31 + len * 13 + k * 7);
}

static dpp_cache_store_t *open_store(size_t ram, const char *d, uint64_t disk)
{
    dpp_cache_store_config_t cfg = {.ram_bytes = ram, .dir = d, .disk_bytes = disk};
    dpp_cache_store_t *s = NULL;
    char err[256];
    int rc = dpp_cache_store_open(&s, &cfg, err, sizeof err);
    if (rc)
        fail_msg("open: %s", err);
    return s;
}

static int put_rc(dpp_cache_store_t *s, uint64_t i, size_t len)
{
    uint8_t *b = malloc(len ? len : 1);
    fill(b, len, i);
    dpp_cache_key_t k = key(i);
    int rc = dpp_cache_store_put(s, &k, b, len);
    free(b);
    return rc;
}

static void put(dpp_cache_store_t *s, uint64_t i, size_t len)
{
    assert_int_equal(put_rc(s, i, len), 0);
}

/* Looks i up: the tier it came from (0 RAM, 1 disk), -1 on a miss, -2 when
 * the bytes are not what key i with len (0: any length) was stored with. */
static int lookup(dpp_cache_store_t *s, uint64_t i, size_t len)
{
    dpp_cache_key_t k = key(i);
    dpp_cache_ref_t *ref;
    int tier = -3;
    int rc = dpp_cache_store_get(s, &k, &ref, &tier);
    if (rc == -ENOENT)
        return -1;
    if (rc != 0)
        return -2;
    size_t n;
    const uint8_t *p = dpp_cache_ref_data(ref, &n);
    uint8_t *want = malloc(n ? n : 1);
    fill(want, n, i);
    if ((len && n != len) || (uintptr_t)p % 8 != 0 || memcmp(p, want, n) != 0)
        tier = -2;
    free(want);
    dpp_cache_ref_put(ref);
    return tier;
}

static char *entry_file(uint64_t i, char *out)
{
    dpp_cache_key_t k = key(i);
    snprintf(out, PLEN, "%s/%02x/%016llx%016llx.dpc", dir, (unsigned)(k.hi >> 56),
             (unsigned long long)k.hi, (unsigned long long)k.lo);
    return out;
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* What the folders hold: entry files, their bytes, temporary files. */
static void count_files(size_t *entries, uint64_t *bytes, size_t *tmps)
{
    *entries = *tmps = 0;
    *bytes = 0;
    for (unsigned f = 0; f < 256; f++) {
        char folder[PATH_MAX + 8], path[PATH_MAX + 300];
        snprintf(folder, sizeof folder, "%s/%02x", dir, f);
        DIR *d = opendir(folder);
        assert_non_null(d);
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
            if (strncmp(e->d_name, ".tmp-", 5) == 0)
                (*tmps)++;
            else if (strstr(e->d_name, ".dpc") && stat(path, &st) == 0) {
                (*entries)++;
                *bytes += (uint64_t)st.st_size;
            }
        }
        closedir(d);
    }
}

static void write_file(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    fclose(f);
}

static void set_mtime(const char *path, time_t sec)
{
    struct timespec t[2] = {{.tv_sec = sec}, {.tv_sec = sec}};
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(dir, "cache");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(dir);
}

static void test_ram_lru(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(10 * IMG(1000), NULL, 0);
    for (uint64_t i = 0; i < 10; i++)
        put(s, i, 1000);
    assert_int_equal(lookup(s, 0, 1000), 0); /* 0 is now the most recent */
    put(s, 10, 1000);                        /* evicts 1, the least recent */
    assert_int_equal(lookup(s, 1, 1000), -1);
    assert_int_equal(lookup(s, 0, 1000), 0);
    for (uint64_t i = 2; i <= 10; i++)
        assert_int_equal(lookup(s, i, 1000), 0);
    put(s, 11, 2500); /* needs three: 0, 2 and 3 are the least recent now */
    assert_int_equal(lookup(s, 0, 1000), -1);
    assert_int_equal(lookup(s, 2, 1000), -1);
    assert_int_equal(lookup(s, 3, 1000), -1);
    assert_int_equal(lookup(s, 4, 1000), 0);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.ram.entries, 8);
    assert_int_equal(st.ram.bytes, 7 * IMG(1000) + IMG(2500));
    assert_true(st.ram.bytes <= 10 * IMG(1000));
    assert_int_equal(st.ram.evictions, 4);
    assert_int_equal(st.ram.insertions, 12);
    assert_int_equal(st.ram.misses, 4);
    assert_int_equal(st.ram.bytes_served, 12 * 1000);
    assert_int_equal(st.disk.hits + st.disk.misses + st.disk.entries, 0);
    /* an entry bigger than the tier is not kept, and evicts nothing */
    put(s, 99, 20000);
    assert_int_equal(lookup(s, 99, 0), -1);
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.ram.entries, 8);
    dpp_cache_store_close(s);
}

static void test_references(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(4 * IMG(1000), NULL, 0);
    put(s, 0, 1000);
    dpp_cache_key_t k = key(0);
    dpp_cache_ref_t *evicted, *replaced, *closed;
    int tier;
    assert_int_equal(dpp_cache_store_get(s, &k, &evicted, &tier), 0);
    for (uint64_t i = 1; i < 10; i++)
        put(s, i, 1000);
    assert_int_equal(lookup(s, 0, 1000), -1);
    put(s, 5, 1000);
    k = key(5);
    assert_int_equal(dpp_cache_store_get(s, &k, &replaced, &tier), 0);
    put(s, 5, 300); /* other bytes under the same key */
    assert_int_equal(lookup(s, 5, 300), 0);
    k = key(9);
    assert_int_equal(dpp_cache_store_get(s, &k, &closed, &tier), 0);
    dpp_cache_store_close(s);

    struct {
        dpp_cache_ref_t *ref;
        uint64_t i;
    } held[] = {{evicted, 0}, {replaced, 5}, {closed, 9}};
    uint8_t want[1000];
    for (size_t h = 0; h < 3; h++) {
        size_t n;
        const uint8_t *p = dpp_cache_ref_data(held[h].ref, &n);
        assert_int_equal(n, 1000);
        fill(want, 1000, held[h].i);
        assert_memory_equal(p, want, 1000);
        dpp_cache_ref_put(held[h].ref);
    }
    dpp_cache_ref_put(NULL);
}

static void test_disk_lru(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(0, dir, 8 * IMG(2000));
    for (uint64_t i = 0; i < 8; i++)
        put(s, i, 2000);
    for (int n = 0; n < 3; n++) /* disk only: from disk every time */
        assert_int_equal(lookup(s, 0, 2000), 1);
    put(s, 8, 2000); /* evicts 1: 0 was read since */
    char path[PLEN];
    assert_false(exists(entry_file(1, path)));
    assert_true(exists(entry_file(0, path)));
    assert_int_equal(lookup(s, 1, 2000), -1);
    put(s, 9, 4000); /* evicts 2 and 3 */
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(lookup(s, i, 0), i >= 1 && i <= 3 ? -1 : 1);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 7);
    assert_int_equal(st.disk.bytes, 6 * IMG(2000) + IMG(4000));
    assert_true(st.disk.bytes <= 8 * IMG(2000));
    assert_int_equal(st.disk.evictions, 3);
    assert_int_equal(st.disk.insertions, 10);
    assert_int_equal(st.ram.hits + st.ram.misses + st.ram.entries + st.ram.insertions, 0);
    size_t files, tmps;
    uint64_t bytes;
    count_files(&files, &bytes, &tmps);
    assert_int_equal(files, 7);
    assert_int_equal(bytes, st.disk.bytes);
    assert_int_equal(tmps, 0);
    dpp_cache_store_close(s);
}

static void test_restart(void **state)
{
    (void)state;
    char path[PLEN], other[PLEN];
    dpp_cache_store_t *s = open_store(0, dir, 8 * IMG(2000));
    for (uint64_t i = 0; i < 8; i++)
        put(s, i, 2000);
    dpp_cache_store_close(s);
    /* the order of use the next start sees: 3 the oldest, then 0, 1, ... */
    for (uint64_t i = 0; i < 8; i++)
        set_mtime(entry_file(i, path), 1000000 + (time_t)i);
    set_mtime(entry_file(3, path), 999999);
    /* leftovers: a temporary file; a valid entry under another key's name;
     * a file not ours, left alone */
    snprintf(path, sizeof path, "%s/00/.tmp-AbC123", dir);
    write_file(path, "half an entry", 13);
    dpp_cache_key_t k4 = key(4); /* its folder, another low half */
    snprintf(other, sizeof other, "%s/%02x/%016llx%016llx.dpc", dir, (unsigned)(k4.hi >> 56),
             (unsigned long long)k4.hi, 777ull);
    assert_int_equal(link(entry_file(4, path), other), 0);
    snprintf(path, sizeof path, "%s/7f/README", dir);
    write_file(path, "notes", 5);

    s = open_store(0, dir, 8 * IMG(2000));
    snprintf(path, sizeof path, "%s/00/.tmp-AbC123", dir);
    assert_false(exists(path));
    assert_false(exists(other));
    snprintf(path, sizeof path, "%s/7f/README", dir);
    assert_true(exists(path));
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 8);
    assert_int_equal(st.disk.bytes, 8 * IMG(2000));
    assert_int_equal(st.disk.insertions, 0);
    assert_int_equal(st.damaged, 1); /* the misnamed one */
    put(s, 8, 2000);                 /* evicts 3, the oldest by mtime */
    assert_false(exists(entry_file(3, path)));
    put(s, 9, 2000); /* then 0 */
    assert_int_equal(lookup(s, 0, 2000), -1);
    for (uint64_t i = 1; i < 10; i++)
        assert_int_equal(lookup(s, i, 2000), i == 3 ? -1 : 1);
    dpp_cache_store_close(s);

    /* a smaller bound at the next start evicts at once, the oldest first
     * (set plainly: file times tick coarser than reads come) */
    for (uint64_t i = 1; i < 10; i++)
        if (i != 3)
            set_mtime(entry_file(i, path), 2000000 + (time_t)i);
    s = open_store(0, dir, 3 * IMG(2000));
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 3);
    for (uint64_t i = 1; i < 10; i++)
        assert_int_equal(exists(entry_file(i, path)), i >= 7);
    dpp_cache_store_close(s);
}

static void flip(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x20;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void test_damaged(void **state)
{
    (void)state;
    char path[PLEN];
    dpp_cache_store_t *s = open_store(0, dir, 10 * IMG(3000));
    for (uint64_t i = 0; i < 6; i++)
        put(s, i, 3000);
    flip(entry_file(0, path), DPP_CACHE_HEADER_SIZE + 1234);  /* payload */
    assert_int_equal(truncate(entry_file(1, path), 2000), 0); /* cut */
    uint8_t junk[IMG(3000)];
    memset(junk, 0xA5, sizeof junk);
    write_file(entry_file(2, path), junk, sizeof junk); /* garbage, same size */
    flip(entry_file(3, path), 30);                      /* length: header checksum */
    uint64_t v = dpp_cache_store_version(s);
    for (uint64_t i = 0; i < 4; i++) {
        assert_int_equal(lookup(s, i, 3000), -1);
        assert_false(exists(entry_file(i, path)));
        assert_int_equal(lookup(s, i, 3000), -1); /* a plain miss now */
    }
    assert_true(dpp_cache_store_version(s) != v);
    assert_int_equal(lookup(s, 4, 3000), 1);
    /* a file deleted under the store: a miss, dropped, not damaged */
    assert_int_equal(unlink(entry_file(4, path)), 0);
    assert_int_equal(lookup(s, 4, 3000), -1);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.damaged, 4);
    assert_int_equal(st.disk.entries, 1);
    assert_int_equal(st.disk.bytes, IMG(3000));
    assert_int_equal(st.disk.hits, 1);
    assert_int_equal(st.disk.misses, 9);
    assert_int_equal(dpp_cache_store_keys(s, NULL, 0), 1);
    dpp_cache_store_close(s);

    /* a garbage header found at open */
    flip(entry_file(5, path), 5);
    s = open_store(0, dir, 10 * IMG(3000));
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 0);
    assert_int_equal(st.damaged, 1);
    assert_false(exists(entry_file(5, path)));
    dpp_cache_store_close(s);
}

static void test_parse(void **state)
{
    (void)state;
    char path[PLEN];
    dpp_cache_store_t *s = open_store(0, dir, 1 << 20);
    put(s, 3, 100);
    dpp_cache_store_close(s);
    uint8_t file[512], img[IMG(100)];
    FILE *f = fopen(entry_file(3, path), "r");
    assert_non_null(f);
    assert_int_equal(fread(file, 1, sizeof file, f), sizeof img);
    memcpy(img, file, sizeof img);
    fclose(f);
    assert_memory_equal(img, "DPC1\1\0\0\0", 8);

    dpp_cache_key_t k;
    const uint8_t *p;
    size_t n;
    char err[128];
    assert_int_equal(dpp_cache_entry_parse(img, sizeof img, &k, &p, &n, err, sizeof err), 0);
    assert_true(k.hi == key(3).hi && k.lo == key(3).lo);
    assert_ptr_equal(p, img + DPP_CACHE_HEADER_SIZE);
    assert_int_equal(n, 100);
    assert_int_equal(dpp_cache_entry_parse(img, 10, &k, &p, &n, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "shorter than"));
    assert_int_equal(dpp_cache_entry_parse(img, sizeof img - 1, &k, &p, &n, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "the header says 100"));
    img[sizeof img - 1] ^= 1;
    assert_int_equal(dpp_cache_entry_parse(img, sizeof img, &k, &p, &n, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "payload checksum"));
    img[9] ^= 1; /* the key */
    assert_int_equal(dpp_cache_entry_parse(img, sizeof img, &k, &p, &n, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "header checksum"));
    img[0] = 'X';
    assert_int_equal(dpp_cache_entry_parse(img, sizeof img, &k, &p, &n, NULL, 0), DPP_ECORRUPT);
}

static void test_two_tiers(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(2 * IMG(1000), dir, 20 * IMG(1000));
    for (uint64_t i = 0; i < 5; i++)
        put(s, i, 1000);
    assert_int_equal(lookup(s, 4, 1000), 0); /* still in RAM */
    assert_int_equal(lookup(s, 0, 1000), 1); /* from disk, promoted */
    assert_int_equal(lookup(s, 0, 1000), 0);
    /* bigger than the RAM bound: disk only, every time */
    put(s, 50, 5000);
    assert_int_equal(lookup(s, 50, 5000), 1);
    assert_int_equal(lookup(s, 50, 5000), 1);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.ram.entries, 2);
    assert_int_equal(st.ram.bytes, 2 * IMG(1000));
    assert_int_equal(st.disk.entries, 6);
    assert_int_equal(st.ram.hits, 2);
    assert_int_equal(st.ram.misses, 3);
    assert_int_equal(st.disk.hits, 3);
    assert_int_equal(st.disk.misses, 0);
    assert_int_equal(st.disk.bytes_served, 1000 + 2 * 5000);

    /* replacing: the old bytes are gone from every tier, also from one the
     * new entry does not fit */
    uint64_t v = dpp_cache_store_version(s);
    put(s, 0, 700); /* in both tiers before and after */
    assert_int_equal(lookup(s, 0, 700), 0);
    assert_int_equal(dpp_cache_store_version(s), v); /* the same keys */
    put(s, 0, 3000);                                 /* too big for RAM now */
    assert_int_equal(lookup(s, 0, 3000), 1);
    put(s, 0, 25 * 1000); /* too big for both: the key is gone */
    assert_int_equal(lookup(s, 0, 0), -1);
    assert_true(dpp_cache_store_version(s) != v);
    char path[PLEN];
    assert_false(exists(entry_file(0, path)));
    dpp_cache_store_stats(s, &st);
    size_t files, tmps;
    uint64_t bytes;
    count_files(&files, &bytes, &tmps);
    assert_int_equal(files, st.disk.entries);
    assert_int_equal(bytes, st.disk.bytes);
    dpp_cache_store_close(s);
}

static void test_write_error(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(4 * IMG(1000), dir, 20 * IMG(1000));
    put(s, 77, 1000);
    put(s, 78, 1000);
    /* the folder of 77 becomes a file: permissions would not stop root */
    dpp_cache_key_t k = key(77);
    char folder[PATH_MAX + 8], cmd[2 * PATH_MAX + 64];
    snprintf(folder, sizeof folder, "%s/%02x", dir, (unsigned)(k.hi >> 56));
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && touch '%s'", folder, folder);
    assert_int_equal(system(cmd), 0);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    uint64_t disk_before = st.disk.entries;
    assert_int_equal(put_rc(s, 77, 600), 0); /* never the caller's failure */
    assert_int_equal(put_rc(s, 77, 500), 0);
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.write_errors, 2);
    /* the old version on disk is stale: dropped, never served */
    assert_int_equal(st.disk.entries, disk_before - 1);
    assert_int_equal(lookup(s, 77, 500), 0);
    assert_int_equal(st.damaged, 0);
    assert_int_equal(lookup(s, 78, 1000), 0);
    dpp_cache_store_remove(s, &k);
    assert_int_equal(lookup(s, 77, 0), -1);
    dpp_cache_store_close(s);
    snprintf(cmd, sizeof cmd, "rm -f '%s'", folder);
    assert_int_equal(system(cmd), 0);
}

static int has(const uint64_t *keys, size_t n, uint64_t lo)
{
    for (size_t i = 0; i < n; i++)
        if (keys[i] == lo)
            return 1;
    return 0;
}

static void test_keys(void **state)
{
    (void)state;
    /* two entries fit RAM, four the disk */
    dpp_cache_store_t *s = open_store(2 * IMG(100), dir, 4 * IMG(100));
    uint64_t keys[8], v = dpp_cache_store_version(s);
    assert_int_equal(dpp_cache_store_keys(s, NULL, 0), 0);
    for (uint64_t i = 0; i < 3; i++) { /* 0 leaves RAM for 2, stays on disk */
        put(s, i, 100);
        assert_true(dpp_cache_store_version(s) != v);
        v = dpp_cache_store_version(s);
    }
    assert_int_equal(lookup(s, 0, 100), 1); /* promoted: 1 leaves RAM */
    assert_int_equal(lookup(s, 0, 100), 0);
    put(s, 0, 100); /* a replacement */
    assert_int_equal(dpp_cache_store_version(s), v);
    assert_int_equal(dpp_cache_store_keys(s, keys, 8), 3);
    for (uint64_t i = 0; i < 3; i++)
        assert_true(has(keys, 3, key(i).lo));
    assert_int_equal(dpp_cache_store_keys(s, keys, 2), 3); /* out holds two */
    put(s, 3, 100);
    put(s, 4, 100); /* the disk's oldest, 1, goes; it left RAM before */
    assert_int_equal(dpp_cache_store_keys(s, keys, 8), 4);
    assert_false(has(keys, 4, key(1).lo));
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(lookup(s, i, 100) >= 0, i != 1);
    v = dpp_cache_store_version(s);
    dpp_cache_key_t k = key(2);
    dpp_cache_store_remove(s, &k);
    assert_true(dpp_cache_store_version(s) != v);
    v = dpp_cache_store_version(s);
    dpp_cache_store_remove(s, &k); /* not held: nothing changes */
    assert_int_equal(dpp_cache_store_version(s), v);
    assert_int_equal(dpp_cache_store_keys(s, keys, 8), 3);
    assert_false(has(keys, 3, key(2).lo));
    dpp_cache_store_close(s);
}

static void test_open(void **state)
{
    (void)state;
    char sub[PATH_MAX + 16], err[512];
    dpp_cache_store_t *s = NULL, *t = NULL;
    /* made with its parents */
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    s = open_store(0, sub, 1 << 20);
    snprintf(sub, sizeof sub, "%s/a/b/ff", dir);
    assert_true(exists(sub));
    /* one store a dir */
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    dpp_cache_store_config_t cfg = {.dir = sub, .disk_bytes = 1 << 20};
    assert_int_equal(dpp_cache_store_open(&t, &cfg, err, sizeof err), -EBUSY);
    assert_null(t);
    assert_non_null(strstr(err, sub));
    dpp_cache_store_close(s);
    assert_int_equal(dpp_cache_store_open(&t, &cfg, err, sizeof err), 0);
    dpp_cache_store_close(t);
    /* a file where the dir should be */
    snprintf(sub, sizeof sub, "%s/plain", dir);
    write_file(sub, "x", 1);
    cfg.dir = sub;
    assert_int_equal(dpp_cache_store_open(&t, &cfg, err, sizeof err), -ENOTDIR);
    assert_null(t);
    assert_non_null(strstr(err, sub));
    dpp_cache_store_close(NULL);
}

/* ---- four threads ---------------------------------------------------------- */

#define NKEYS 40
#define RAM_BOUND 8000
#define DISK_BOUND 16000

typedef struct hammer_arg {
    dpp_cache_store_t *s;
    unsigned seed, nkeys;
    size_t len0, step; /* lengths len0 + step * (0..7) */
    uint64_t gets, ram_hits, disk_hits, misses, bad;
} hammer_arg_t;

static atomic_int stop;

static void *hammer(void *p)
{
    hammer_arg_t *a = p;
    while (!atomic_load(&stop)) {
        uint64_t i = (uint64_t)(rand_r(&a->seed) % a->nkeys);
        size_t len =
            a->len0 + (size_t)(rand_r(&a->seed) % 8) * a->step; /* replacements change it */
        int op = rand_r(&a->seed) % 10;
        if (op < 3) {
            a->bad += put_rc(a->s, i, len) != 0;
        } else if (op == 3) {
            dpp_cache_key_t k = key(i);
            dpp_cache_store_remove(a->s, &k);
        } else {
            int t = lookup(a->s, i, 0);
            a->gets++;
            a->ram_hits += t == 0;
            a->disk_hits += t == 1;
            a->misses += t == -1;
            a->bad += t < -1;
        }
    }
    return NULL;
}

/* Runs four hammers on s for ms milliseconds; their counts summed. */
static hammer_arg_t run_hammers(dpp_cache_store_t *s, unsigned nkeys, size_t len0, size_t step,
                                long ms)
{
    pthread_t t[4];
    hammer_arg_t a[4];
    atomic_store(&stop, 0);
    for (int i = 0; i < 4; i++) {
        a[i] = (hammer_arg_t){
            .s = s, .seed = (unsigned)i + 1, .nkeys = nkeys, .len0 = len0, .step = step};
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &a[i]), 0);
    }
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
    atomic_store(&stop, 1);
    hammer_arg_t sum = {0};
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        sum.gets += a[i].gets;
        sum.ram_hits += a[i].ram_hits;
        sum.disk_hits += a[i].disk_hits;
        sum.misses += a[i].misses;
        sum.bad += a[i].bad;
    }
    return sum;
}

static void test_threads(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(RAM_BOUND, dir, DISK_BOUND);
    hammer_arg_t sum = run_hammers(s, NKEYS, 100, 150, 1000);
    assert_int_equal(sum.bad, 0);
    assert_true(sum.gets > 100);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.ram.hits, sum.ram_hits);
    assert_int_equal(st.disk.hits, sum.disk_hits);
    assert_int_equal(st.ram.hits + st.ram.misses, sum.gets);
    assert_int_equal(st.disk.hits + st.disk.misses, st.ram.misses);
    assert_int_equal(st.disk.misses, sum.misses);
    assert_true(sum.ram_hits > 0 && sum.disk_hits > 0 && sum.misses > 0);
    assert_true(st.ram.bytes <= RAM_BOUND);
    assert_true(st.disk.bytes <= DISK_BOUND);
    assert_true(st.ram.evictions > 0 && st.disk.evictions > 0);
    assert_int_equal(st.damaged, 0);
    assert_int_equal(st.write_errors, 0);
    /* the index and the folders agree */
    size_t files, tmps;
    uint64_t bytes;
    count_files(&files, &bytes, &tmps);
    assert_int_equal(files, st.disk.entries);
    assert_int_equal(bytes, st.disk.bytes);
    assert_int_equal(tmps, 0);
    size_t n = dpp_cache_store_keys(s, NULL, 0);
    assert_true(n >= st.ram.entries && n >= st.disk.entries);
    assert_true(n <= st.ram.entries + st.disk.entries);
    /* every key held is served whole, with the bytes of some put of it */
    uint64_t keys[NKEYS];
    assert_int_equal(dpp_cache_store_keys(s, keys, NKEYS), n);
    for (uint64_t i = 0; i < NKEYS; i++)
        assert_int_equal(lookup(s, i, 0) >= 0, has(keys, n, key(i).lo));
    dpp_cache_store_close(s);
    /* and found whole again after a restart */
    s = open_store(0, dir, DISK_BOUND);
    dpp_cache_store_stats_t again;
    dpp_cache_store_stats(s, &again);
    assert_int_equal(again.disk.entries, st.disk.entries);
    assert_int_equal(again.damaged, 0);
    for (uint64_t i = 0; i < NKEYS; i++)
        assert_true(lookup(s, i, 0) >= -1);
    dpp_cache_store_stats(s, &again);
    assert_int_equal(again.damaged, 0);
    dpp_cache_store_close(s);
}

/* Disk only, few keys, large entries replaced by others of other sizes
 * while being read: a file that changed under a reader is a miss, never
 * counted damaged nor deleted, and the index keeps matching the folders. */
static void test_threads_replace(void **state)
{
    (void)state;
    dpp_cache_store_t *s = open_store(0, dir, 64 << 20);
    hammer_arg_t sum = run_hammers(s, 3, 1000, 9000, 500);
    assert_int_equal(sum.bad, 0);
    assert_true(sum.disk_hits > 0);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.damaged, 0);
    assert_int_equal(st.disk.hits, sum.disk_hits);
    size_t files, tmps;
    uint64_t bytes;
    count_files(&files, &bytes, &tmps);
    assert_int_equal(files, st.disk.entries);
    assert_int_equal(bytes, st.disk.bytes);
    uint64_t keys[3];
    size_t n = dpp_cache_store_keys(s, keys, 3);
    assert_int_equal(n, st.disk.entries);
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(lookup(s, i, 0) == 1, has(keys, n, key(i).lo));
    dpp_cache_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ram_lru),
        cmocka_unit_test(test_references),
        cmocka_unit_test_setup_teardown(test_disk_lru, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_tiers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_replace, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
