// SPDX-License-Identifier: Apache-2.0
// The master's journal: durable appends of CRC-checked records, replay with
// torn-tail repair, compaction by snapshot (format: docs/journal.md).
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/crc32c.h"
#include "dpp/error.h"
#include "master/journal.h"

#define HDR DPP_JOURNAL_HEADER_SIZE
/* Replay reads this much at a time; a bigger record gets a buffer its size. */
#define READ_CHUNK (1u << 20)
/* Records per writev: two iovecs each, within IOV_MAX (1024 on Linux). */
#define WRITE_BATCH 256
/* dpp_journal_write() writes its buffer out once it holds this much. */
#define FLUSH_AT (1u << 20)

struct dpp_journal {
    int fd;
    int failed;     /* sticky error once the file's state is unknown; 0 while usable */
    int unsynced;   /* written records wait for dpp_journal_sync() */
    char *path;     /* dir/journal */
    char *tmp_path; /* dir/journal.tmp */
    char *dir;
    dpp_journal_stats_t stats;
    /* Records dpp_journal_write() took, encoded, not yet in the file: a loop
     * turn's records cost the master one write, not one syscall each (a
     * write per acknowledged split was 40% of its CPU per split). */
    uint8_t *buf;
    size_t len, cap;
    uint64_t buf_records, buf_payload;
};

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    put_le32(p, (uint32_t)v);
    put_le32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_le64(const uint8_t *p)
{
    return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = dpp_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

/* ---- reading ---------------------------------------------------------- */

/* A window [base, base + len) of the file in buf. Records are handed out as
 * pointers into it, so replay copies nothing. */
typedef struct reader {
    int fd;
    uint64_t size; /* the file's size when replay started */
    uint8_t *buf;
    size_t cap;
    uint64_t base;
    size_t len;
} reader_t;

/* Makes [off, off + n) readable at *out; the caller guarantees off + n <= size
 * and n <= HDR + DPP_JOURNAL_MAX_PAYLOAD, so the buffer stays bounded. */
static int reader_get(reader_t *r, uint64_t off, size_t n, const uint8_t **out)
{
    if (off >= r->base && off + n <= r->base + r->len) {
        *out = r->buf + (off - r->base);
        return 0;
    }
    uint64_t want = n > READ_CHUNK ? n : READ_CHUNK;
    if (want > r->size - off)
        want = r->size - off;
    size_t keep = 0;
    if (off >= r->base && off < r->base + r->len) {
        keep = (size_t)(r->base + r->len - off);
        memmove(r->buf, r->buf + (off - r->base), keep);
    }
    if (want > r->cap) {
        r->buf = dpp_xrealloc(r->buf, (size_t)want);
        r->cap = (size_t)want;
    }
    r->base = off;
    r->len = keep;
    while (r->len < want) {
        ssize_t got = pread(r->fd, r->buf + r->len, (size_t)want - r->len, (off_t)(off + r->len));
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno ? -errno : -EIO;
        }
        if (got == 0)
            return -EIO; /* the file shrank under us */
        r->len += (size_t)got;
    }
    *out = r->buf + (off - r->base);
    return 0;
}

typedef struct rec_view {
    uint8_t type;
    const uint8_t *payload; /* valid until the next reader_get */
    uint32_t len;
    uint64_t next; /* offset just past the record */
} rec_view_t;

/* 1 when a complete, CRC-valid record starts at off (< size), 0 when not (with
 * *why), or a negative I/O error. The length is checked against the limit and
 * the file size before anything is read or allocated for the payload. */
static int check_record(reader_t *r, uint64_t off, rec_view_t *v, const char **why)
{
    uint64_t rest = r->size - off;
    const uint8_t *h = NULL;
    int rc;
    if (rest < HDR) {
        *why = "the file ends inside a record header";
        return 0;
    }
    if ((rc = reader_get(r, off, HDR, &h)) != 0)
        return rc;
    if (get_le32(h) != DPP_JOURNAL_MAGIC) {
        *why = "bad magic";
        return 0;
    }
    uint32_t len = get_le32(h + 4);
    if (len > DPP_JOURNAL_MAX_PAYLOAD) {
        *why = "length over the limit";
        return 0;
    }
    if (len > rest - HDR) {
        *why = "the file ends inside the record";
        return 0;
    }
    if ((rc = reader_get(r, off, HDR + (size_t)len, &h)) != 0)
        return rc;
    uint32_t crc = dpp_crc32c(0, h + 12, 1 + (size_t)len); /* type byte + payload */
    if (dpp_crc32c_mask(crc) != get_le32(h + 8)) {
        *why = "CRC mismatch";
        return 0;
    }
    v->type = h[12];
    v->payload = h + HDR;
    v->len = len;
    v->next = off + HDR + len;
    return 1;
}

/* Looks for a complete, CRC-valid record starting anywhere after a bad one at
 * bad_off. Finding one means the damage is not a torn tail. A candidate
 * is any occurrence of the magic bytes, so the cost is one pass over the rest
 * of the file plus a CRC per false candidate. */
static int find_valid_after(reader_t *r, uint64_t bad_off, uint64_t *found)
{
    static const uint8_t magic[4] = {'D', 'P', 'J', '1'};
    uint64_t pos = bad_off + 1;
    while (pos < r->size && r->size - pos >= HDR) {
        size_t win = (size_t)(r->size - pos < READ_CHUNK ? r->size - pos : READ_CHUNK);
        const uint8_t *p = NULL;
        int rc = reader_get(r, pos, win, &p);
        if (rc != 0)
            return rc;
        const uint8_t *hit = memmem(p, win, magic, sizeof magic);
        if (hit == NULL) {
            pos += win - (sizeof magic - 1); /* a magic may straddle windows */
            continue;
        }
        uint64_t cand = pos + (uint64_t)(hit - p);
        rec_view_t v = {0};
        const char *why = NULL;
        rc = check_record(r, cand, &v, &why);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            *found = cand;
            return 1;
        }
        pos = cand + 1;
    }
    return 0;
}

static int all_zero(reader_t *r, uint64_t off)
{
    while (off < r->size) {
        size_t win = (size_t)(r->size - off < READ_CHUNK ? r->size - off : READ_CHUNK);
        const uint8_t *p = NULL;
        if (reader_get(r, off, win, &p) != 0)
            return 0;
        for (size_t i = 0; i < win; i++)
            if (p[i] != 0)
                return 0;
        off += win;
    }
    return 1;
}

/* What the first pass learned about the file. */
typedef struct scan {
    uint64_t good_end; /* end of the last valid record */
    uint64_t records, payload_bytes;
    uint64_t snapshot_records, snapshot_bytes;
    int snapshot;     /* a complete snapshot begins the file */
    const char *torn; /* why the tail after good_end is cut, NULL when none */
} scan_t;

static int corrupt(dpp_journal_report_t *rep, const char *path, const char *what)
{
    snprintf(rep->text, sizeof rep->text, "journal %s: %s; refusing to open, file left untouched",
             path, what);
    return DPP_ECORRUPT;
}

/* First pass: checks every record and the snapshot's structure, and decides
 * whether what follows the valid records is a torn tail or damage. */
static int scan_file(reader_t *r, const char *path, scan_t *s, dpp_journal_report_t *rep)
{
    uint64_t off = 0, declared = 0;
    int in_snapshot = 0;
    char what[192];
    memset(s, 0, sizeof *s);
    while (off < r->size) {
        rec_view_t v = {0};
        const char *why = NULL;
        int rc = check_record(r, off, &v, &why);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            uint64_t next = 0;
            rc = find_valid_after(r, off, &next);
            if (rc < 0)
                return rc;
            if (rc == 1) {
                snprintf(what, sizeof what,
                         "bad record at byte offset %" PRIu64 " (%s) followed by a valid record "
                         "at byte offset %" PRIu64,
                         off, why, next);
                return corrupt(rep, path, what);
            }
            if (strcmp(why, "bad magic") == 0 && all_zero(r, off))
                why = "zero-filled tail";
            s->torn = why;
            break;
        }
        if (v.type == DPP_JOURNAL_SNAPSHOT_BEGIN) {
            if (off != 0 || v.len != 8) {
                snprintf(what, sizeof what,
                         "misplaced or malformed snapshot begin marker at byte offset %" PRIu64,
                         off);
                return corrupt(rep, path, what);
            }
            in_snapshot = 1;
            declared = get_le64(v.payload);
        } else if (v.type == DPP_JOURNAL_SNAPSHOT_END) {
            if (!in_snapshot || v.len != 8 || get_le64(v.payload) != declared ||
                declared != s->snapshot_records) {
                snprintf(what, sizeof what,
                         "snapshot end marker at byte offset %" PRIu64
                         " does not close a snapshot (%" PRIu64 " records seen)",
                         off, s->snapshot_records);
                return corrupt(rep, path, what);
            }
            in_snapshot = 0;
            s->snapshot = 1;
            s->snapshot_bytes = v.next;
        } else {
            s->records++;
            s->payload_bytes += v.len;
            if (in_snapshot)
                s->snapshot_records++;
        }
        off = v.next;
        s->good_end = off;
    }
    /* A snapshot is fsync'ed before it is renamed into place, so a crash
     * cannot leave one unfinished: cutting it would silently lose state. */
    if (in_snapshot) {
        snprintf(what, sizeof what,
                 "the snapshot at byte offset 0 has no end marker (valid records end at byte "
                 "offset %" PRIu64 ", file size %" PRIu64 ")",
                 s->good_end, r->size);
        return corrupt(rep, path, what);
    }
    return 0;
}

/* Second pass: hands the records checked by scan_file() to cb. */
static int replay(reader_t *r, const char *path, uint64_t end, dpp_journal_replay_cb cb, void *arg,
                  dpp_journal_report_t *rep)
{
    uint64_t off = 0;
    while (off < end) {
        rec_view_t v = {0};
        const char *why = NULL;
        int rc = check_record(r, off, &v, &why);
        if (rc < 0)
            return rc;
        if (rc == 0 || v.next > end) {
            snprintf(rep->text, sizeof rep->text,
                     "journal %s: record at byte offset %" PRIu64 " changed during replay", path,
                     off);
            return -EIO;
        }
        if (v.type != DPP_JOURNAL_SNAPSHOT_BEGIN && v.type != DPP_JOURNAL_SNAPSHOT_END) {
            rc = cb(arg, v.type, v.payload, v.len);
            if (rc != 0) {
                snprintf(rep->text, sizeof rep->text,
                         "journal %s: replay stopped at the record at byte offset %" PRIu64 ": %s",
                         path, off, dpp_strerror(rc));
                return rc;
            }
        }
        off = v.next;
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------- */

static int writev_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* The header of rec: magic, length, masked CRC-32C of type and payload,
 * type. */
static void put_header(uint8_t *h, const dpp_journal_rec_t *rec)
{
    uint32_t crc = dpp_crc32c(0, &rec->type, 1);
    if (rec->len > 0)
        crc = dpp_crc32c(crc, rec->payload, rec->len);
    put_le32(h, DPP_JOURNAL_MAGIC);
    put_le32(h + 4, (uint32_t)rec->len);
    put_le32(h + 8, dpp_crc32c_mask(crc));
    h[12] = rec->type;
}

/* Writes the records' headers and payloads; types and lengths are already
 * checked. Adds the file bytes written to *bytes. */
static int write_records(int fd, const dpp_journal_rec_t *recs, size_t n, uint64_t *bytes)
{
    uint8_t hdrs[WRITE_BATCH][HDR];
    struct iovec iov[2 * WRITE_BATCH];
    for (size_t at = 0; at < n; at += WRITE_BATCH) {
        size_t batch = n - at < WRITE_BATCH ? n - at : WRITE_BATCH;
        int cnt = 0;
        for (size_t i = 0; i < batch; i++) {
            const dpp_journal_rec_t *rec = &recs[at + i];
            uint8_t *h = hdrs[i];
            put_header(h, rec);
            iov[cnt++] = (struct iovec){.iov_base = h, .iov_len = HDR};
            if (rec->len > 0)
                iov[cnt++] = (struct iovec){.iov_base = (void *)rec->payload, .iov_len = rec->len};
            *bytes += HDR + rec->len;
        }
        int rc = writev_all(fd, iov, cnt);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int check_records(const dpp_journal_rec_t *recs, size_t n, uint64_t *payload_bytes)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (recs[i].type == DPP_JOURNAL_SNAPSHOT_BEGIN || recs[i].type == DPP_JOURNAL_SNAPSHOT_END)
            return DPP_EINVAL;
        if (recs[i].len > DPP_JOURNAL_MAX_PAYLOAD)
            return DPP_ETOOBIG;
        if (recs[i].len > 0 && recs[i].payload == NULL)
            return DPP_EINVAL;
        sum += recs[i].len;
    }
    *payload_bytes = sum;
    return 0;
}

/* ---- API -------------------------------------------------------------- */

int dpp_journal_open(dpp_journal_t **out, const char *dir, dpp_journal_replay_cb cb, void *arg,
                     dpp_journal_report_t *report)
{
    dpp_journal_report_t scratch;
    dpp_journal_report_t *rep = report ? report : &scratch;
    reader_t r = {.fd = -1};
    scan_t s;
    int rc, dir_changed = 0;

    memset(rep, 0, sizeof *rep);
    *out = NULL;
    dpp_journal_t *j = dpp_xcalloc(1, sizeof *j);
    j->fd = -1;
    j->dir = dpp_xstrdup(dir);
    j->path = join_path(dir, "journal");
    j->tmp_path = join_path(dir, "journal.tmp");

    /* journal.tmp only exists when a compaction stopped before its rename:
     * the journal beside it is the complete one. */
    if (unlink(j->tmp_path) == 0) {
        rep->removed_tmp = 1;
        dir_changed = 1;
    } else if (errno != ENOENT) {
        rc = -errno;
        snprintf(rep->text, sizeof rep->text, "journal %s: cannot remove: %s", j->tmp_path,
                 dpp_strerror(rc));
        goto fail;
    }

    j->fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC);
    if (j->fd < 0 && errno == ENOENT) {
        j->fd = open(j->path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        dir_changed = 1;
    }
    if (j->fd < 0) {
        rc = -errno;
        snprintf(rep->text, sizeof rep->text, "journal %s: %s", j->path, dpp_strerror(rc));
        goto fail;
    }
    struct stat st;
    if (fstat(j->fd, &st) != 0) {
        rc = -errno;
        snprintf(rep->text, sizeof rep->text, "journal %s: %s", j->path, dpp_strerror(rc));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = DPP_EINVAL;
        snprintf(rep->text, sizeof rep->text, "journal %s: not a regular file", j->path);
        goto fail;
    }

    r.fd = j->fd;
    r.size = (uint64_t)st.st_size;
    rc = scan_file(&r, j->path, &s, rep);
    if (rc == 0 && cb != NULL)
        rc = replay(&r, j->path, s.good_end, cb, arg, rep);
    rep->records = s.records;
    rep->bytes = s.good_end;
    rep->torn_bytes = r.size - s.good_end;
    rep->snapshot = s.snapshot;
    rep->snapshot_records = s.snapshot_records;
    rep->buffer_peak = r.cap;
    if (rc != 0) {
        if (rep->text[0] == '\0')
            snprintf(rep->text, sizeof rep->text, "journal %s: %s", j->path, dpp_strerror(rc));
        goto fail;
    }
    free(r.buf);
    r.buf = NULL;

    if (s.torn != NULL) {
        if (ftruncate(j->fd, (off_t)s.good_end) != 0 || fsync(j->fd) != 0) {
            rc = -errno;
            snprintf(rep->text, sizeof rep->text,
                     "journal %s: cannot cut the torn tail at byte offset %" PRIu64 ": %s", j->path,
                     s.good_end, dpp_strerror(rc));
            goto fail;
        }
        j->stats.syncs++;
        rep->truncated = 1;
        snprintf(rep->text, sizeof rep->text,
                 "journal %s: %" PRIu64 " records, %" PRIu64 " bytes; cut a torn tail of %" PRIu64
                 " bytes at byte offset %" PRIu64 " (%s)",
                 j->path, s.records, s.good_end, rep->torn_bytes, s.good_end, s.torn);
    } else {
        snprintf(rep->text, sizeof rep->text,
                 "journal %s: %" PRIu64 " records, %" PRIu64 " bytes, clean%s", j->path, s.records,
                 s.good_end, rep->removed_tmp ? "; removed a stale journal.tmp" : "");
    }
    /* A new journal's name, or the stale tmp's removal, must be durable before
     * anything appended to it is acknowledged. */
    if (dir_changed) {
        rc = fsync_dir(dir);
        if (rc != 0) {
            snprintf(rep->text, sizeof rep->text, "journal %s: fsync of the directory: %s", j->path,
                     dpp_strerror(rc));
            goto fail;
        }
        j->stats.syncs++;
    }

    j->stats.records = s.records;
    j->stats.payload_bytes = s.payload_bytes;
    j->stats.file_size = s.good_end;
    j->stats.snapshot_records = s.snapshot ? s.snapshot_records : 0;
    j->stats.snapshot_bytes = s.snapshot ? s.snapshot_bytes : 0;
    *out = j;
    return 0;

fail:
    free(r.buf);
    dpp_journal_close(j);
    return rc;
}

int dpp_journal_write(dpp_journal_t *j, const dpp_journal_rec_t *recs, size_t n)
{
    uint64_t payload = 0;
    if (j->failed)
        return j->failed;
    int rc = check_records(recs, n, &payload);
    if (rc != 0 || n == 0)
        return rc;
    size_t need = j->len + n * HDR + (size_t)payload;
    if (need > j->cap) {
        size_t cap = j->cap ? j->cap : 64 * 1024;
        while (cap < need)
            cap *= 2;
        uint8_t *b = realloc(j->buf, cap);
        if (b == NULL)
            return -ENOMEM;
        j->buf = b;
        j->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        put_header(j->buf + j->len, &recs[i]);
        if (recs[i].len > 0)
            memcpy(j->buf + j->len + HDR, recs[i].payload, recs[i].len);
        j->len += HDR + recs[i].len;
    }
    j->buf_records += n;
    j->buf_payload += payload;
    return j->len >= FLUSH_AT ? dpp_journal_flush(j) : 0;
}

/* Forgets what the buffer held; a buffer a big record grew is let go. */
static void drop_buffer(dpp_journal_t *j)
{
    j->len = 0;
    j->buf_records = j->buf_payload = 0;
    if (j->cap > 4 * FLUSH_AT) {
        free(j->buf);
        j->buf = NULL;
        j->cap = 0;
    }
}

int dpp_journal_flush(dpp_journal_t *j)
{
    if (j->len == 0)
        return 0;
    if (j->failed)
        return j->failed;
    struct iovec iov = {.iov_base = j->buf, .iov_len = j->len};
    j->stats.writes++;
    int rc = writev_all(j->fd, &iov, 1);
    if (rc != 0) {
        /* Later appends would land after the partial record and turn a torn
         * tail into damage in the middle, so cut it off or stop. */
        if (ftruncate(j->fd, (off_t)j->stats.file_size) != 0)
            j->failed = rc;
        drop_buffer(j);
        return rc;
    }
    j->unsynced = 1;
    j->stats.records += j->buf_records;
    j->stats.payload_bytes += j->buf_payload;
    j->stats.file_size += j->len;
    j->stats.appends += j->buf_records;
    drop_buffer(j);
    return 0;
}

int dpp_journal_sync(dpp_journal_t *j)
{
    int rc = dpp_journal_flush(j);
    if (rc)
        return rc;
    if (!j->unsynced)
        return 0;
    j->stats.syncs++;
    if (fdatasync(j->fd) != 0) {
        j->failed = -errno;
        return j->failed;
    }
    j->unsynced = 0;
    return 0;
}

int dpp_journal_append_many(dpp_journal_t *j, const dpp_journal_rec_t *recs, size_t n)
{
    int rc = dpp_journal_write(j, recs, n);
    return rc ? rc : dpp_journal_sync(j);
}

int dpp_journal_append(dpp_journal_t *j, uint8_t type, const void *payload, size_t len)
{
    dpp_journal_rec_t rec = {.type = type, .payload = payload, .len = len};
    return dpp_journal_append_many(j, &rec, 1);
}

int dpp_journal_compact(dpp_journal_t *j, const dpp_journal_rec_t *recs, size_t n)
{
    uint64_t payload = 0, bytes = 0;
    uint8_t count[8];
    int fd = -1;
    if (j->failed)
        return j->failed;
    int rc = check_records(recs, n, &payload);
    if (rc != 0)
        return rc;

    put_le64(count, n);
    dpp_journal_rec_t begin = {DPP_JOURNAL_SNAPSHOT_BEGIN, count, sizeof count};
    dpp_journal_rec_t end = {DPP_JOURNAL_SNAPSHOT_END, count, sizeof count};
    fd = open(j->tmp_path, O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    if ((rc = write_records(fd, &begin, 1, &bytes)) != 0 ||
        (rc = write_records(fd, recs, n, &bytes)) != 0 ||
        (rc = write_records(fd, &end, 1, &bytes)) != 0)
        goto abandon;
    j->stats.syncs++;
    if (fsync(fd) != 0 || rename(j->tmp_path, j->path) != 0) {
        rc = -errno;
        goto abandon;
    }

    close(j->fd);
    j->fd = fd;
    j->unsynced = 0; /* the snapshot holds everything, synced */
    drop_buffer(j);  /* and what was buffered: the caller's state holds it */
    j->stats.records = n;
    j->stats.payload_bytes = payload;
    j->stats.file_size = bytes;
    j->stats.snapshot_records = n;
    j->stats.snapshot_bytes = bytes;
    j->stats.compactions++;
    /* Until the directory is synced a crash may bring the old journal back,
     * without what would be appended to the new one. */
    j->stats.syncs++;
    rc = fsync_dir(j->dir);
    if (rc != 0)
        j->failed = rc;
    return rc;

abandon:
    close(fd);
    unlink(j->tmp_path);
    return rc;
}

int dpp_journal_check_path(const dpp_journal_t *j)
{
    struct stat fst, pst;
    if (fstat(j->fd, &fst) != 0)
        return -errno;
    if (fst.st_nlink == 0)
        return -ENOENT;
    if (stat(j->path, &pst) != 0)
        return errno == ENOENT ? -ENOENT : -errno;
    if (pst.st_dev != fst.st_dev || pst.st_ino != fst.st_ino)
        return -ESTALE;
    return 0;
}

void dpp_journal_get_stats(const dpp_journal_t *j, dpp_journal_stats_t *out)
{
    *out = j->stats;
}

void dpp_journal_close(dpp_journal_t *j)
{
    if (j == NULL)
        return;
    if (j->fd >= 0) {
        dpp_journal_flush(j); /* into the file, unsynced, as an append would have been */
        close(j->fd);
    }
    free(j->buf);
    free(j->path);
    free(j->tmp_path);
    free(j->dir);
    free(j);
}
