/* SPDX-License-Identifier: Apache-2.0 */
/* Pinning the files a spec names beside its table, at submit (pins.h). */
#include "pins.h"

#include <stdio.h>
#include <string.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "master_internal.h"
#include "storage/file_version.h"
#include "storage/s3.h"

#define MAX_FILES 64

/* The data root a worker resolves table's side files under (as
 * worker/source.c dpp_source_data_root does from a file's path): the
 * longest s3:// root the table lies under, or the folder the table is in. */
static int data_root(const dpp_master_t *m, const dpp_spec_t *spec, const char *table_path,
                     char *root, size_t len)
{
    root[0] = '\0';
    if (dpp_s3_is_url(table_path)) {
        size_t best = 0;
        for (size_t i = 0; i < m->ns3_roots; i++) {
            size_t k = strlen(m->s3_roots[i]);
            if (k > best && strncmp(table_path, m->s3_roots[i], k) == 0 &&
                (table_path[k] == '/' || table_path[k] == '\0')) {
                best = k;
                snprintf(root, len, "%s", m->s3_roots[i]);
            }
        }
        return best > 0;
    }
    size_t n = strlen(table_path), t = strlen(spec->table);
    if (n < t + 2 || strcmp(table_path + n - t, spec->table) != 0 || table_path[n - t - 1] != '/')
        return 0; /* a table reached through a symlink: its workers find no root either */
    snprintf(root, len, "%.*s", (int)(n - t - 1), table_path);
    return 1;
}

int dpp_master_pin_files(const dpp_master_t *m, dpp_spec_t *spec, const char *table_path,
                         uint64_t deadline_ns, const int *stop, char *err, size_t errlen)
{
    const char *files[MAX_FILES];
    size_t n = dpp_spec_side_files(spec, files, MAX_FILES);
    char root[4096];
    if (n == 0 || !data_root(m, spec, table_path, root, sizeof root))
        return 0;
    for (size_t i = 0; i < n && i < MAX_FILES; i++) {
        const char *what =
            spec->text && files[i] == spec->text->tokenizer_file ? "tokenizer.file" : "vocabulary";
        char version[DPP_FILE_VERSION_MAX];
        int rc = dpp_file_version_of(what, root, files[i], deadline_ns, stop, version, err, errlen);
        if (rc)
            return rc;
        const char *given = dpp_spec_pin(spec, files[i]);
        if (given && strcmp(given, version) != 0) {
            char then[256], now[256];
            dpp_file_version_words(given, then, sizeof then);
            dpp_file_version_words(version, now, sizeof now);
            return dpp_errf(DPP_ECHANGED, err, errlen,
                            "pins[\"%s\"]: the spec pins %s (%s); under %s it is now %s: restore "
                            "that version, or leave the pin out to take the file as it is",
                            files[i], given, then, root, now);
        }
        if (dpp_spec_set_pin(spec, files[i], version) != 0)
            return dpp_errf(-ENOMEM, err, errlen, "%s: out of memory", files[i]);
    }
    return 0;
}
