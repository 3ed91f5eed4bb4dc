// SPDX-License-Identifier: Apache-2.0
// Streaming TFRecord reader: a ring of read buffers kept filled by io_uring
// (or pread), records handed out in place, both CRCs checked.
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <liburing.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "format/tfrecord.h"
#include "base/util.h"
#include "dpp/error.h"
#include "reader.h"
#include "storage/s3.h"

#define HEADER_LEN 12      /* u64 length + masked CRC of it */
#define DIRECT_ALIGN 4096u /* offsets, lengths and buffers of O_DIRECT reads */
#define SCRATCH_MIN (64u << 10)
/* The longest ranged GET of dpp_reader_read_ranges: an object store's
 * request costs a round trip of milliseconds, so pieces are MiB-scale. */
#define OBJECT_PIECE (8u << 20)

enum slot_state { SLOT_IDLE, SLOT_INFLIGHT, SLOT_READY };

/* One buffer of the ring and the read that fills it. Chunk k of the open
 * range lives in slot k % depth. */
typedef struct slot {
    uint8_t *buf; /* chunk bytes, DIRECT_ALIGN-aligned; owned by the reader */
    uint64_t off; /* file offset of buf[0] */
    size_t want;  /* bytes asked for (aligned up with O_DIRECT) */
    size_t need;  /* bytes that must arrive: up to the end of the data */
    size_t got;   /* bytes arrived so far, from buf[0] */
    size_t len;   /* READY: valid bytes in buf */
    int state;
    int err;          /* READY: the read failed with this -errno */
    int eof;          /* READY: the file ended before `need` bytes */
    int direct;       /* the last read was issued while fd had O_DIRECT */
    dpp_s3_req_t req; /* an object's: the ranged GET that fills buf */
} slot_t;

struct dpp_reader {
    struct io_uring ring;
    int use_uring;
    int want_direct;
    int time_crc;
    unsigned depth;
    size_t chunk;
    uint64_t max_record;
    slot_t *slots;         /* depth of them */
    unsigned inflight;     /* uring reads submitted and not yet completed */
    unsigned ring_entries; /* the ring's size: depth, or more for dpp_reader_read_ranges */

    /* The open range. Chunk k covers file bytes [rd_start + k * chunk, ...)
     * up to rd_end; records are in [fpos, data_end). */
    int fd;        /* -1: no file open */
    int fd_direct; /* fd currently has O_DIRECT */
    uint64_t rd_start, rd_end;
    uint64_t data_end;  /* min(range end, file size) */
    uint64_t size;      /* of the file or object */
    uint64_t range_end; /* the end the caller expects records up to */
    uint64_t nchunks;
    uint64_t cur_chunk; /* the chunk being consumed */
    size_t pos;         /* next unconsumed byte in cur_chunk's buffer */
    uint64_t fpos;      /* file offset of the next record */
    int stuck;          /* sticky error, or 0 */
    uint64_t stuck_off;
    /* framing breaks resynchronised past in this range (tfrecord.h): how
     * many, and the last one's bytes [gap_from, gap_to) */
    uint64_t gaps, gap_from, gap_to;

    /* A record that straddles buffers is assembled here: it holds file bytes
     * [fpos, fpos + scratch_len), and pos is just past them in cur_chunk. */
    uint8_t *scratch;
    size_t scratch_cap;
    size_t scratch_len;

    /* An object open instead of a file (fd -1): its client, name and
     * version; each slot's chunk is a ranged GET with If-Match. */
    dpp_s3_t *s3;
    dpp_s3_url_t obj;
    char etag[DPP_S3_ETAG_MAX];
    char obj_err[512]; /* the store's words for the last failed GET */

    dpp_reader_stats_t stats;
};

static atomic_int uring_fallback_logged;
static atomic_int direct_fallback_logged;

static void config_resolve(const dpp_reader_config_t *cfg, dpp_reader_config_t *out)
{
    static const dpp_reader_config_t none = {0};
    *out = cfg ? *cfg : none;
    if (out->chunk_bytes == 0)
        out->chunk_bytes = DPP_READER_DEFAULT_CHUNK;
    if (out->depth == 0)
        out->depth = DPP_READER_DEFAULT_DEPTH;
    if (out->max_record == 0)
        out->max_record = DPP_READER_DEFAULT_MAX_RECORD;
    if (out->direct)
        out->chunk_bytes = (out->chunk_bytes + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
}

size_t dpp_reader_memory_bound(const dpp_reader_config_t *cfg)
{
    dpp_reader_config_t c;
    config_resolve(cfg, &c);
    return (size_t)c.depth * c.chunk_bytes + (size_t)c.max_record + DPP_TFRECORD_OVERHEAD;
}

/* The defaults (512 KiB chunks, depth 4) come from bench_reader on the dev
 * VM (2 vCPU EPYC, 1 MiB L2, virtio disk the host caches, ext4, kernel 6.18),
 * a 1 GiB file of ~700-byte records, median of 3-5 runs, MB/s:
 *
 *   buffered, evicted from the guest's page cache (`bench_reader`): flat,
 *   3.4-3.7 GB/s for every chunk from 64 KiB to 4 MiB and depth 1-16 (e.g.
 *   64K x1 3532, 256K x4 3670, 512K x2 3710, 1M x4 3724, 4M x16 2993); pread
 *   2.0-2.9. CRC and copying bound it, not I/O (I/O wait ~5%).
 *
 *   O_DIRECT (same run): wants bytes in flight: 64K x1 641, 64K x4 988,
 *   256K x2 1493, 512K x2 1765, 1M x2 1842, 1M x4 1133-1442, 4M x8 1567;
 *   no gain past ~1-2 MiB in flight (run-to-run noise is +-30% here).
 *
 *   in the page cache (`bench_reader --warm --chunks 128,256,512,1024
 *   --depths 1,2,4,8`): 128K 2.8-3.6 GB/s, 256K 3.7-3.8, 512K x1-x4 3.8-3.9,
 *   512K x8 2.8, 1M 3.0-3.4: a small total keeps each chunk in cache between
 *   the kernel's copy into it and the CRC over it.
 *
 * 512 KiB x 4 sits on every plateau with 2 MiB per thread, and copies 0.18%
 * of the bytes for records straddling chunks (0.72% at 128 KiB). Depth 4
 * rather than 2 leaves requests in flight for network filesystems, where
 * latency rather than the copy bounds a stream. Timing the CRC costs two
 * clock reads per record (warm: 3.8 -> 2.6 GB/s), hence cfg->time_crc. */
int dpp_reader_new(dpp_reader_t **out, const dpp_reader_config_t *cfg)
{
    dpp_reader_config_t c;
    dpp_reader_t *r = NULL;
    int rc;

    *out = NULL;
    config_resolve(cfg, &c);
    if (c.chunk_bytes > DPP_READER_MAX_CHUNK || c.depth > DPP_READER_MAX_DEPTH ||
        c.max_record > DPP_READER_MAX_MAX_RECORD)
        return DPP_EINVAL;
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    r->fd = -1;
    r->depth = c.depth;
    r->chunk = c.chunk_bytes;
    r->max_record = c.max_record;
    r->want_direct = c.direct;
    r->time_crc = c.time_crc;
    r->slots = calloc(r->depth, sizeof *r->slots);
    if (r->slots == NULL)
        goto nomem;
    /* Every buffer is aligned for O_DIRECT, so that one ring serves direct
     * and buffered files alike. */
    for (unsigned i = 0; i < r->depth; i++)
        if (posix_memalign((void **)&r->slots[i].buf, DIRECT_ALIGN, r->chunk) != 0)
            goto nomem;

    const char *force = getenv("DPP_FORCE_PREAD");
    int forced = c.force_pread || (force && strcmp(force, "1") == 0);
    r->ring_entries = r->depth > DPP_READER_RANGES_DEPTH ? r->depth : DPP_READER_RANGES_DEPTH;
    rc = forced ? -EPERM : io_uring_queue_init(r->ring_entries, &r->ring, 0);
    if (rc == 0) {
        /* IORING_OP_READ needs Linux 5.6; an older ring would fail every read. */
        struct io_uring_probe *probe = io_uring_get_probe_ring(&r->ring);
        if (probe && io_uring_opcode_supported(probe, IORING_OP_READ)) {
            r->use_uring = 1;
        } else {
            io_uring_queue_exit(&r->ring);
            rc = -EOPNOTSUPP;
        }
        if (probe)
            io_uring_free_probe(probe);
    }
    if (rc != 0 && atomic_exchange(&uring_fallback_logged, 1) == 0) {
        if (forced)
            DPP_WARN("io_uring_unavailable fallback=pread reason=%s",
                     c.force_pread ? "--force-pread" : "DPP_FORCE_PREAD");
        else
            DPP_WARN("io_uring_unavailable error=\"%s\" fallback=pread", dpp_strerror(rc));
    }
    *out = r;
    return 0;

nomem:
    dpp_reader_free(r);
    return -ENOMEM;
}

void dpp_reader_free(dpp_reader_t *r)
{
    if (r == NULL)
        return;
    dpp_reader_close(r);
    if (r->use_uring)
        io_uring_queue_exit(&r->ring);
    if (r->slots)
        for (unsigned i = 0; i < r->depth; i++)
            free(r->slots[i].buf);
    free(r->slots);
    free(r->scratch);
    free(r);
}

int dpp_reader_uses_uring(const dpp_reader_t *r)
{
    return r->use_uring;
}

void dpp_reader_get_stats(const dpp_reader_t *r, dpp_reader_stats_t *out)
{
    *out = r->stats;
}

int dpp_reader_stuck(const dpp_reader_t *r)
{
    return r->stuck;
}

/* The filesystem refused an O_DIRECT read (EINVAL): read this file buffered
 * from now on. Returns 0, or -errno when the flag cannot be cleared. */
static int drop_direct(dpp_reader_t *r)
{
    if (!r->fd_direct)
        return 0;
    int fl = fcntl(r->fd, F_GETFL);
    if (fl < 0 || fcntl(r->fd, F_SETFL, fl & ~O_DIRECT) != 0)
        return -errno;
    r->fd_direct = 0;
    if (atomic_exchange(&direct_fallback_logged, 1) == 0)
        DPP_WARN("o_direct_refused where=read fallback=buffered");
    return 0;
}

/* Books a read's result into s. Returns 1 when more must be read for the
 * slot (s->got says from where), 0 when the slot is READY. */
static int complete_read(dpp_reader_t *r, slot_t *s, int res)
{
    if (res == -EAGAIN || res == -EINTR)
        return 1;
    if (res == -EINVAL && s->direct) {
        int rc = drop_direct(r);
        if (rc == 0)
            return 1;
        res = rc;
    }
    if (res < 0) {
        s->err = res;
    } else if (res == 0) {
        s->eof = 1; /* the file shrank since open */
    } else {
        r->stats.bytes_read += (uint64_t)res;
        s->got += (size_t)res;
        if (s->got < s->need) {
            /* A short read: ask again for the rest. An O_DIRECT read must
             * restart on an aligned offset; it only stops off a block
             * boundary at the end of the file (which shrank since open). */
            if (!s->direct)
                return 1;
            if (s->got % DIRECT_ALIGN == 0)
                return 1;
            s->eof = 1;
        }
    }
    s->len = s->got < s->need ? s->got : s->need;
    s->state = SLOT_READY;
    return 0;
}

/* Queues the rest of s's read on the ring (s->got onwards). */
static void submit_uring(dpp_reader_t *r, slot_t *s)
{
    /* At most depth reads are in flight on a ring of depth entries and each
     * is submitted at once, so a free SQE always exists. */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    int rc = -EBUSY;
    if (sqe != NULL) {
        io_uring_prep_read(sqe, r->fd, s->buf + s->got, (unsigned)(s->want - s->got),
                           s->off + s->got);
        io_uring_sqe_set_data64(sqe, (uint64_t)(s - r->slots));
        s->direct = r->fd_direct;
        for (;;) {
            rc = io_uring_submit(&r->ring);
            if (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                break;
        }
    }
    if (rc >= 1) {
        r->inflight++;
        return;
    }
    s->err = rc < 0 ? rc : -EIO;
    s->len = 0;
    s->state = SLOT_READY;
}

/* Starts filling chunk k's slot. With pread the read happens in wait_slot(). */
static void start_chunk(dpp_reader_t *r, uint64_t k)
{
    slot_t *s = &r->slots[k % r->depth];
    uint64_t off = r->rd_start + k * r->chunk;
    uint64_t want = r->rd_end - off < r->chunk ? r->rd_end - off : r->chunk;
    uint64_t need_end = off + want < r->data_end ? off + want : r->data_end;

    s->off = off;
    s->want = (size_t)want;
    s->need = (size_t)(need_end - off);
    s->got = 0;
    s->len = 0;
    s->err = 0;
    s->eof = 0;
    s->state = SLOT_INFLIGHT;
    if (r->s3 != NULL) {
        s->req = (dpp_s3_req_t){.bucket = r->obj.bucket,
                                .key = r->obj.key,
                                .off = off,
                                .len = want,
                                .if_match = r->etag[0] ? r->etag : NULL,
                                .buf = (char *)s->buf,
                                .cap = (size_t)want};
        if (want == 0 || dpp_s3_start(r->s3, &s->req) != 0) {
            s->err = want == 0 ? 0 : s->req.rc;
            s->state = SLOT_READY;
        }
    } else if (r->use_uring) {
        submit_uring(r, s);
    }
}

/* Books the ranged GET of an object's slot once it is done. */
static void wait_object(dpp_reader_t *r, slot_t *s)
{
    int rc = dpp_s3_wait(r->s3, &s->req);
    if (rc != 0) {
        s->err = rc;
        snprintf(r->obj_err, sizeof r->obj_err, "%s", s->req.err);
    } else {
        r->stats.bytes_read += s->req.got;
        s->got = s->req.got;
        if (s->got < s->need)
            s->eof = 1; /* the object is shorter than listed */
    }
    s->len = s->got < s->need ? s->got : s->need;
    s->state = SLOT_READY;
}

/* Waits for one completion and books it. Returns 0 or the ring's error. */
static int reap_one(dpp_reader_t *r)
{
    struct io_uring_cqe *cqe;
    int rc = io_uring_wait_cqe(&r->ring, &cqe);
    if (rc < 0)
        return rc;
    slot_t *s = &r->slots[io_uring_cqe_get_data64(cqe)];
    int res = cqe->res;
    io_uring_cqe_seen(&r->ring, cqe);
    r->inflight--;
    if (r->fd < 0 || s->state != SLOT_INFLIGHT) {
        s->state = SLOT_IDLE; /* drained by close */
        return 0;
    }
    if (complete_read(r, s, res))
        submit_uring(r, s);
    return 0;
}

static void read_pread(dpp_reader_t *r, slot_t *s)
{
    for (;;) {
        s->direct = r->fd_direct;
        ssize_t n = pread(r->fd, s->buf + s->got, s->want - s->got, (off_t)(s->off + s->got));
        if (complete_read(r, s, n < 0 ? -errno : (int)n) == 0)
            return;
    }
}

/* Waits until s is READY. Returns its read error or 0. */
static int wait_slot(dpp_reader_t *r, slot_t *s)
{
    if (s->state == SLOT_READY)
        return s->err;
    uint64_t t0 = dpp_now_ns();
    if (r->s3 != NULL) {
        wait_object(r, s);
    } else if (!r->use_uring) {
        read_pread(r, s);
    } else {
        while (s->state != SLOT_READY) {
            int rc = reap_one(r);
            if (rc == -EINTR || rc == -EAGAIN)
                continue;
            if (rc < 0) {
                /* The ring itself failed; nothing in flight will be seen. */
                s->err = rc;
                s->state = SLOT_READY;
            }
        }
    }
    r->stats.io_wait_ns += dpp_now_ns() - t0;
    return s->err;
}

/* Hands the current chunk's buffer back to the ring for chunk cur + depth. */
static void advance_chunk(dpp_reader_t *r)
{
    r->slots[r->cur_chunk % r->depth].state = SLOT_IDLE;
    if (r->cur_chunk + r->depth < r->nchunks)
        start_chunk(r, r->cur_chunk + r->depth);
    r->cur_chunk++;
    r->pos = 0;
}

/* Makes the current chunk a READY one with unconsumed bytes. Returns 0, the
 * read's -errno, or DPP_ETRUNCATED when the data ran out. */
static int current_chunk(dpp_reader_t *r, slot_t **out)
{
    for (;;) {
        if (r->cur_chunk >= r->nchunks)
            return DPP_ETRUNCATED;
        slot_t *s = &r->slots[r->cur_chunk % r->depth];
        int rc = wait_slot(r, s);
        if (rc)
            return rc;
        if (r->pos < s->len) {
            *out = s;
            return 0;
        }
        if (s->eof)
            return DPP_ETRUNCATED;
        advance_chunk(r);
    }
}

static int grow_scratch(dpp_reader_t *r, size_t n)
{
    if (n <= r->scratch_cap)
        return 0;
    size_t cap = r->scratch_cap ? r->scratch_cap : SCRATCH_MIN;
    size_t limit = (size_t)r->max_record + DPP_TFRECORD_OVERHEAD;
    while (cap < n)
        cap = cap > limit / 2 ? limit : cap * 2;
    if (cap > limit)
        cap = limit; /* n <= limit always */
    uint8_t *p = realloc(r->scratch, cap);
    if (p == NULL)
        return -ENOMEM;
    r->scratch = p;
    r->scratch_cap = cap;
    return 0;
}

/* Points *out at n contiguous bytes from fpos (n <= max_record + 16), in a
 * chunk buffer when they lie in one, else copied into scratch. */
static int peek(dpp_reader_t *r, size_t n, const uint8_t **out)
{
    slot_t *s;
    int rc;

    if (r->scratch_len == 0) {
        if ((rc = current_chunk(r, &s)) != 0)
            return rc;
        if (s->len - r->pos >= n) {
            *out = s->buf + r->pos;
            return 0;
        }
    } else if (r->scratch_len >= n) {
        *out = r->scratch;
        return 0;
    }
    /* Straddles buffers. Copying just this record costs little (one record per
     * chunk at most, about record/chunk of the bytes) and keeps the ring a set
     * of independent fixed buffers that reads can fill in any order. */
    if ((rc = grow_scratch(r, n)) != 0)
        return rc;
    while (r->scratch_len < n) {
        if ((rc = current_chunk(r, &s)) != 0)
            return rc;
        size_t take = s->len - r->pos;
        if (take > n - r->scratch_len)
            take = n - r->scratch_len;
        memcpy(r->scratch + r->scratch_len, s->buf + r->pos, take);
        r->pos += take;
        r->scratch_len += take;
        r->stats.copied += take;
    }
    *out = r->scratch;
    return 0;
}

/* Moves fpos past the n bytes last peeked. */
static void consume(dpp_reader_t *r, size_t n)
{
    if (r->scratch_len)
        r->scratch_len = 0; /* pos already is past them */
    else
        r->pos += n;
    r->fpos += n;
}

static int set_stuck(dpp_reader_t *r, int err, uint64_t *offset)
{
    r->stuck = err;
    r->stuck_off = r->fpos;
    *offset = r->fpos;
    return err;
}

/* set_stuck for a break found at `at`, before fpos. */
static int set_stuck_at(dpp_reader_t *r, int err, uint64_t at, uint64_t *offset)
{
    set_stuck(r, err, offset);
    r->stuck_off = *offset = at;
    return err;
}

static uint32_t crc_of(dpp_reader_t *r, const uint8_t *p, size_t n)
{
    if (!r->time_crc)
        return dpp_crc32c(0, p, n);
    uint64_t t0 = dpp_now_ns();
    uint32_t crc = dpp_crc32c(0, p, n);
    r->stats.crc_ns += dpp_now_ns() - t0;
    return crc;
}

/* Passes over the byte at fpos, which the last peek covered. */
static void skip_byte(dpp_reader_t *r)
{
    if (r->scratch_len) {
        /* the scratch holds [fpos, fpos + scratch_len) and pos is past it */
        memmove(r->scratch, r->scratch + 1, --r->scratch_len);
    } else {
        r->pos++;
    }
    r->fpos++;
}

/* The framing broke at fpos: moves fpos to where records resume
 * (tfrecord.h: resynchronisation), data_end when no record starts before it
 * (a range ends where the index saw a record start, so they resume there),
 * and sets *found; *found 0 when the search gave up. Returns 0, or a read
 * error. A false candidate's frame may have filled the scratch; passing over
 * it a byte at a time moves the rest, which the bound on candidates keeps to
 * DPP_TFRECORD_RESYNC_CANDIDATES frames of copying. */
static int resync(dpp_reader_t *r, int *found)
{
    unsigned false_candidates = 0;
    const uint8_t *rec;
    *found = 0;
    for (skip_byte(r); r->data_end - r->fpos >= DPP_TFRECORD_OVERHEAD; skip_byte(r)) {
        int rc = peek(r, HEADER_LEN, &rec);
        if (rc)
            return rc;
        uint64_t length;
        int hrc = dpp_tfrecord_header(rec, r->max_record, &length);
        if (hrc == DPP_ECORRUPT)
            continue;
        if (hrc == 0 && length + DPP_TFRECORD_OVERHEAD <= r->data_end - r->fpos) {
            if ((rc = peek(r, (size_t)length + DPP_TFRECORD_OVERHEAD, &rec)) != 0)
                return rc;
            if (dpp_tfrecord_payload_ok(rec, length)) {
                *found = 1;
                return 0;
            }
        }
        if (++false_candidates == DPP_TFRECORD_RESYNC_CANDIDATES)
            return 0;
    }
    r->fpos = r->data_end; /* nothing is read after it: pos may stay behind */
    *found = 1;
    return 0;
}

/* The framing broke at fpos: the next record after the gap, as
 * dpp_reader_next() returns it. Kept out of line: the loop over good
 * records stays as short as it was. */
static __attribute__((noinline)) int after_gap(dpp_reader_t *r, const uint8_t **payload,
                                               size_t *len, uint64_t *offset)
{
    uint64_t at = r->fpos;
    int found = 1, rc = 0;
    if (r->data_end - r->fpos < HEADER_LEN)
        r->fpos = r->data_end; /* less than a header before a range end the index saw a record
                                * start at */
    else
        rc = resync(r, &found);
    if (rc != 0)
        return set_stuck_at(r, rc, at, offset); /* the position moved: no retry */
    if (!found)                                 /* the search gave up: the rest is lost */
        return set_stuck_at(r, DPP_ECORRUPT, at, offset);
    r->gaps++;
    r->gap_from = at;
    r->gap_to = r->fpos;
    return dpp_reader_next(r, payload, len, offset);
}

int dpp_reader_next(dpp_reader_t *r, const uint8_t **payload, size_t *len, uint64_t *offset)
{
    const uint8_t *rec;
    int rc;

    if (r->fd < 0 && r->s3 == NULL)
        return DPP_EINVAL;
    if (r->stuck) {
        *offset = r->stuck_off;
        return r->stuck;
    }
    if (r->fpos >= r->data_end) {
        /* A range that ends before its expected end lost records to a file
         * shorter than the index says. */
        if (r->fpos < r->range_end)
            return set_stuck(r, DPP_ETRUNCATED, offset);
        *offset = r->fpos;
        return 0;
    }
    if (r->data_end - r->fpos < HEADER_LEN) {
        if (r->data_end == r->size)
            return set_stuck(r, DPP_ETRUNCATED, offset);
        return after_gap(r, payload, len, offset); /* a gap to the range's end */
    }
    if ((rc = peek(r, HEADER_LEN, &rec)) != 0)
        goto fail;
    if (dpp_crc32c_unmask(dpp_load_le32(rec + 8)) != crc_of(r, rec, 8))
        return after_gap(r, payload, len, offset);
    uint64_t length = dpp_load_le64(rec);
    if (length > r->max_record)
        return set_stuck(r, DPP_ETOOBIG, offset);
    /* max_record <= 2^40, so neither sum can wrap. */
    if (length + DPP_TFRECORD_OVERHEAD > r->data_end - r->fpos)
        return set_stuck(r, DPP_ETRUNCATED, offset);
    size_t frame = (size_t)length + DPP_TFRECORD_OVERHEAD;
    if ((rc = peek(r, frame, &rec)) != 0)
        goto fail;

    uint64_t at = r->fpos;
    int ok = dpp_crc32c_unmask(dpp_load_le32(rec + HEADER_LEN + length)) ==
             crc_of(r, rec + HEADER_LEN, (size_t)length);
    consume(r, frame);
    *offset = at;
    if (!ok)
        return DPP_ECORRUPT;
    *payload = rec + HEADER_LEN;
    *len = (size_t)length;
    r->stats.records++;
    return 1;

fail:
    if (rc == -ENOMEM) {
        *offset = r->fpos; /* nothing consumed: a later call may succeed */
        return rc;
    }
    return set_stuck(r, rc, offset);
}

/* Sets up the range [start, end) of data of `size` bytes (file or object)
 * and starts its first reads. */
static void range_begin(dpp_reader_t *r, uint64_t size, uint64_t start, uint64_t end, int direct)
{
    r->size = size;
    r->range_end = end == UINT64_MAX ? size : end;
    r->data_end = r->range_end < size ? r->range_end : size;
    if (r->data_end < start)
        r->data_end = start;
    r->fpos = start;
    r->gaps = r->gap_from = r->gap_to = 0;
    if (direct) {
        r->rd_start = start & ~(uint64_t)(DIRECT_ALIGN - 1);
        r->rd_end = (r->data_end + DIRECT_ALIGN - 1) & ~(uint64_t)(DIRECT_ALIGN - 1);
    } else {
        r->rd_start = start;
        r->rd_end = r->data_end;
    }
    r->nchunks = (r->rd_end - r->rd_start + r->chunk - 1) / r->chunk;
    r->cur_chunk = 0;
    r->pos = (size_t)(start - r->rd_start);
    r->stuck = 0;
    r->scratch_len = 0;
    for (uint64_t k = 0; k < r->depth && k < r->nchunks; k++)
        start_chunk(r, k);
}

int dpp_reader_open(dpp_reader_t *r, const char *path, uint64_t start, uint64_t end)
{
    const int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    struct stat st;
    int fd, direct = r->want_direct, rc;

    dpp_reader_close(r);
    if (start > end)
        return DPP_EINVAL;
    /* O_NONBLOCK keeps the open from hanging on a FIFO; it is cleared below
     * because io_uring answers -EAGAIN for uncached reads of such an fd. */
    fd = open(path, flags | (direct ? O_DIRECT : 0));
    if (fd < 0 && errno == EINVAL && direct) {
        if (atomic_exchange(&direct_fallback_logged, 1) == 0)
            DPP_WARN("o_direct_refused where=open fallback=buffered");
        direct = 0;
        fd = open(path, flags);
    }
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        goto fail;
    }
    if (fcntl(fd, F_SETFL, direct ? O_DIRECT : 0) != 0) {
        rc = -errno;
        goto fail;
    }

    uint64_t size = (uint64_t)st.st_size;
    r->fd = fd;
    r->fd_direct = direct;
    if (!direct) {
        uint64_t stop = end < size ? end : size;
        posix_fadvise(fd, (off_t)start, (off_t)(stop > start ? stop - start : 0),
                      POSIX_FADV_SEQUENTIAL);
    }
    range_begin(r, size, start, end, direct);
    return 0;

fail:
    close(fd);
    return rc;
}

int dpp_reader_open_object(dpp_reader_t *r, const char *url, const char *etag, uint64_t size,
                           uint64_t start, uint64_t end)
{
    dpp_reader_close(r);
    if (start > end)
        return DPP_EINVAL;
    r->obj_err[0] = '\0';
    if (dpp_s3_url_parse(url, &r->obj, r->obj_err, sizeof r->obj_err) != 0)
        return DPP_EINVAL;
    dpp_s3_t *s3 = dpp_s3_thread_client();
    if (s3 == NULL) {
        snprintf(r->obj_err, sizeof r->obj_err,
                 "%s: this worker reads no object storage (start it with --data-root s3://...)",
                 url);
        return DPP_EPATH;
    }
    snprintf(r->etag, sizeof r->etag, "%s", etag ? etag : "");
    r->s3 = s3;
    range_begin(r, size, start, end, 0);
    return 0;
}

uint64_t dpp_reader_gaps(const dpp_reader_t *r, uint64_t *from, uint64_t *to)
{
    *from = r->gap_from;
    *to = r->gap_to;
    return r->gaps;
}

const char *dpp_reader_error_text(const dpp_reader_t *r)
{
    return r->obj_err;
}

void dpp_reader_close(dpp_reader_t *r)
{
    if (r->s3 != NULL) {
        for (unsigned i = 0; i < r->depth; i++) {
            if (r->slots[i].state == SLOT_INFLIGHT)
                dpp_s3_cancel(r->s3, &r->slots[i].req);
            r->slots[i].state = SLOT_IDLE;
        }
        r->s3 = NULL;
        r->nchunks = 0;
        r->scratch_len = 0;
        r->stuck = 0;
        return;
    }
    if (r->fd < 0)
        return;
    /* The kernel writes into the buffers until each read completes, so every
     * read in flight is waited for before they are reused or freed. */
    int fd = r->fd;
    r->fd = -1;
    while (r->inflight > 0) {
        int rc = reap_one(r);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN) {
            DPP_ERROR("io_uring_drain_failed error=\"%s\"", dpp_strerror(rc));
            break;
        }
    }
    for (unsigned i = 0; i < r->depth; i++)
        r->slots[i].state = SLOT_IDLE;
    close(fd);
    r->nchunks = 0;
    r->scratch_len = 0;
    r->stuck = 0;
}

size_t dpp_reader_ranges_max(const dpp_reader_t *r)
{
    return (size_t)r->max_record + DPP_TFRECORD_OVERHEAD;
}

/* A read of dpp_reader_read_ranges in flight: the rest of one piece. */
typedef struct piece {
    int fd;
    uint8_t *dst;
    uint64_t off;
    size_t left;
} piece_t;

static int submit_piece(dpp_reader_t *r, piece_t *p, uint64_t id)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (sqe == NULL)
        return -EBUSY; /* never: at most depth pieces are in flight */
    io_uring_prep_read(sqe, p->fd, p->dst, (unsigned)p->left, p->off);
    io_uring_sqe_set_data64(sqe, id);
    return 0;
}

/* Books a piece's result: 1 when it must be read on, 0 when done, or an
 * error. */
static int piece_done(dpp_reader_t *r, piece_t *p, int res)
{
    if (res == -EAGAIN || res == -EINTR)
        return 1;
    if (res < 0)
        return res;
    if (res == 0)
        return DPP_ETRUNCATED;
    r->stats.bytes_read += (uint64_t)res;
    p->dst += res;
    p->off += (uint64_t)res;
    p->left -= (size_t)res;
    return p->left > 0;
}

/* The object range i is of, or NULL (a file's). */
static dpp_s3_rfile_t *range_object(const dpp_read_range_t *rr)
{
    return rr->src ? dpp_s3_rfile_of(rr->src) : NULL;
}

/* The file descriptor range i is read from. */
static int range_fd(const dpp_read_range_t *rr, int fd)
{
    return fd >= 0 ? fd : rr->src ? rr->src->fd : rr->fd;
}

/* Reads the ranges of objects among ranges[0..n): ranged GETs of at most
 * OBJECT_PIECE bytes, DPP_READER_RANGES_DEPTH in flight on the objects'
 * (the thread's) client. Returns 0 or the first error, its words in
 * r->obj_err. */
static int read_object_ranges(dpp_reader_t *r, dpp_read_range_t *ranges, size_t n)
{
    enum { SLOTS = DPP_READER_RANGES_DEPTH };
    dpp_s3_req_t *req = calloc(SLOTS, sizeof *req);
    dpp_s3_t **client = calloc(SLOTS, sizeof *client);
    uint64_t *want = calloc(SLOTS, sizeof *want);
    if (req == NULL || client == NULL || want == NULL) {
        free(req);
        free(client);
        free(want);
        return -ENOMEM;
    }
    size_t ri = 0, rdone = 0;
    unsigned busy = 0;
    int rc = 0;
    for (;;) {
        for (unsigned k = 0; k < SLOTS && rc == 0; k++) {
            while (ri < n && (range_object(&ranges[ri]) == NULL || ranges[ri].len == 0))
                ri++;
            if (ri == n)
                break;
            if (client[k] != NULL)
                continue;
            dpp_s3_rfile_t *o = range_object(&ranges[ri]);
            size_t len = ranges[ri].len - rdone;
            if (len > OBJECT_PIECE)
                len = OBJECT_PIECE;
            req[k] = (dpp_s3_req_t){.bucket = o->url.bucket,
                                    .key = o->url.key,
                                    .off = ranges[ri].off + rdone,
                                    .len = len,
                                    .if_match = o->etag[0] ? o->etag : NULL,
                                    .buf = (char *)ranges[ri].data + rdone,
                                    .cap = len};
            if ((rc = dpp_s3_start(o->s3, &req[k])) != 0)
                break;
            client[k] = o->s3;
            want[k] = len;
            busy++;
            if ((rdone += len) == ranges[ri].len) {
                ri++;
                rdone = 0;
            }
        }
        if (busy == 0)
            break;
        for (unsigned k = 0; k < SLOTS; k++) {
            if (client[k] == NULL)
                continue;
            int e = dpp_s3_wait(client[k], &req[k]);
            if (e == 0 && req[k].got < want[k]) {
                e = DPP_ETRUNCATED;
                snprintf(req[k].err, sizeof req[k].err,
                         "s3://%s/%s: the object ends before byte %llu", req[k].bucket, req[k].key,
                         (unsigned long long)(req[k].off + want[k]));
            }
            r->stats.bytes_read += req[k].got;
            if (e != 0 && rc == 0) {
                rc = e;
                snprintf(r->obj_err, sizeof r->obj_err, "%s", req[k].err);
            }
            client[k] = NULL;
            busy--;
            break; /* one done: refill (the others moved on meanwhile) */
        }
    }
    free(req);
    free(client);
    free(want);
    return rc;
}

int dpp_reader_read_ranges(dpp_reader_t *r, int fd, dpp_read_range_t *ranges, size_t n)
{
    if (r->fd >= 0 || r->s3 != NULL)
        return DPP_EINVAL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ranges[i].len > dpp_reader_ranges_max(r) - total)
            return DPP_ETOOBIG;
        total += ranges[i].len;
    }
    int rc = grow_scratch(r, total);
    if (rc)
        return rc;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        ranges[i].data = r->scratch + at;
        at += ranges[i].len;
    }
    r->obj_err[0] = '\0';
    size_t nobj = 0;
    for (size_t i = 0; fd < 0 && i < n; i++)
        nobj += range_object(&ranges[i]) != NULL;
    if (nobj > 0 && (rc = read_object_ranges(r, ranges, n)) != 0)
        return rc;
    if (nobj == n)
        return 0;
    /* Pieces in file order: range i cut into reads of at most chunk bytes. */
    size_t ri = 0, rdone = 0;
    int failed = 0;
    if (!r->use_uring) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (nobj > 0 && range_object(&ranges[i]) != NULL)
                continue;
            piece_t p = {range_fd(&ranges[i], fd), (uint8_t *)ranges[i].data, ranges[i].off,
                         ranges[i].len};
            while (p.left > 0 && rc == 0) {
                ssize_t got = pread(p.fd, p.dst, p.left, (off_t)p.off);
                int more = piece_done(r, &p, got < 0 ? -errno : (int)got);
                rc = more < 0 ? more : 0;
            }
        }
        return rc;
    }
    while (ri < n && (ranges[ri].len == 0 || (nobj > 0 && range_object(&ranges[ri]))))
        ri++;
    unsigned slots = r->ring_entries;
    piece_t *inflight = calloc(slots, sizeof *inflight);
    if (inflight == NULL)
        return -ENOMEM;
    unsigned busy = 0;
    for (;;) {
        /* fill every free slot with the next piece */
        for (unsigned k = 0; k < slots && !failed && ri < n; k++) {
            if (inflight[k].left > 0)
                continue;
            size_t len = ranges[ri].len - rdone;
            if (len > r->chunk)
                len = r->chunk;
            inflight[k] = (piece_t){range_fd(&ranges[ri], fd), (uint8_t *)ranges[ri].data + rdone,
                                    ranges[ri].off + rdone, len};
            if ((rc = submit_piece(r, &inflight[k], k)) != 0) {
                inflight[k].left = 0;
                failed = 1;
                break;
            }
            busy++;
            rdone += len;
            if (rdone == ranges[ri].len) {
                ri++;
                rdone = 0;
            }
            while (ri < n && (ranges[ri].len == 0 || (nobj > 0 && range_object(&ranges[ri]))))
                ri++;
        }
        if (busy == 0)
            break;
        int src;
        do
            src = io_uring_submit_and_wait(&r->ring, 1);
        while (src == -EINTR || src == -EAGAIN || src == -EBUSY);
        if (src < 0) {
            /* The ring is broken; what is in flight cannot be waited for
             * either. Never seen: the reader is then unusable. */
            DPP_ERROR("io_uring_submit_failed error=\"%s\"", dpp_strerror(src));
            rc = src;
            break;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&r->ring, head, cqe)
        {
            piece_t *p = &inflight[io_uring_cqe_get_data64(cqe)];
            int more = piece_done(r, p, cqe->res);
            seen++;
            if (more == 1 && !failed && submit_piece(r, p, (uint64_t)(p - inflight)) == 0)
                continue;
            if (more < 0 && rc == 0)
                rc = more;
            if (more != 0)
                failed = 1; /* no new pieces; drain what is in flight */
            p->left = 0;
            busy--;
        }
        io_uring_cq_advance(&r->ring, seen);
    }
    free(inflight);
    return rc;
}
