/* SPDX-License-Identifier: Apache-2.0 */
/* Tables on disk: resolving a spec's table under the master's data roots and
 * listing the files of its selected partitions. */
#ifndef DPP_SPEC_TABLE_H
#define DPP_SPEC_TABLE_H

#include <stddef.h>
#include <sys/stat.h>

#include "spec/spec.h"

/* Lexical check, before touching the filesystem: path is non-empty,
 * relative and has no ".." component. Returns 1 or 0. */
int dpp_path_is_relative_inside(const char *path);

/* A worker's check of a path the master sent: 0 when path is absolute,
 * already resolved (realpath gives it back unchanged: no symlink or ".."
 * appeared since the master resolved it) and, with roots (n > 0, each
 * resolved), inside one of them; else DPP_EPATH (or -errno when it cannot
 * be resolved). The folder last found resolved is remembered per thread:
 * the next file in it costs two stats, not a readlink per component. With
 * st not NULL, a 0 return fills it with the file's stat. */
int dpp_path_check_under(const char *path, char *const *roots, size_t n, struct stat *st);

/* Resolves `table` (relative to a data root) with realpath against each root
 * in order and returns the first that exists as a directory and lies under
 * its root. Absolute tables, "..", and symlinks leading out of every root are
 * DPP_EPATH; a table found under no root is -ENOENT (-ENOTDIR when it is a
 * file; the -errno of a root that could not be searched); err gets a
 * one-line reason naming the table. A missing root is skipped. *out is the
 * table's real path, malloc'd, caller frees; NULL on error. */
int dpp_table_resolve(const char *const *roots, size_t nroots, const char *table, char **out,
                      char *err, size_t errlen);

/* Lists the data files of the spec's partitions (every `key=value` folder
 * when spec->npartitions is 0, or the table folder itself when it has none):
 * regular files, sorted by path, skipping names that start with '.' or '_'
 * and `.idx` sidecars. A named partition that does not exist is DPP_ESPEC
 * with err `partitions[i]: no partition "..." in table "..."`. *files is an
 * array of *nfiles malloc'd absolute paths; free with dpp_table_files_free().
 * A listing reads folders, and stats only what their entries do not tell
 * (links, or any entry on a filesystem whose entries are not trusted: see
 * dirents_trusted in table.c); it never stats a plain file on ext4, xfs,
 * btrfs or tmpfs, so a file's size and mtime are for its reader to see.
 *
 * Details: a symlinked entry is resolved with realpath; the returned paths
 * are real paths, one per file identity (an alias symlink or a hard link
 * does not read a file twice).
 * `key=value` folders inside a partition are sub-partitions, listed too (at
 * most 8 levels); other folders, FIFOs, sockets, devices and dangling
 * symlinks are skipped. A file or partition whose real path leaves the table
 * is DPP_EPATH; a named partition that is a file is DPP_ESPEC; a folder that
 * cannot be read is its -errno; a sub-partition symlink to a folder above it
 * is -ELOOP. spec->table is used only in messages. No files is not an error:
 * 0 with *files NULL and *nfiles 0. On error *files is NULL. */
int dpp_table_list_files(const char *table_path, const dpp_spec_t *spec, char ***files,
                         size_t *nfiles, char *err, size_t errlen);
void dpp_table_files_free(char **files, size_t nfiles);

/* dpp_table_list_files's rules for the keys of an object store's table
 * (keys[0..n), relative to the table's prefix, '/'-separated): sets keep[i]
 * to 1 for a data file of the spec's partitions (every `key=value` folder
 * when spec->npartitions is 0, or the table's own keys when it has none;
 * sub-partitions at most 8 levels; no segment starting with '.' or '_';
 * no `.idx` sidecar; no key ending in '/'), else 0. A named partition with
 * no key is DPP_ESPEC with err `partitions[i]: no partition "..." in table
 * "..."` (and a did-you-mean among those there). Returns 0 or that. */
int dpp_table_select_keys(const dpp_spec_t *spec, const char *const *keys, size_t n,
                          unsigned char *keep, char *err, size_t errlen);

#endif
