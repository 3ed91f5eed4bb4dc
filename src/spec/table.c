// SPDX-License-Identifier: Apache-2.0
// Tables on disk: a spec's table resolved (realpath) under the master's data
// roots, and the sorted list of data files of its selected partitions.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "dpp/error.h"
#include "base/nearest.h"
#include "spec/table.h"

/* Sub-partitions (key=value folders inside a partition) are followed at most
 * this deep; it also stops a symlink that points back at an ancestor. */
#define MAX_PARTITION_DEPTH 8

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int dpp_path_is_relative_inside(const char *path)
{
    if (path[0] == '\0' || path[0] == '/')
        return 0;
    for (const char *c = path; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return 0;
        c += n;
        while (*c == '/')
            c++;
    }
    return 1;
}

/* Whether resolved path lies at or under resolved dir. */
static int is_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return path[0] == '/';
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Whether path is resolved: no symlink, "." or ".." in it. A folder found
 * resolved is remembered (per thread: workers check from several) with its
 * identity, so that the files of one folder, checked one after the other,
 * cost a stat of the folder and an lstat of the file instead of realpath's
 * readlink per component. A folder (or one above it) swapped for a symlink
 * since leads elsewhere: another identity, a full check. */
static int is_resolved(const char *path, struct stat *file_st)
{
    static __thread char dir_ok[PATH_MAX];
    static __thread dev_t dir_dev;
    static __thread ino_t dir_ino;
    const char *slash = strrchr(path, '/');
    const char *name = slash + 1;
    size_t dlen = (size_t)(slash - path);
    struct stat st;
    if (dir_ok[0] && dlen < sizeof dir_ok && strncmp(path, dir_ok, dlen) == 0 &&
        dir_ok[dlen] == '\0' && name[0] && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
        stat(dir_ok, &st) == 0 && st.st_dev == dir_dev && st.st_ino == dir_ino) {
        if (lstat(path, file_st) != 0)
            return -errno;
        return S_ISLNK(file_st->st_mode) ? 0 : 1;
    }
    char *real = realpath(path, NULL);
    if (real == NULL)
        return -errno;
    int ok = strcmp(real, path) == 0;
    free(real);
    if (ok && stat(path, file_st) != 0)
        return -errno;
    dir_ok[0] = '\0';
    if (ok && dlen > 0 && dlen < sizeof dir_ok) {
        memcpy(dir_ok, path, dlen);
        dir_ok[dlen] = '\0';
        if (stat(dir_ok, &st) == 0) {
            dir_dev = st.st_dev;
            dir_ino = st.st_ino;
        } else {
            dir_ok[0] = '\0';
        }
    }
    return ok;
}

int dpp_path_check_under(const char *path, char *const *roots, size_t n, struct stat *st)
{
    struct stat own;
    if (path[0] != '/')
        return DPP_EPATH;
    int ok = is_resolved(path, st ? st : &own);
    if (ok < 0)
        return ok;
    if (!ok)
        return DPP_EPATH;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(roots[i]);
        if (strncmp(path, roots[i], len) == 0 && (path[len] == '/' || len == 1))
            return 0;
    }
    return DPP_EPATH;
}

/* The names of the folders in dir (not starting with '.' or '_'), at most
 * max of them, into names (malloc'd each; free with free_names). */
static size_t folder_names(const char *dir, char **names, size_t max)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *e; n < max && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || e->d_name[0] == '_')
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode) &&
            (names[n] = strdup(e->d_name)) != NULL)
            n++;
    }
    closedir(d);
    return n;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "; did you mean ...? (tables: ...)" for a table or partition that is not
 * there: what the folders dirs[0..ndirs) hold. */
static const char *what_exists(char *buf, size_t len, const char *name, const char *const *dirs,
                               size_t ndirs, const char *label)
{
    enum { MAX_NAMES = 256 };
    char *names[MAX_NAMES];
    size_t n = 0;
    for (size_t i = 0; i < ndirs; i++)
        n += folder_names(dirs[i], names + n, MAX_NAMES - n);
    qsort(names, n, sizeof *names, by_name);
    dpp_suggest(buf, len, name, (const char *const *)names, n, label, 12);
    free_names(names, n);
    return buf;
}

int dpp_table_resolve(const char *const *roots, size_t nroots, const char *table, char **out,
                      char *err, size_t errlen)
{
    int escaped = 0, not_dir = 0, other = 0;

    *out = NULL;
    if (!dpp_path_is_relative_inside(table))
        return set_err(err, errlen, DPP_EPATH, "table \"%s\": path outside the data roots", table);
    for (size_t i = 0; i < nroots; i++) {
        char *root = realpath(roots[i], NULL);
        if (!root) {
            if (errno == ENOMEM)
                return set_err(err, errlen, -ENOMEM, "out of memory");
            continue; /* a missing root holds no tables */
        }
        char *joined = join(root, table);
        if (!joined) {
            free(root);
            return set_err(err, errlen, -ENOMEM, "out of memory");
        }
        char *path = realpath(joined, NULL);
        int saved = errno;
        free(joined);
        if (!path) {
            free(root);
            if (saved == ENOMEM)
                return set_err(err, errlen, -ENOMEM, "out of memory");
            if (saved != ENOENT && saved != ENOTDIR && !other)
                other = -saved; /* e.g. EACCES, ELOOP: reported if no root has it */
            continue;
        }
        struct stat st;
        int under = is_under(path, root);
        free(root);
        if (!under) {
            escaped = 1;
        } else if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
            not_dir = 1;
        } else {
            *out = path;
            return 0;
        }
        free(path);
    }
    /* A table that leads out of a root is reported as such even if another
     * root lacks it: that is the answer a user needs to fix the layout. */
    if (escaped)
        return set_err(err, errlen, DPP_EPATH, "table \"%s\": path outside the data roots", table);
    if (not_dir)
        return set_err(err, errlen, -ENOTDIR, "table \"%s\": not a directory", table);
    if (other)
        return set_err(err, errlen, other, "table \"%s\": %s", table, strerror(-other));
    char hint[1024];
    return set_err(err, errlen, -ENOENT, "table \"%s\": not found under any data root%s", table,
                   what_exists(hint, sizeof hint, table, roots, nroots, "tables"));
}

/* A data file found, with its identity: two paths (a symlinked alias, a
 * hard link) may name one file. */
typedef struct listed {
    char *path;
    dev_t dev;
    ino_t ino;
    size_t order; /* its place in path order, once sorted */
} listed_t;

typedef struct listing {
    const char *table_name; /* as the spec wrote it, for messages */
    const char *table_path; /* resolved */
    listed_t *files;
    size_t nfiles, cap;
    size_t nparts; /* top-level partition folders walked */
    char *err;
    size_t errlen;
} listing_t;

static int add_file(listing_t *l, char *path, dev_t dev, ino_t ino)
{
    if (l->nfiles == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        listed_t *files = realloc(l->files, cap * sizeof(*files));
        if (!files) {
            free(path);
            return -ENOMEM;
        }
        l->files = files;
        l->cap = cap;
    }
    l->files[l->nfiles++] = (listed_t){path, dev, ino, 0};
    return 0;
}

/* Whether the entries readdir returns for folder fd say truly what they are
 * (d_type) and which file (d_ino is st_ino): so on the local filesystems
 * below, where a table of 100,000 files then costs no stat per file (a
 * third of a submit's time). Elsewhere every entry is stat'ed: FUSE without
 * use_ino returns one d_ino for all, overlayfs a d_ino that need not be the
 * st_ino, and network filesystems were not checked. DPP_TABLE_STAT=1 in the
 * environment stats every entry anyway (a filesystem that misreports; the
 * tests list both ways). *dev: the folder's. */
static int dirents_trusted(int fd, dev_t *dev)
{
    struct statfs fs;
    struct stat st;
    const char *all = getenv("DPP_TABLE_STAT");
    if ((all && strcmp(all, "1") == 0) || fstatfs(fd, &fs) != 0 || fstat(fd, &st) != 0)
        return 0;
    *dev = st.st_dev;
    switch ((unsigned long)fs.f_type) {
    case 0xEF53UL:     /* ext2, ext3, ext4 */
    case 0x58465342UL: /* xfs */
    case 0x9123683EUL: /* btrfs (a subvolume is a folder: its own st_dev, fstat'ed here) */
    case 0x01021994UL: /* tmpfs */
        return 1;
    default:
        return 0;
    }
}

/* Partition folders are `key=value` with a non-empty key. */
static int is_partition_name(const char *name)
{
    const char *eq = strchr(name, '=');
    return eq && eq != name;
}

static int is_skipped_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] == '.' || name[0] == '_' || (n >= 4 && strcmp(name + n - 4, ".idx") == 0);
}

/* Path of p relative to the table, for messages. */
static const char *rel(const listing_t *l, const char *p)
{
    size_t n = strlen(l->table_path);
    if (strncmp(p, l->table_path, n) == 0 && p[n] == '/')
        return p + n + 1;
    return p;
}

#define WANT_FILES 1 /* regular files of dir are data */
#define WANT_PARTS 2 /* key=value folders of dir are (sub-)partitions, walked */

static int list_dir(listing_t *l, const char *dir, int want, int depth);

/* How the entries of the folder being listed may be taken (dirents_trusted). */
typedef struct dir_info {
    int trusted;
    dev_t dev;
} dir_info_t;

/* FIFOs, sockets and devices are never data; neither are folders other than
 * key=value ones. */
static int is_wanted(const struct stat *st, const char *name, int want)
{
    if (S_ISREG(st->st_mode))
        return want & WANT_FILES;
    return S_ISDIR(st->st_mode) && (want & WANT_PARTS) && is_partition_name(name);
}

/* Handles entry ent of folder dir (resolved, open as d): adds it when it is a
 * data file, walks it when it is a wanted partition folder, skips anything
 * else. A symlink is resolved (realpath) and must stay inside the table. */
static int list_entry(listing_t *l, DIR *d, const dir_info_t *di, const char *dir,
                      const struct dirent *ent, int want, int depth)
{
    struct stat st;
    const char *name = ent->d_name;
    char *path = NULL;
    int rc = 0;

    char *joined = join(dir, name);
    if (!joined)
        return set_err(l->err, l->errlen, -ENOMEM, "out of memory");
    if (ent->d_type == DT_REG && di->trusted) {
        /* a regular file, not a link: no stat (dirents_trusted) */
        if (!(want & WANT_FILES))
            goto out;
        rc = add_file(l, joined, di->dev, ent->d_ino);
        joined = NULL;
        if (rc)
            set_err(l->err, l->errlen, rc, "out of memory");
        goto out;
    }
    if (ent->d_type == DT_REG || ent->d_type == DT_DIR) {
        /* no symlink: dir is resolved and name one plain component, so the
         * joined path is resolved too (realpath would cost a readlink per
         * component of it, for every file of a 100,000-file table) */
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISLNK(st.st_mode) ||
            !is_wanted(&st, name, want))
            goto out; /* gone since readdir, or replaced by a link */
        path = joined;
        joined = NULL;
    } else {
        path = realpath(joined, NULL);
        if (!path) {
            /* a dangling symlink, or gone since readdir: nothing to read */
            if (errno == ENOMEM)
                rc = set_err(l->err, l->errlen, -ENOMEM, "out of memory");
            goto out;
        }
        if (stat(path, &st) != 0 || !is_wanted(&st, name, want))
            goto out;
    }
    const char *shown = joined ? joined : path; /* the name as listed, for messages */
    if (!is_under(path, l->table_path)) {
        rc = set_err(l->err, l->errlen, DPP_EPATH, "table \"%s\": \"%s\" leads outside the table",
                     l->table_name, rel(l, shown));
        goto out;
    }
    if (S_ISREG(st.st_mode)) {
        rc = add_file(l, path, st.st_dev, st.st_ino);
        path = NULL;
        if (rc)
            set_err(l->err, l->errlen, rc, "out of memory");
    } else if (is_under(dir, path)) { /* only a symlink can lead there */
        rc = set_err(l->err, l->errlen, -ELOOP,
                     "table \"%s\": \"%s\" loops back to a folder above it", l->table_name,
                     rel(l, shown));
    } else if (depth >= MAX_PARTITION_DEPTH) {
        rc = set_err(l->err, l->errlen, -ELOOP,
                     "table \"%s\": partitions nested deeper than %d levels at \"%s\"",
                     l->table_name, MAX_PARTITION_DEPTH, rel(l, shown));
    } else {
        if (depth == 0)
            l->nparts++;
        rc = list_dir(l, path, WANT_FILES | WANT_PARTS, depth + 1);
    }
out:
    free(joined);
    free(path);
    return rc;
}

/* Lists dir, a resolved folder inside the table, as `want` says. */
static int list_dir(listing_t *l, const char *dir, int want, int depth)
{
    int rc = 0;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return set_err(l->err, l->errlen, -e, "table \"%s\": cannot read \"%s\": %s", l->table_name,
                       rel(l, dir), strerror(e));
    }
    dir_info_t di = {0};
    di.trusted = dirents_trusted(dirfd(d), &di.dev);
    for (;;) {
        errno = 0;
        struct dirent *ent = readdir(d);
        if (!ent) {
            int e = errno;
            if (e)
                rc = set_err(l->err, l->errlen, -e, "table \"%s\": cannot read \"%s\": %s",
                             l->table_name, rel(l, dir), strerror(e));
            break;
        }
        if (is_skipped_name(ent->d_name))
            continue; /* also "." and ".." */
        rc = list_entry(l, d, &di, dir, ent, want, depth);
        if (rc)
            break;
    }
    closedir(d);
    return rc;
}

/* Resolves one partition folder of the table. Returns 0 with *out malloc'd,
 * or an error naming partitions[index]. */
static int resolve_partition(listing_t *l, const char *name, unsigned index, char **out)
{
    struct stat st;

    *out = NULL;
    if (name[0] == '\0' || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return set_err(l->err, l->errlen, DPP_ESPEC, "partitions[%u]: \"%s\" is not a folder name",
                       index, name);
    char *joined = join(l->table_path, name);
    if (!joined)
        return -ENOMEM;
    char *path = realpath(joined, NULL);
    int saved = errno;
    free(joined);
    if (!path) {
        if (saved == ENOMEM)
            return -ENOMEM;
        if (saved == ENOENT || saved == ENOTDIR) {
            char hint[1024];
            const char *dirs[] = {l->table_path};
            return set_err(l->err, l->errlen, DPP_ESPEC,
                           "partitions[%u]: no partition \"%s\" in table \"%s\"%s", index, name,
                           l->table_name,
                           what_exists(hint, sizeof hint, name, dirs, 1, "partitions"));
        }
        return set_err(l->err, l->errlen, -saved, "partitions[%u]: partition \"%s\": %s", index,
                       name, strerror(saved));
    }
    if (!is_under(path, l->table_path) || strcmp(path, l->table_path) == 0) {
        /* the table folder itself is no partition of it either */
        free(path);
        return set_err(l->err, l->errlen, DPP_EPATH,
                       "partitions[%u]: partition \"%s\" leads outside table \"%s\"", index, name,
                       l->table_name);
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(path);
        return set_err(l->err, l->errlen, DPP_ESPEC,
                       "partitions[%u]: \"%s\" in table \"%s\" is not a folder", index, name,
                       l->table_name);
    }
    *out = path;
    return 0;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(((const listed_t *)a)->path, ((const listed_t *)b)->path);
}

static int cmp_identity(const void *a, const void *b)
{
    const listed_t *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_order(const void *a, const void *b)
{
    const listed_t *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Keeps one path per file, the first in path order: two names for one file
 * (a symlinked alias partition such as ds=latest, or a folder of hard links
 * made with cp -al) would read its rows twice in an epoch. Leaves the rest
 * sorted by path. */
static void keep_one_name(listing_t *l)
{
    if (l->nfiles < 2)
        return;
    qsort(l->files, l->nfiles, sizeof(*l->files), cmp_path);
    for (size_t i = 0; i < l->nfiles; i++)
        l->files[i].order = i;
    qsort(l->files, l->nfiles, sizeof(*l->files), cmp_identity);
    size_t n = 0;
    for (size_t i = 0; i < l->nfiles; i++) {
        if (n > 0 && l->files[n - 1].dev == l->files[i].dev &&
            l->files[n - 1].ino == l->files[i].ino)
            free(l->files[i].path);
        else
            l->files[n++] = l->files[i];
    }
    l->nfiles = n;
    qsort(l->files, l->nfiles, sizeof(*l->files), cmp_order);
}

int dpp_table_list_files(const char *table_path, const dpp_spec_t *spec, char ***files,
                         size_t *nfiles, char *err, size_t errlen)
{
    listing_t l = {.err = err, .errlen = errlen};
    char *resolved = NULL;
    int rc;

    *files = NULL;
    *nfiles = 0;
    resolved = realpath(table_path, NULL);
    if (!resolved)
        return set_err(err, errlen, -errno, "table \"%s\": %s",
                       spec->table ? spec->table : table_path, strerror(errno));
    l.table_path = resolved;
    l.table_name = spec->table ? spec->table : table_path;

    if (spec->npartitions > 0) {
        for (unsigned i = 0; i < spec->npartitions; i++) {
            char *dir;
            rc = resolve_partition(&l, spec->partitions[i], i, &dir);
            if (rc)
                goto out;
            rc = list_dir(&l, dir, WANT_FILES | WANT_PARTS, 1);
            free(dir);
            if (rc)
                goto out;
        }
    } else {
        /* Every top-level key=value folder; if the table has none, it is
         * unpartitioned and its own files are the data. */
        rc = list_dir(&l, resolved, WANT_PARTS, 0);
        if (rc)
            goto out;
        if (l.nparts == 0) {
            rc = list_dir(&l, resolved, WANT_FILES, 0);
            if (rc)
                goto out;
        }
    }
    keep_one_name(&l);
    char **paths = l.nfiles ? malloc(l.nfiles * sizeof *paths) : NULL;
    if (l.nfiles && paths == NULL) {
        rc = set_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < l.nfiles; i++)
        paths[i] = l.files[i].path;
    *files = paths;
    *nfiles = l.nfiles;
    l.nfiles = 0;
    rc = 0;
out:
    for (size_t i = 0; i < l.nfiles; i++)
        free(l.files[i].path);
    free(l.files);
    free(resolved);
    return rc;
}

void dpp_table_files_free(char **files, size_t nfiles)
{
    if (!files)
        return;
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
}

/* Whether key (relative to the table) is a data file below a partition
 * folder, every folder of it a partition (at most MAX_PARTITION_DEPTH), or
 * a top-level file when top; *first_len: the first folder's length. */
static int key_wanted(const char *key, int top, size_t *first_len)
{
    size_t len = strlen(key);
    if (len == 0 || key[len - 1] == '/')
        return 0;
    int depth = 0;
    *first_len = 0;
    for (const char *seg = key;;) {
        const char *slash = strchr(seg, '/');
        size_t n = slash ? (size_t)(slash - seg) : strlen(seg);
        char name[256];
        if (n == 0 || n >= sizeof name)
            return 0;
        memcpy(name, seg, n);
        name[n] = '\0';
        if (is_skipped_name(name))
            return 0;
        if (slash == NULL)
            return top ? depth == 0 : depth > 0;
        if (!is_partition_name(name) || ++depth > MAX_PARTITION_DEPTH)
            return 0;
        if (depth == 1)
            *first_len = n;
        seg = slash + 1;
    }
}

int dpp_table_select_keys(const dpp_spec_t *spec, const char *const *keys, size_t n,
                          unsigned char *keep, char *err, size_t errlen)
{
    size_t first = 0, nparts = 0;
    for (size_t i = 0; i < n; i++) {
        keep[i] = (unsigned char)key_wanted(keys[i], 0, &first);
        if (keep[i] == 0 || spec->npartitions == 0) {
            nparts += keep[i];
            continue;
        }
        keep[i] = 0;
        for (unsigned p = 0; p < spec->npartitions; p++)
            if (strlen(spec->partitions[p]) == first &&
                memcmp(keys[i], spec->partitions[p], first) == 0)
                keep[i] = 1;
    }
    for (unsigned p = 0; p < spec->npartitions; p++) {
        size_t pl = strlen(spec->partitions[p]), have = 0;
        for (size_t i = 0; i < n && !have; i++)
            have = keep[i] && strncmp(keys[i], spec->partitions[p], pl) == 0 && keys[i][pl] == '/';
        if (!have) {
            /* the partitions there, for a did-you-mean */
            const char *names[64];
            char buf[64][256];
            size_t nn = 0;
            for (size_t i = 0; i < n && nn < 64; i++) {
                size_t fl;
                if (!key_wanted(keys[i], 0, &fl) || fl >= sizeof buf[0] ||
                    (nn > 0 && strncmp(buf[nn - 1], keys[i], fl) == 0 && buf[nn - 1][fl] == '\0'))
                    continue;
                memcpy(buf[nn], keys[i], fl);
                buf[nn][fl] = '\0';
                names[nn] = buf[nn];
                nn++;
            }
            const char *near = dpp_nearest(spec->partitions[p], names, nn);
            char hint[320] = "";
            if (near)
                snprintf(hint, sizeof hint, "; did you mean \"%s\"?", near);
            return set_err(err, errlen, DPP_ESPEC,
                           "partitions[%u]: no partition \"%s\" in table \"%s\"%s", p,
                           spec->partitions[p], spec->table, hint);
        }
    }
    if (spec->npartitions == 0 && nparts == 0)
        for (size_t i = 0; i < n; i++)
            keep[i] = (unsigned char)key_wanted(keys[i], 1, &first);
    return 0;
}
