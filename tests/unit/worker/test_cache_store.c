// SPDX-License-Identifier: Apache-2.0
// The worker's cache store: both tiers' round trips and least-recently-used
// eviction within their bounds, a restart that finds the disk entries (and
// their order) again, damaged entries (a flipped payload byte, a truncated
// file, a garbage header) that are misses and deleted, leftover temporary
// files removed, references that outlive eviction, the key set for the
// master, a write that fails, and four threads at once.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
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
#include "worker/cache_store.h"

static char dir[256];

static dpp_cache_key_t key(uint64_t i)
{
    /* keys spread over the 256 folders, low halves distinct */
    return (dpp_cache_key_t){i * UINT64_C(0x9E3779B97F4A7C15), i + 1};
}

/* An entry's payload: len bytes that tell which key and size made them. */
static void fill(uint8_t *buf, size_t len, uint64_t i)
{
    for (size_t k = 0; k < len; k++)
        buf[k] = (uint8_t)(i * 31 + k * 7);
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

static void put(dpp_cache_store_t *s, uint64_t i, size_t len)
{
    uint8_t *b = malloc(len);
    fill(b, len, i);
    assert_int_equal(dpp_cache_store_put(s, &(dpp_cache_key_t){key(i).hi, key(i).lo}, b, len), 0);
    free(b);
}

/* Looks i up: the tier it came from (0 RAM, 1 disk) or -1; checks the bytes. */
static int get(dpp_cache_store_t *s, uint64_t i, size_t len)
{
    dpp_cache_key_t k = key(i);
    dpp_cache_ref_t *ref;
    int tier = -2;
    int rc = dpp_cache_store_get(s, &k, &ref, &tier);
    if (rc == -ENOENT)
        return -1;
    assert_int_equal(rc, 0);
    size_t n;
    const uint8_t *p = dpp_cache_ref_data(ref, &n);
    assert_int_equal(n, len);
    assert_int_equal((uintptr_t)p % 8, 0);
    uint8_t *want = malloc(len);
    fill(want, len, i);
    assert_memory_equal(p, want, len);
    free(want);
    dpp_cache_ref_put(ref);
    return tier;
}

static char *entry_file(uint64_t i, char *out, size_t len)
{
    dpp_cache_key_t k = key(i);
    snprintf(out, len, "%s/%02x/%016llx%016llx.dpc", dir, (unsigned)(k.hi >> 56),
             (unsigned long long)k.hi, (unsigned long long)k.lo);
    return out;
}

static void remove_tree(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dpp-cache-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove_tree();
    return 0;
}

static void test_ram_lru(void **state)
{
    (void)state;
    /* 10 entries of 1,000 payload bytes fit 10,400 bytes of images */
    dpp_cache_store_t *s = open_store(10 * (1000 + DPP_CACHE_HEADER_SIZE), NULL, 0);
    for (uint64_t i = 0; i < 10; i++)
        put(s, i, 1000);
    assert_int_equal(get(s, 0, 1000), 0); /* 0 is now the most recent */
    put(s, 10, 1000);                     /* evicts 1, the least recent */
    assert_int_equal(get(s, 1, 1000), -1);
    assert_int_equal(get(s, 0, 1000), 0);
    assert_int_equal(get(s, 10, 1000), 0);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.ram.entries, 10);
    assert_true(st.ram.bytes <= 10 * (1000 + DPP_CACHE_HEADER_SIZE));
    assert_int_equal(st.ram.evictions, 1);
    assert_int_equal(st.ram.misses, 1);
    /* an entry bigger than the tier is not kept */
    put(s, 99, 20000);
    assert_int_equal(get(s, 99, 20000), -1);
    /* a reference stays valid after its entry is evicted */
    dpp_cache_key_t k = key(0);
    dpp_cache_ref_t *ref;
    int tier;
    assert_int_equal(dpp_cache_store_get(s, &k, &ref, &tier), 0);
    for (uint64_t i = 20; i < 40; i++)
        put(s, i, 1000);
    assert_int_equal(get(s, 0, 1000), -1);
    size_t n;
    const uint8_t *p = dpp_cache_ref_data(ref, &n);
    uint8_t want[1000];
    fill(want, 1000, 0);
    assert_memory_equal(p, want, 1000);
    dpp_cache_ref_put(ref);
    /* replacing a key */
    put(s, 39, 500);
    assert_int_equal(get(s, 39, 500), 0);
    dpp_cache_store_close(s);
}

static void test_disk_and_restart(void **state)
{
    (void)state;
    uint64_t image = 2000 + DPP_CACHE_HEADER_SIZE;
    dpp_cache_store_t *s = open_store(0, dir, 8 * image);
    for (uint64_t i = 0; i < 8; i++)
        put(s, i, 2000);
    assert_int_equal(get(s, 5, 2000), 1); /* disk only: always from disk */
    assert_int_equal(get(s, 5, 2000), 1);
    /* files carry their use: make the order plain to the next open */
    for (uint64_t i = 0; i < 8; i++) {
        char path[512];
        struct timespec t[2] = {{.tv_sec = 1000000 + (time_t)i}, {.tv_sec = 1000000 + (time_t)i}};
        assert_int_equal(utimensat(AT_FDCWD, entry_file(i, path, sizeof path), t, 0), 0);
    }
    dpp_cache_store_close(s);
    /* a leftover temporary file is removed at open */
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/00/.tmp-1-1", dir);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs("half an entry", f);
    fclose(f);
    s = open_store(0, dir, 8 * image);
    assert_int_equal(access(tmp, F_OK), -1);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 8);
    assert_int_equal(st.disk.bytes, 8 * image);
    put(s, 8, 2000); /* evicts 0: its mtime is the oldest */
    assert_int_equal(get(s, 0, 2000), -1);
    assert_int_equal(get(s, 1, 2000), 1);
    char path[512];
    assert_int_equal(access(entry_file(0, path, sizeof path), F_OK), -1); /* file deleted */
    /* the keys the master learns */
    uint64_t keys[16];
    assert_int_equal(dpp_cache_store_keys(s, keys, 16), 8);
    uint64_t v = dpp_cache_store_version(s);
    dpp_cache_store_remove(s, &(dpp_cache_key_t){key(1).hi, key(1).lo});
    assert_true(dpp_cache_store_version(s) != v);
    assert_int_equal(dpp_cache_store_keys(s, keys, 16), 7);
    for (size_t i = 0; i < 7; i++)
        assert_true(keys[i] != key(1).lo && keys[i] != key(0).lo);
    dpp_cache_store_close(s);
    /* a smaller bound at the next start evicts at once */
    s = open_store(0, dir, 3 * image);
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 3);
    dpp_cache_store_close(s);
}

static void corrupt_file(const char *path, long at, int truncate_to)
{
    if (truncate_to >= 0) {
        assert_int_equal(truncate(path, truncate_to), 0);
        return;
    }
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
    uint64_t image = 3000 + DPP_CACHE_HEADER_SIZE;
    dpp_cache_store_t *s = open_store(0, dir, 10 * image);
    for (uint64_t i = 0; i < 4; i++)
        put(s, i, 3000);
    char path[512];
    corrupt_file(entry_file(0, path, sizeof path), DPP_CACHE_HEADER_SIZE + 1234, -1); /* payload */
    corrupt_file(entry_file(1, path, sizeof path), 0, 2000);                         /* cut */
    assert_int_equal(get(s, 0, 3000), -1);
    assert_int_equal(get(s, 1, 3000), -1);
    assert_int_equal(access(entry_file(0, path, sizeof path), F_OK), -1);
    assert_int_equal(access(entry_file(1, path, sizeof path), F_OK), -1);
    assert_int_equal(get(s, 2, 3000), 1);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.damaged, 2);
    assert_int_equal(st.disk.entries, 2);
    dpp_cache_store_close(s);
    /* a garbage header is found at open */
    corrupt_file(entry_file(2, path, sizeof path), 5, -1);
    s = open_store(0, dir, 10 * image);
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.disk.entries, 1);
    assert_int_equal(st.damaged, 1);
    assert_int_equal(get(s, 3, 3000), 1);
    dpp_cache_store_close(s);

    /* the pure check */
    uint8_t img[64] = {0};
    dpp_cache_key_t k;
    const uint8_t *p;
    size_t n;
    char err[128];
    assert_int_equal(dpp_cache_entry_parse(img, 10, &k, &p, &n, err, sizeof err), DPP_ECORRUPT);
    assert_int_equal(dpp_cache_entry_parse(img, sizeof img, &k, &p, &n, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "not a cache entry"));
}

static void test_ram_and_disk(void **state)
{
    (void)state;
    uint64_t image = 1000 + DPP_CACHE_HEADER_SIZE;
    dpp_cache_store_t *s = open_store(2 * image, dir, 20 * image);
    for (uint64_t i = 0; i < 5; i++)
        put(s, i, 1000);
    assert_int_equal(get(s, 4, 1000), 0);  /* still in RAM */
    assert_int_equal(get(s, 0, 1000), 1);  /* from disk, promoted */
    assert_int_equal(get(s, 0, 1000), 0);
    /* a write that fails (the key's folder is a file now) is counted, and
     * the entry is still served from RAM */
    dpp_cache_key_t k = key(77);
    char folder[512];
    snprintf(folder, sizeof folder, "%s/%02x", dir, (unsigned)(k.hi >> 56));
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf %s && touch %s", folder, folder);
    assert_int_equal(system(cmd), 0);
    put(s, 77, 1000);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_int_equal(st.write_errors, 1);
    assert_int_equal(get(s, 77, 1000), 0);
    dpp_cache_store_close(s);
    snprintf(cmd, sizeof cmd, "rm -f %s", folder);
    assert_int_equal(system(cmd), 0);
}

typedef struct worker_arg {
    dpp_cache_store_t *s;
    unsigned seed;
} worker_arg_t;

static void *hammer(void *p)
{
    worker_arg_t *a = p;
    for (int n = 0; n < 3000; n++) {
        uint64_t i = (uint64_t)(rand_r(&a->seed) % 40);
        size_t len = 200 + (size_t)(i % 7) * 100;
        if (rand_r(&a->seed) % 3 == 0) {
            put(a->s, i, len);
        } else {
            int t = get(a->s, i, len);
            assert_true(t >= -1 && t <= 1);
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    uint64_t ram = 8000, disk = 16000;
    dpp_cache_store_t *s = open_store(ram, dir, disk);
    pthread_t t[4];
    worker_arg_t a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (worker_arg_t){s, (unsigned)i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(s, &st);
    assert_true(st.ram.bytes <= ram);
    assert_true(st.disk.bytes <= disk);
    assert_true(st.ram.hits + st.disk.hits > 0);
    assert_int_equal(st.damaged, 0);
    dpp_cache_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ram_lru),
        cmocka_unit_test_setup_teardown(test_disk_and_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ram_and_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
