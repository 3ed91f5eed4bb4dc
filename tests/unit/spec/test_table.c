// SPDX-License-Identifier: Apache-2.0
// Table resolution under data roots and partition file listing, on a
// temporary directory tree with dotfiles, sidecars, a FIFO and symlinks.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dpp/error.h"
#include "spec/table.h"

static char base[PATH_MAX]; /* realpath of the temporary tree */

static const char *in_base(char *buf, const char *rel)
{
    int n = snprintf(buf, PATH_MAX, "%s/%s", base, rel);
    assert_true(n > 0 && n < PATH_MAX);
    return buf;
}

static void make_dir(const char *rel)
{
    char p[PATH_MAX];
    assert_int_equal(mkdir(in_base(p, rel), 0755), 0);
}

static void make_file(const char *rel)
{
    char p[PATH_MAX];
    int fd = open(in_base(p, rel), O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
}

/* rel becomes a symlink holding target verbatim */
static void make_link(const char *target, const char *rel)
{
    char p[PATH_MAX];
    assert_int_equal(symlink(target, in_base(p, rel)), 0);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int build_tree(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    char tmpl[PATH_MAX], p[PATH_MAX], q[PATH_MAX];

    int n = snprintf(tmpl, sizeof(tmpl), "%s/dpp_test_table_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof(tmpl) || !mkdtemp(tmpl) || !realpath(tmpl, base))
        return -1;

    make_dir("outside");
    make_file("outside/secret");
    make_dir("root1");
    make_dir("root2");
    make_link("root1", "root3"); /* a data root that is itself a symlink */

    /* flat: an unpartitioned table with things that are not data */
    make_dir("root1/flat");
    make_file("root1/flat/part-1.tfrecord");
    make_file("root1/flat/part-0.tfrecord");
    make_file("root1/flat/part-1.tfrecord.idx");
    make_file("root1/flat/.hidden");
    make_file("root1/flat/_SUCCESS");
    make_dir("root1/flat/subdir");
    make_file("root1/flat/subdir/part-9.tfrecord");
    make_link("part-0.tfrecord", "root1/flat/alias.tfrecord"); /* same file twice */
    make_link("nowhere", "root1/flat/dangling.tfrecord");
    /* hardlinks/: a folder of hard links to flat's files (cp -al), plus a
     * partition of hard links beside the real one */
    make_dir("root1/hardlinks");
    make_dir("root1/hardlinks/ds=1");
    make_dir("root1/hardlinks/ds=2");
    make_file("root1/hardlinks/ds=1/a.tfrecord");
    make_file("root1/hardlinks/ds=1/b.tfrecord");
    if (link(in_base(p, "root1/hardlinks/ds=1/a.tfrecord"),
             in_base(q, "root1/hardlinks/ds=2/a.tfrecord")) != 0 ||
        link(in_base(p, "root1/hardlinks/ds=1/b.tfrecord"),
             in_base(q, "root1/hardlinks/ds=2/z.tfrecord")) != 0)
        return -1;
    if (mkfifo(in_base(p, "root1/flat/fifo.tfrecord"), 0644) != 0)
        return -1;

    /* events: Hive-style partitions, a nested one, an alias and clutter */
    make_dir("root1/events");
    make_dir("root1/events/ds=2026-01-01");
    make_file("root1/events/ds=2026-01-01/part-1");
    make_file("root1/events/ds=2026-01-01/part-0");
    make_file("root1/events/ds=2026-01-01/part-0.idx");
    make_file("root1/events/ds=2026-01-01/.part-0.crc");
    make_file("root1/events/ds=2026-01-01/_tmp");
    make_dir("root1/events/ds=2026-01-02");
    make_file("root1/events/ds=2026-01-02/part-0");
    make_dir("root1/events/ds=2026-01-02/hour=00");
    make_file("root1/events/ds=2026-01-02/hour=00/part-9");
    make_dir("root1/events/ds=2026-01-02/notes");
    make_file("root1/events/ds=2026-01-02/notes/todo");
    make_link("ds=2026-01-02", "root1/events/ds=latest");
    make_dir("root1/events/_staging=1");
    make_file("root1/events/_staging=1/part-5");
    make_file("root1/events/ds=2026-01-03"); /* a file, not a partition */
    make_file("root1/events/README");

    make_dir("root1/empty");
    make_dir("root1/emptyparts");
    make_dir("root1/emptyparts/ds=1");
    make_file("root1/emptyparts/README");

    /* tables with a way out */
    make_dir("root1/badpart");
    make_dir("root1/badpart/ds=1");
    make_file("root1/badpart/ds=1/f");
    make_link(in_base(q, "outside"), "root1/badpart/ds=out");
    make_dir("root1/badfile");
    make_file("root1/badfile/f0");
    make_link("../../outside/secret", "root1/badfile/f1");
    make_dir("root1/loop");
    make_dir("root1/loop/ds=1");
    make_file("root1/loop/ds=1/f");
    make_link("..", "root1/loop/ds=1/x=1");
    make_link("../outside", "root1/escape");
    make_dir("root2/escape");
    make_link("flat", "root1/inroot");
    make_file("root1/afile");
    make_dir("root1/nested");
    make_dir("root1/nested/a");
    make_dir("root1/nested/a/b");

    /* deep: 8 levels of partitions are fine; deeper: 9 are not */
    make_dir("root1/deep");
    make_dir("root1/deeper");
    char d[PATH_MAX] = "root1/deep", e[PATH_MAX] = "root1/deeper";
    for (int i = 0; i < 9; i++) {
        char part[16];
        snprintf(part, sizeof(part), "/k%d=%d", i, i);
        strcat(e, part);
        make_dir(e);
        if (i < 8) {
            strcat(d, part);
            make_dir(d);
        }
    }
    strcat(d, "/f");
    strcat(e, "/f");
    make_file(d);
    make_file(e);

    make_dir("root2/only2");
    make_dir("root2/flat");
    return 0;
}

static int remove_tree(void **state)
{
    (void)state;
    if (base[0])
        nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static int resolve(const char *const *roots, size_t n, const char *table, char **out, char *err)
{
    memset(err, 0, DPP_SPEC_ERRLEN);
    return dpp_table_resolve(roots, n, table, out, err, DPP_SPEC_ERRLEN);
}

static void check_resolves(const char *const *roots, size_t n, const char *table,
                           const char *want_rel)
{
    char *out = NULL, err[DPP_SPEC_ERRLEN], want[PATH_MAX];
    int rc = resolve(roots, n, table, &out, err);
    if (rc)
        print_error("table \"%s\": %d %s\n", table, rc, err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, in_base(want, want_rel));
    free(out);
}

static void check_resolve_fails(const char *const *roots, size_t n, const char *table, int want_rc,
                                const char *want_err)
{
    char *out = (char *)"sentinel", err[DPP_SPEC_ERRLEN];
    assert_int_equal(resolve(roots, n, table, &out, err), want_rc);
    assert_null(out);
    assert_string_equal(err, want_err);
}

static void test_resolve(void **state)
{
    (void)state;
    char missing[PATH_MAX], r1[PATH_MAX], r2[PATH_MAX], r3[PATH_MAX];
    const char *roots[] = {in_base(missing, "no-such-root"), in_base(r1, "root1"),
                           in_base(r2, "root2")};

    check_resolves(roots, 3, "flat", "root1/flat"); /* the first root wins */
    check_resolves(roots, 3, "flat/", "root1/flat");
    check_resolves(roots, 3, "./flat", "root1/flat");
    check_resolves(roots, 3, "only2", "root2/only2");
    check_resolves(roots, 3, "inroot", "root1/flat"); /* a symlink inside the root */
    check_resolves(roots, 3, "nested/a/b", "root1/nested/a/b");
    check_resolves(roots, 3, "nested//a/./b", "root1/nested/a/b");
    check_resolves(roots, 3, ".", "root1");
    /* root1's "escape" leaves the root, root2's is a real folder */
    check_resolves(roots, 3, "escape", "root2/escape");

    const char *link_root[] = {in_base(r3, "root3")};
    check_resolves(link_root, 1, "flat", "root1/flat");

    check_resolve_fails(roots, 2, "escape", DPP_EPATH,
                        "table \"escape\": path outside the data roots");
    check_resolve_fails(roots, 3, "/etc", DPP_EPATH, "table \"/etc\": path outside the data roots");
    check_resolve_fails(roots, 3, "x/../../etc", DPP_EPATH,
                        "table \"x/../../etc\": path outside the data roots");
    check_resolve_fails(roots, 3, "..", DPP_EPATH, "table \"..\": path outside the data roots");
    check_resolve_fails(roots, 3, "flat/..", DPP_EPATH,
                        "table \"flat/..\": path outside the data roots");
    check_resolve_fails(roots, 3, "", DPP_EPATH, "table \"\": path outside the data roots");
    check_resolve_fails(roots, 3, "foo", -ENOENT, "table \"foo\": not found under any data root");
    check_resolve_fails(
        roots, 3, "flat/part-0.tfrecord/x", -ENOENT,
        "table \"flat/part-0.tfrecord/x\": not found under any data root; did you mean \"flat\"?");
    check_resolve_fails(roots, 3, "afile", -ENOTDIR, "table \"afile\": not a directory");
    check_resolve_fails(roots, 0, "flat", -ENOENT, "table \"flat\": not found under any data root");
    check_resolve_fails(roots, 1, "flat", -ENOENT, "table \"flat\": not found under any data root");
}

/* Lists table (relative to base) with the given partitions and checks the
 * result against want (paths relative to base). */
static void check_lists(const char *table_rel, const char *name, const char *const *parts,
                        unsigned nparts, const char *const *want, size_t nwant)
{
    char tp[PATH_MAX], wp[PATH_MAX], err[DPP_SPEC_ERRLEN] = "";
    dpp_spec_t spec = {.table = (char *)name, .partitions = (char **)parts, .npartitions = nparts};
    char **files = (char **)"sentinel";
    size_t nfiles = 99;

    int rc = dpp_table_list_files(in_base(tp, table_rel), &spec, &files, &nfiles, err, sizeof(err));
    if (rc)
        print_error("table \"%s\": %d %s\n", name, rc, err);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < nfiles && i < nwant; i++)
        assert_string_equal(files[i], in_base(wp, want[i]));
    assert_int_equal(nfiles, nwant);
    if (nwant == 0)
        assert_null(files);
    dpp_table_files_free(files, nfiles);
}

static void check_list_fails(const char *table_rel, const char *name, const char *const *parts,
                             unsigned nparts, int want_rc, const char *want_err)
{
    char tp[PATH_MAX], err[DPP_SPEC_ERRLEN] = "";
    dpp_spec_t spec = {.table = (char *)name, .partitions = (char **)parts, .npartitions = nparts};
    char **files = (char **)"sentinel";
    size_t nfiles = 99;

    assert_int_equal(
        dpp_table_list_files(in_base(tp, table_rel), &spec, &files, &nfiles, err, sizeof(err)),
        want_rc);
    assert_string_equal(err, want_err);
    assert_null(files);
    assert_int_equal(nfiles, 0);
}

/* The worker's check of paths the master sends, including the folder it
 * remembers: a file or folder swapped for a symlink after a first check
 * (a file in the folder checked just before) is still refused. */
static void test_check_under(void **state)
{
    (void)state;
    char p[PATH_MAX], q[PATH_MAX], root[PATH_MAX];
    char *roots[] = {root};
    in_base(root, "root1");
    make_dir("root1/chk");
    make_file("root1/chk/a");
    make_file("root1/chk/b");
    make_link("../../outside/secret", "root1/chk/link");
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/a"), roots, 1, NULL), 0);
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/b"), roots, 1, NULL),
                     0); /* remembered */
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/link"), roots, 1, NULL), DPP_EPATH);
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/.."), roots, 1, NULL), DPP_EPATH);
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/gone"), roots, 1, NULL), -ENOENT);
    assert_int_equal(dpp_path_check_under(in_base(p, "outside/secret"), roots, 1, NULL), DPP_EPATH);
    assert_int_equal(dpp_path_check_under("relative/a", roots, 1, NULL), DPP_EPATH);
    /* chk, once checked, becomes a symlink to a folder outside with the same names */
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/a"), roots, 1, NULL), 0);
    make_dir("outside/chk");
    make_file("outside/chk/b");
    assert_int_equal(rename(in_base(p, "root1/chk"), in_base(q, "root1/chk.old")), 0);
    make_link("../outside/chk", "root1/chk");
    assert_int_equal(dpp_path_check_under(in_base(p, "root1/chk/b"), roots, 1, NULL), DPP_EPATH);
    assert_int_equal(unlink(in_base(p, "root1/chk")), 0);
}

static void test_list_flat(void **state)
{
    (void)state;
    /* no dotfiles, _ files, .idx sidecars, FIFO, dangling link or subfolder;
     * the alias symlink is the same file as part-0 and counts once */
    const char *want[] = {"root1/flat/part-0.tfrecord", "root1/flat/part-1.tfrecord"};
    check_lists("root1/flat", "flat", NULL, 0, want, 2);
    check_lists("root1/inroot", "inroot", NULL, 0, want, 2);

    /* hard links name one file: the first name in path order is kept */
    const char *hard[] = {"root1/hardlinks/ds=1/a.tfrecord", "root1/hardlinks/ds=1/b.tfrecord"};
    check_lists("root1/hardlinks", "hardlinks", NULL, 0, hard, 2);
    const char *only2[] = {"ds=2"};
    const char *hard2[] = {"root1/hardlinks/ds=2/a.tfrecord", "root1/hardlinks/ds=2/z.tfrecord"};
    check_lists("root1/hardlinks", "hardlinks", only2, 1, hard2, 2);
    check_lists("root1/empty", "empty", NULL, 0, NULL, 0);
    /* partitioned but empty: the top-level README is not data */
    check_lists("root1/emptyparts", "emptyparts", NULL, 0, NULL, 0);
}

static void test_list_partitions(void **state)
{
    (void)state;
    /* every key=value folder; ds=latest aliases ds=2026-01-02; hour=00 is a
     * sub-partition; notes/, _staging=1/, README and the ds=2026-01-03 file
     * are not data */
    const char *all[] = {
        "root1/events/ds=2026-01-01/part-0",
        "root1/events/ds=2026-01-01/part-1",
        "root1/events/ds=2026-01-02/hour=00/part-9",
        "root1/events/ds=2026-01-02/part-0",
    };
    check_lists("root1/events", "events", NULL, 0, all, 4);

    const char *one[] = {"ds=2026-01-02"};
    check_lists("root1/events", "events", one, 1, all + 2, 2);
    const char *alias[] = {"ds=latest", "ds=2026-01-02"};
    check_lists("root1/events", "events", alias, 2, all + 2, 2);
    const char *both[] = {"ds=2026-01-02", "ds=2026-01-01"};
    check_lists("root1/events", "events", both, 2, all, 4);
    /* a folder named explicitly needs no key=value name */
    const char *plain[] = {"ds=2026-01-02", "_staging=1"};
    const char *plain_want[] = {"root1/events/_staging=1/part-5", all[2], all[3]};
    check_lists("root1/events", "events", plain, 2, plain_want, 3);

    const char *deep[] = {"root1/deep/k0=0/k1=1/k2=2/k3=3/k4=4/k5=5/k6=6/k7=7/f"};
    check_lists("root1/deep", "deep", NULL, 0, deep, 1);

    const char *ok[] = {"ds=1"};
    const char *ok_want[] = {"root1/badpart/ds=1/f"};
    check_lists("root1/badpart", "badpart", ok, 1, ok_want, 1);
}

/* The same listings with every entry stat'ed, as on a filesystem whose
 * folder entries are not trusted (FUSE, overlayfs, network filesystems). */
static void test_list_stat_all(void **state)
{
    assert_int_equal(setenv("DPP_TABLE_STAT", "1", 1), 0);
    test_list_flat(state);
    test_list_partitions(state);
    assert_int_equal(unsetenv("DPP_TABLE_STAT"), 0);
}

static void test_list_errors(void **state)
{
    (void)state;
    const char *missing[] = {"ds=2026-01-01", "ds=2027-01-01"};
    check_list_fails(
        "root1/events", "events", missing, 2, DPP_ESPEC,
        "partitions[1]: no partition \"ds=2027-01-01\" in table \"events\"; did you mean "
        "\"ds=2026-01-01\"? (partitions: ds=2026-01-01, ds=2026-01-02, ds=latest)");
    const char *file[] = {"ds=2026-01-03"};
    check_list_fails("root1/events", "events", file, 1, DPP_ESPEC,
                     "partitions[0]: \"ds=2026-01-03\" in table \"events\" is not a folder");
    const char *bad_name[] = {"ds=2026-01-01", "../flat"};
    check_list_fails("root1/events", "events", bad_name, 2, DPP_ESPEC,
                     "partitions[1]: \"../flat\" is not a folder name");

    check_list_fails("root1/badpart", "badpart", NULL, 0, DPP_EPATH,
                     "table \"badpart\": \"ds=out\" leads outside the table");
    const char *out[] = {"ds=out"};
    check_list_fails("root1/badpart", "badpart", out, 1, DPP_EPATH,
                     "partitions[0]: partition \"ds=out\" leads outside table \"badpart\"");
    check_list_fails("root1/badfile", "badfile", NULL, 0, DPP_EPATH,
                     "table \"badfile\": \"f1\" leads outside the table");
    check_list_fails("root1/loop", "loop", NULL, 0, -ELOOP,
                     "table \"loop\": \"ds=1/x=1\" loops back to a folder above it");
    check_list_fails("root1/deeper", "deeper", NULL, 0, -ELOOP,
                     "table \"deeper\": partitions nested deeper than 8 levels at "
                     "\"k0=0/k1=1/k2=2/k3=3/k4=4/k5=5/k6=6/k7=7/k8=8\"");
    check_list_fails("root1/gone", "gone", NULL, 0, -ENOENT,
                     "table \"gone\": No such file or directory");

    dpp_table_files_free(NULL, 0);
}

static void test_list_unreadable(void **state)
{
    (void)state;
    char p[PATH_MAX];

    if (geteuid() == 0)
        skip(); /* root reads any folder */
    make_dir("root1/perm");
    make_dir("root1/perm/ds=1");
    assert_int_equal(chmod(in_base(p, "root1/perm/ds=1"), 0), 0);
    check_list_fails("root1/perm", "perm", NULL, 0, -EACCES,
                     "table \"perm\": cannot read \"ds=1\": Permission denied");
    assert_int_equal(chmod(p, 0755), 0);
}

/* An object store's keys under the rules of a folder listing. */
static void test_select_keys(void **state)
{
    (void)state;
    static const char *const keys[] = {
        "ds=1/part-0.tfrecord",      /* 0 data */
        "ds=1/part-0.tfrecord.idx",  /* 1 sidecar */
        "ds=1/_tmp/part-9.tfrecord", /* 2 '_' folder */
        "ds=1/h=3/part-1.tfrecord",  /* 3 sub-partition */
        "ds=2/.hidden",              /* 4 dot file */
        "ds=2/part-0.tfrecord",      /* 5 data */
        "notes/readme.txt",          /* 6 not a partition folder */
        "_SUCCESS",                  /* 7 */
        "top.tfrecord",              /* 8 a top-level file of a partitioned table */
        "ds=3/",                     /* 9 a folder marker */
        "ds=3/a/b.tfrecord",         /* 10 a non-partition folder inside one */
    };
    size_t n = sizeof keys / sizeof keys[0];
    unsigned char keep[sizeof keys / sizeof keys[0]];
    char err[512];
    dpp_spec_t spec = {.table = (char *)"s3://b/t"};
    assert_int_equal(dpp_table_select_keys(&spec, keys, n, keep, err, sizeof err), 0);
    static const unsigned char all[] = {1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};
    assert_memory_equal(keep, all, n);

    const char *two[] = {"ds=2"};
    spec.partitions = (char **)two;
    spec.npartitions = 1;
    assert_int_equal(dpp_table_select_keys(&spec, keys, n, keep, err, sizeof err), 0);
    static const unsigned char only2[] = {0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
    assert_memory_equal(keep, only2, n);

    const char *typo[] = {"ds=1", "ds=22"};
    spec.partitions = (char **)typo;
    spec.npartitions = 2;
    assert_int_equal(dpp_table_select_keys(&spec, keys, n, keep, err, sizeof err), DPP_ESPEC);
    assert_string_equal(err, "partitions[1]: no partition \"ds=22\" in table \"s3://b/t\"; did "
                             "you mean \"ds=2\"?");

    /* Unpartitioned: the table's own keys, still without skipped names. */
    static const char *const flat[] = {"a.tfrecord", "a.tfrecord.idx", "_SUCCESS", "sub/x"};
    unsigned char k2[4];
    spec.npartitions = 0;
    assert_int_equal(dpp_table_select_keys(&spec, flat, 4, k2, err, sizeof err), 0);
    static const unsigned char flat_keep[] = {1, 0, 0, 0};
    assert_memory_equal(k2, flat_keep, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),         cmocka_unit_test(test_list_flat),
        cmocka_unit_test(test_list_partitions), cmocka_unit_test(test_list_stat_all),
        cmocka_unit_test(test_list_errors),     cmocka_unit_test(test_select_keys),
        cmocka_unit_test(test_list_unreadable), cmocka_unit_test(test_check_under),
    };
    return cmocka_run_group_tests(tests, build_tree, remove_tree);
}
