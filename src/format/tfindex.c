/* SPDX-License-Identifier: Apache-2.0 */
/* DALI-style record index sidecars: strict parsing, building one from a
 * TFRecord file's framing, and atomic writing. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "dpp/error.h"
#include "format/tfindex.h"
#include "format/tfrecord.h"

#define HEADER_LEN 12            /* u64 length + masked CRC of it */
#define SCAN_WINDOW (256u << 10) /* bytes per pread while scanning */
#define WRITE_BUF (64u << 10)

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void dpp_tfindex_close(dpp_tfindex_t *idx)
{
    free(idx->offsets);
    free(idx->sizes);
    memset(idx, 0, sizeof *idx);
}

/* Makes room for one more record. */
static int reserve(dpp_tfindex_t *idx, size_t *cap)
{
    if (idx->n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 1024;
    if (ncap > SIZE_MAX / sizeof(uint64_t))
        return -ENOMEM;
    uint64_t *o = realloc(idx->offsets, ncap * sizeof *o);
    if (o == NULL)
        return -ENOMEM;
    idx->offsets = o;
    uint64_t *s = realloc(idx->sizes, ncap * sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    idx->sizes = s;
    *cap = ncap;
    return 0;
}

/* Reads a decimal field at text[*pos]. Returns 0, or 1 when there is no
 * digit, 2 when the value passes 2^64 - 1. */
static int parse_field(const char *text, size_t len, size_t *pos, uint64_t *out)
{
    size_t p = *pos;
    uint64_t v = 0;
    if (p >= len || text[p] < '0' || text[p] > '9')
        return 1;
    for (; p < len && text[p] >= '0' && text[p] <= '9'; p++) {
        unsigned d = (unsigned)(text[p] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 2;
        v = v * 10 + d;
    }
    *pos = p;
    *out = v;
    return 0;
}

static const char *char_name(char c, char *buf, size_t len)
{
    if (c == ' ')
        return "a space";
    if (c == '\t')
        return "a tab";
    if (c == '\r')
        return "a carriage return without a newline";
    if (c >= 0x21 && c < 0x7f)
        snprintf(buf, len, "'%c'", c);
    else
        snprintf(buf, len, "byte 0x%02x", (unsigned char)c);
    return buf;
}

int dpp_tfindex_parse(const char *text, size_t len, uint64_t file_size, dpp_tfindex_t *out,
                      char *err, size_t errlen)
{
    dpp_tfindex_t idx = {0};
    size_t lines = 0, pos = 0, line = 0;
    uint64_t end = 0; /* where the previous record ends */
    char cbuf[16];
    int rc = DPP_EINVAL;

    memset(out, 0, sizeof *out);
    set_err(err, errlen, "%s", "");
    /* Sized up front from the newlines, so a big index costs two arrays, not
     * a chain of reallocations. */
    for (const char *p = text; p && (p = memchr(p, '\n', len - (size_t)(p - text))) != NULL; p++)
        lines++;
    if (len > 0 && text[len - 1] != '\n')
        lines++;
    if (lines > 0) {
        if (lines > SIZE_MAX / sizeof(uint64_t))
            return -ENOMEM;
        idx.offsets = malloc(lines * sizeof *idx.offsets);
        idx.sizes = malloc(lines * sizeof *idx.sizes);
        if (idx.offsets == NULL || idx.sizes == NULL) {
            rc = -ENOMEM;
            set_err(err, errlen, "out of memory for %zu index lines", lines);
            goto fail;
        }
    }
    while (pos < len) {
        uint64_t off, size;
        int f;
        line++;
        if (text[pos] == '\n' || text[pos] == '\r') {
            set_err(err, errlen, "line %zu: empty line", line);
            goto fail;
        }
        if ((f = parse_field(text, len, &pos, &off)) != 0) {
            set_err(err, errlen, "line %zu: %s", line,
                    f == 2 ? "offset does not fit in 64 bits" : "offset is not a decimal number");
            goto fail;
        }
        if (pos >= len || (text[pos] != ' ' && text[pos] != '\t')) {
            set_err(err, errlen, "line %zu: expected a space or tab and a size after the offset",
                    line);
            goto fail;
        }
        pos++;
        if ((f = parse_field(text, len, &pos, &size)) != 0) {
            set_err(err, errlen, "line %zu: %s", line,
                    f == 2 ? "size does not fit in 64 bits"
                    : pos < len && (text[pos] == ' ' || text[pos] == '\t')
                        ? "fields are separated by more than one space or tab"
                        : "size is not a decimal number");
            goto fail;
        }
        if (pos < len && text[pos] == '\r' && pos + 1 < len && text[pos + 1] == '\n')
            pos += 2;
        else if (pos < len && text[pos] == '\n')
            pos++;
        else if (pos < len) {
            set_err(err, errlen, "line %zu: %s after the size (two fields a line)", line,
                    char_name(text[pos], cbuf, sizeof cbuf));
            goto fail;
        }
        if (size < DPP_TFRECORD_OVERHEAD) {
            set_err(err, errlen,
                    "line %zu: size %" PRIu64 " is smaller than a record's framing (16 bytes)",
                    line, size);
            goto fail;
        }
        if (off != end) {
            if (idx.n == 0)
                set_err(err, errlen, "line %zu: first record at offset %" PRIu64 ", not 0", line,
                        off);
            else if (off < end)
                set_err(err, errlen,
                        "line %zu: record at offset %" PRIu64
                        " overlaps the previous one, which ends at %" PRIu64,
                        line, off, end);
            else
                set_err(err, errlen,
                        "line %zu: gap: record at offset %" PRIu64
                        " but the previous one ends at %" PRIu64,
                        line, off, end);
            goto fail;
        }
        if (size > UINT64_MAX - off) {
            set_err(err, errlen,
                    "line %zu: record at offset %" PRIu64 " of size %" PRIu64 " ends past 2^64",
                    line, off, size);
            goto fail;
        }
        idx.offsets[idx.n] = off;
        idx.sizes[idx.n] = size;
        idx.n++;
        end = off + size;
    }
    if (file_size != UINT64_MAX && end != file_size) {
        if (line == 0)
            set_err(err, errlen, "line 1: the index is empty but the file has %" PRIu64 " bytes",
                    file_size);
        else
            set_err(err, errlen,
                    "line %zu: the records end at %" PRIu64 " but the file has %" PRIu64 " bytes",
                    line, end, file_size);
        goto fail;
    }
    *out = idx;
    return 0;

fail:
    dpp_tfindex_close(&idx);
    return rc;
}

int dpp_tfindex_load(const char *idx_path, uint64_t file_size, dpp_tfindex_t *out, char *err,
                     size_t errlen)
{
    struct stat st;
    char *text = NULL;
    int rc;

    memset(out, 0, sizeof *out);
    int fd = open(idx_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        rc = -errno;
        set_err(err, errlen, "cannot open the index: %s", strerror(errno));
        return rc;
    }
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        set_err(err, errlen, "cannot stat the index: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = DPP_EINVAL;
        set_err(err, errlen, "the index is not a regular file");
        goto out;
    }
    if ((uint64_t)st.st_size > DPP_TFINDEX_MAX_TEXT) {
        rc = DPP_ETOOBIG;
        set_err(err, errlen, "the index has %" PRIu64 " bytes, more than the %llu accepted",
                (uint64_t)st.st_size, DPP_TFINDEX_MAX_TEXT);
        goto out;
    }
    size_t size = (size_t)st.st_size, got = 0;
    text = malloc(size ? size : 1);
    if (text == NULL) {
        rc = -ENOMEM;
        set_err(err, errlen, "out of memory for a %zu-byte index", size);
        goto out;
    }
    while (got < size) {
        ssize_t n = read(fd, text + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            set_err(err, errlen, "cannot read the index: %s", strerror(errno));
            goto out;
        }
        if (n == 0)
            break; /* shrank since fstat: parse what is there */
        got += (size_t)n;
    }
    rc = dpp_tfindex_parse(text, got, file_size, out, err, errlen);
out:
    free(text);
    close(fd);
    return rc;
}

/* ---- scanning a TFRecord file ---------------------------------------------- */

typedef struct window {
    int fd;
    uint8_t *buf; /* SCAN_WINDOW bytes */
    uint64_t off; /* file offset of buf[0] */
    size_t len;   /* valid bytes */
} window_t;

/* Reads the window at off. Returns 0 or -errno; len < SCAN_WINDOW at EOF. */
static int window_fill(window_t *w, uint64_t off)
{
    w->off = off;
    w->len = 0;
    while (w->len < SCAN_WINDOW) {
        ssize_t n = pread(w->fd, w->buf + w->len, SCAN_WINDOW - w->len, (off_t)(off + w->len));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        w->len += (size_t)n;
    }
    return 0;
}

/* Points *p at up to want bytes from off (refilling the window when off is
 * outside it). Returns the byte count (0: the file ends at off) or -errno. */
static ssize_t window_get(window_t *w, uint64_t off, size_t want, const uint8_t **p)
{
    if (off < w->off || off >= w->off + w->len) {
        int rc = window_fill(w, off);
        if (rc)
            return rc;
    }
    size_t avail = w->len - (size_t)(off - w->off);
    *p = w->buf + (off - w->off);
    return (ssize_t)(avail < want ? avail : want);
}

/* Copies n bytes at off into dst across window refills. Returns 0,
 * DPP_ETRUNCATED when the file ends first, or -errno. */
static int window_copy(window_t *w, uint64_t off, size_t n, uint8_t *dst)
{
    while (n > 0) {
        const uint8_t *p = NULL;
        ssize_t got = window_get(w, off, n, &p);
        if (got < 0)
            return (int)got;
        if (got == 0)
            return DPP_ETRUNCATED;
        memcpy(dst, p, (size_t)got);
        dst += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/* The payload CRC of the record whose payload is [off, off + len). */
static int payload_ok(window_t *w, uint64_t off, uint64_t len, int *ok)
{
    uint32_t crc = 0;
    uint8_t stored[4];
    uint64_t end = off + len;
    while (off < end) {
        const uint8_t *p = NULL;
        uint64_t left = end - off;
        ssize_t got = window_get(w, off, left < SCAN_WINDOW ? (size_t)left : SCAN_WINDOW, &p);
        if (got < 0)
            return (int)got;
        if (got == 0)
            return DPP_ETRUNCATED;
        crc = dpp_crc32c(crc, p, (size_t)got);
        off += (uint64_t)got;
    }
    int rc = window_copy(w, end, 4, stored);
    if (rc)
        return rc;
    uint32_t want = (uint32_t)stored[0] | (uint32_t)stored[1] << 8 | (uint32_t)stored[2] << 16 |
                    (uint32_t)stored[3] << 24;
    *ok = dpp_crc32c_unmask(want) == crc;
    return 0;
}

/* Where records resume after the framing broke at off (tfrecord.h:
 * resynchronisation): *next, or size when nowhere. Returns 0 or -errno. */
static int resync(window_t *w, uint64_t off, uint64_t size, uint64_t max_record, uint64_t *next)
{
    unsigned false_candidates = 0;
    *next = size;
    for (uint64_t p = off + 1; p < size && size - p >= DPP_TFRECORD_OVERHEAD; p++) {
        uint8_t hdr[HEADER_LEN];
        int rc = window_copy(w, p, HEADER_LEN, hdr);
        if (rc)
            return rc == DPP_ETRUNCATED ? 0 : rc; /* the file shrank under the scan */
        uint64_t length;
        int hrc = dpp_tfrecord_header(hdr, max_record, &length);
        if (hrc == DPP_ECORRUPT)
            continue;
        int ok = 0;
        if (hrc == 0 && length <= size - p - DPP_TFRECORD_OVERHEAD &&
            (rc = payload_ok(w, p + HEADER_LEN, length, &ok)) != 0 && rc != DPP_ETRUNCATED)
            return rc;
        if (ok) {
            *next = p;
            return 0;
        }
        if (++false_candidates == DPP_TFRECORD_RESYNC_CANDIDATES)
            return 0;
    }
    return 0;
}

static int scan_file(const char *path, int verify, uint64_t max_record, dpp_tfindex_t *out,
                     dpp_tfindex_scan_result_t *tail, char *err, size_t errlen)
{
    dpp_tfindex_t idx = {0};
    window_t w = {.fd = -1};
    size_t cap = 0;
    struct stat st;
    uint64_t off = 0;
    int rc = 0, bad = 0;

    memset(out, 0, sizeof *out);
    if (tail)
        memset(tail, 0, sizeof *tail);
    set_err(err, errlen, "%s", "");
    if (max_record == 0)
        max_record = UINT64_MAX;
    w.fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (w.fd < 0) {
        rc = -errno;
        set_err(err, errlen, "cannot open: %s", strerror(errno));
        return rc;
    }
    if (fstat(w.fd, &st) != 0) {
        rc = -errno;
        set_err(err, errlen, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        set_err(err, errlen, "not a regular file");
        goto out;
    }
    if ((w.buf = malloc(SCAN_WINDOW)) == NULL) {
        rc = -ENOMEM;
        set_err(err, errlen, "out of memory");
        goto out;
    }
    posix_fadvise(w.fd, 0, 0, verify ? POSIX_FADV_SEQUENTIAL : POSIX_FADV_RANDOM);
    uint64_t size = (uint64_t)st.st_size;
    while (off < size) {
        uint8_t hdr[HEADER_LEN];
        rc = size - off < HEADER_LEN ? DPP_ETRUNCATED : window_copy(&w, off, HEADER_LEN, hdr);
        if (rc == DPP_ETRUNCATED) {
            bad = rc;
            break;
        }
        if (rc)
            goto io_error;
        uint64_t length = 0;
        int hrc = dpp_tfrecord_header(hdr, max_record, &length);
        if (hrc == DPP_ECORRUPT && tail != NULL) {
            /* the framing is lost here: find where records resume */
            uint64_t next;
            if ((rc = resync(&w, off, size, max_record, &next)) != 0)
                goto io_error;
            if (next < size) {
                if (tail->gaps++ == 0) {
                    tail->gap_offset = off;
                    tail->gap_resume = next;
                }
                tail->gap_bytes += next - off;
                off = next;
                continue;
            }
        }
        if (hrc) {
            bad = hrc;
            break;
        }
        /* Written so that a length near 2^64 cannot wrap. */
        if (length > size - off - HEADER_LEN || size - off - HEADER_LEN - length < 4) {
            bad = DPP_ETRUNCATED;
            break;
        }
        if (verify) {
            int ok = 0;
            rc = payload_ok(&w, off + HEADER_LEN, length, &ok);
            if (rc == DPP_ETRUNCATED) { /* the file shrank under the scan */
                bad = rc;
                break;
            }
            if (rc)
                goto io_error;
            if (!ok) {
                bad = DPP_ECORRUPT;
                break;
            }
        }
        if ((rc = reserve(&idx, &cap)) != 0) {
            set_err(err, errlen, "out of memory after %zu records", idx.n);
            goto out;
        }
        idx.offsets[idx.n] = off;
        idx.sizes[idx.n] = length + DPP_TFRECORD_OVERHEAD;
        idx.n++;
        off += length + DPP_TFRECORD_OVERHEAD;
    }
    if (bad) {
        if (bad == DPP_ETOOBIG)
            set_err(err, errlen, "record at offset %" PRIu64 " exceeds the size limit", off);
        else
            set_err(err, errlen, "%s record at offset %" PRIu64,
                    bad == DPP_ECORRUPT ? "corrupted" : "truncated", off);
        if (tail == NULL) {
            rc = bad;
            goto out;
        }
        tail->error = bad;
        tail->error_offset = off;
    }
    *out = idx;
    idx = (dpp_tfindex_t){0};
    rc = 0;
    goto out;

io_error:
    set_err(err, errlen, "read at offset %" PRIu64 ": %s", off, dpp_strerror(rc));
out:
    dpp_tfindex_close(&idx);
    free(w.buf);
    close(w.fd);
    return rc;
}

int dpp_tfindex_scan(const char *tfrecord_path, uint64_t max_record, dpp_tfindex_t *out,
                     dpp_tfindex_scan_result_t *tail, char *err, size_t errlen)
{
    return scan_file(tfrecord_path, 0, max_record, out, tail, err, errlen);
}

int dpp_tfindex_scan_verify(const char *tfrecord_path, uint64_t max_record, dpp_tfindex_t *out,
                            dpp_tfindex_scan_result_t *tail, char *err, size_t errlen)
{
    return scan_file(tfrecord_path, 1, max_record, out, tail, err, errlen);
}

/* ---- writing ---------------------------------------------------------------- */

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Formats v in decimal at the end of buf[0..21); returns where it starts. */
static char *format_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

static atomic_uint temp_counter;

int dpp_tfindex_write(const dpp_tfindex_t *idx, const char *idx_path)
{
    char tmp[4096];
    char *buf = NULL;
    int fd = -1, rc;

    for (size_t i = 0; i < idx->n; i++) {
        uint64_t want = i ? idx->offsets[i - 1] + idx->sizes[i - 1] : 0;
        if (idx->offsets[i] != want || idx->sizes[i] < DPP_TFRECORD_OVERHEAD ||
            idx->sizes[i] > UINT64_MAX - idx->offsets[i])
            return DPP_EINVAL;
    }
    /* A hidden name beside the target: same filesystem for rename(), and
     * table listings skip dot files. */
    const char *slash = strrchr(idx_path, '/');
    int dirlen = slash ? (int)(slash - idx_path + 1) : 0;
    const char *base = idx_path + dirlen;
    for (int attempt = 0;; attempt++) {
        int n = snprintf(tmp, sizeof tmp, "%.*s.%s.tmp.%ld.%u", dirlen, idx_path, base,
                         (long)getpid(), atomic_fetch_add(&temp_counter, 1));
        if (n < 0 || (size_t)n >= sizeof tmp)
            return -ENAMETOOLONG;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0)
            break;
        if (errno != EEXIST || attempt == 100)
            return -errno;
    }
    if ((buf = malloc(WRITE_BUF)) == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    size_t used = 0;
    for (size_t i = 0; i < idx->n; i++) {
        char num[24];
        if (WRITE_BUF - used < 2 * sizeof num) {
            if ((rc = write_all(fd, buf, used)) != 0)
                goto fail;
            used = 0;
        }
        char *s = format_u64(num + sizeof num, idx->offsets[i]);
        memcpy(buf + used, s, (size_t)(num + sizeof num - s));
        used += (size_t)(num + sizeof num - s);
        buf[used++] = ' ';
        s = format_u64(num + sizeof num, idx->sizes[i]);
        memcpy(buf + used, s, (size_t)(num + sizeof num - s));
        used += (size_t)(num + sizeof num - s);
        buf[used++] = '\n';
    }
    if ((rc = write_all(fd, buf, used)) != 0)
        goto fail;
    if (fsync(fd) != 0) {
        rc = -errno;
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = -errno;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, idx_path) != 0) {
        rc = -errno;
        goto fail;
    }
    free(buf);
    return 0;

fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(buf);
    return rc;
}
