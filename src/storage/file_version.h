/* SPDX-License-Identifier: Apache-2.0 */
/* The version of a file a session's spec names beside its table (a
 * tokenizer, a vocabulary), pinned by the master at submit so that every
 * split of the session reads the same one: a local file's size and
 * modification time, an object's size and ETag, as one string that travels
 * in the spec ("size=N mtime_ns=M", "size=N etag=E"). */
#ifndef DPP_STORAGE_FILE_VERSION_H
#define DPP_STORAGE_FILE_VERSION_H

#include <stddef.h>
#include <stdint.h>

#define DPP_FILE_VERSION_MAX 192

/* The version string of a local file of `size` bytes modified at mtime_ns,
 * or (etag not NULL) of an object of `size` bytes at that ETag, into out
 * (DPP_FILE_VERSION_MAX bytes). */
void dpp_file_version_format(char *out, uint64_t size, int64_t mtime_ns, const char *etag);

/* Parses a version string: 0 with *size and either *mtime_ns (etag "") or
 * etag (DPP_S3_ETAG_MAX bytes); DPP_EINVAL when it is none. */
int dpp_file_version_parse(const char *v, uint64_t *size, int64_t *mtime_ns, char *etag);

/* The current version of `file` under the data root `root` (a folder, or an
 * s3:// root whose object root/file is read with a HEAD on the calling
 * thread's client, ended by deadline_ns or *stop as storage/s3.h's requests
 * are; 0, NULL: never) into out. Returns 0, or the error with err naming
 * the file as `what` ("tokenizer.file") says it. */
int dpp_file_version_of(const char *what, const char *root, const char *file, uint64_t deadline_ns,
                        const int *stop, char *out, char *err, size_t errlen);

/* "1,204 bytes, modified 2026-12-07T20:26:31.123456789Z" or "1,204 bytes,
 * ETag \"abc\"": a version in words, for messages. */
void dpp_file_version_words(const char *v, char *out, size_t outlen);

#endif
