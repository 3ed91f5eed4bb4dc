/* SPDX-License-Identifier: Apache-2.0 */
/* The master's journal: an append-only file STATE_DIR/journal of CRC-checked
 * records, fsync'ed before the append returns (or, for group commit, written
 * now and synced together later), replayed in order when the
 * master starts, and compacted by replacing the file with a snapshot of the
 * current state. Payloads are opaque here. Format and recovery rules:
 * docs/journal.md.
 *
 * Not thread-safe: one thread owns a journal. One process per state dir (the
 * master holds STATE_DIR/master.lock; the journal does not lock again). */
#ifndef DPP_MASTER_JOURNAL_H
#define DPP_MASTER_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

/* Record header: u32 LE magic, u32 LE payload length, u32 LE masked CRC32C of
 * (type byte + payload), u8 type; the payload follows. */
#define DPP_JOURNAL_MAGIC 0x314a5044u /* "DPJ1" in file byte order */
#define DPP_JOURNAL_HEADER_SIZE 13
/* Largest payload, checked before anything is allocated for a record, on
 * append and on replay. */
#define DPP_JOURNAL_MAX_PAYLOAD (64u << 20)

/* Record types 0..253 are the caller's. These two are the journal's own, are
 * refused by append and compact, and are never passed to a replay callback. */
#define DPP_JOURNAL_SNAPSHOT_BEGIN 254
#define DPP_JOURNAL_SNAPSHOT_END 255

typedef struct dpp_journal dpp_journal_t;

/* One record to write. payload may be NULL when len is 0. The journal copies
 * nothing: the memory only has to stay valid during the call it is given to. */
typedef struct dpp_journal_rec {
    uint8_t type;
    const void *payload;
    size_t len;
} dpp_journal_rec_t;

/* Called by dpp_journal_open() for every caller record of the journal, in file
 * order. payload points into the journal's read buffer and is valid only until
 * the callback returns (copy what you keep). Return 0 to go on; a negative
 * code stops the replay and dpp_journal_open() returns it. */
typedef int (*dpp_journal_replay_cb)(void *arg, uint8_t type, const uint8_t *payload, size_t len);

/* What dpp_journal_open() found. Filled in on success and on failure. */
typedef struct dpp_journal_report {
    uint64_t records;          /* caller records that are valid (replayed on success) */
    uint64_t bytes;            /* file bytes of the valid records, markers included */
    uint64_t torn_bytes;       /* bytes after them that were (or would be) cut off */
    uint64_t snapshot_records; /* caller records inside the leading snapshot, if any */
    int snapshot;              /* the file begins with a complete snapshot */
    int truncated;             /* torn_bytes were cut off the file */
    int removed_tmp;           /* a stale journal.tmp (an unfinished compaction) was deleted */
    size_t buffer_peak;        /* largest read buffer used, bytes */
    char text[256];            /* one line for the log, naming offsets */
} dpp_journal_report_t;

typedef struct dpp_journal_stats {
    uint64_t records;          /* caller records in the file, snapshot included */
    uint64_t payload_bytes;    /* their payload bytes */
    uint64_t file_size;        /* bytes in the file */
    uint64_t snapshot_records; /* caller records in the file's leading snapshot, 0 if none */
    uint64_t snapshot_bytes;   /* file bytes of that snapshot, markers included */
    uint64_t appends;          /* records appended since open */
    uint64_t syncs;            /* fsync/fdatasync calls since open */
    uint64_t writes;           /* writes of buffered records to the file since open */
    uint64_t compactions;      /* since open */
} dpp_journal_stats_t;

/* Opens dir/journal (creating it, mode 0640, when missing; an empty journal is
 * fine), deletes a stale dir/journal.tmp, and replays the file: cb(arg, ...)
 * for every caller record in order. cb may be NULL to only check the file.
 * The directory must exist.
 *
 * The whole file is checked before the first callback. Replay ends at the
 * first record that is not complete and CRC-valid. What follows it is a torn
 * tail, cut off with ftruncate after a successful replay, when no complete
 * CRC-valid record starts anywhere after it (a crash mid-append, a zero-filled
 * tail). Otherwise, or when the leading snapshot is incomplete, the file is
 * damaged in the middle: returns DPP_ECORRUPT with report->text naming the byte
 * offset, calls cb never and leaves the file untouched for an operator.
 *
 * Returns 0 and *out (release with dpp_journal_close()), or a negative code
 * with *out NULL: DPP_ECORRUPT, cb's own code (cb was called for a prefix of
 * the records), -EIO when the file changed during replay, -errno. The file is
 * only modified (truncated) on success. report may be NULL. */
int dpp_journal_open(dpp_journal_t **out, const char *dir, dpp_journal_replay_cb cb, void *arg,
                     dpp_journal_report_t *report);

/* Appends one record and fdatasyncs the file before returning: on 0 the record
 * survives a crash. DPP_EINVAL for a reserved type, DPP_ETOOBIG for a payload
 * over DPP_JOURNAL_MAX_PAYLOAD (nothing written). A failed write is cut back
 * off the file and returned as -errno, the journal stays usable; when that cut
 * or an fsync fails, the journal is failed: this and every later call returns
 * the same error, and the master should exit and replay at restart (after a
 * failed fsync the kernel's view of the file cannot be trusted). */
int dpp_journal_append(dpp_journal_t *j, uint8_t type, const void *payload, size_t len);

/* Appends n records with one fdatasync. All types and lengths are checked
 * before anything is written. Errors as dpp_journal_append(); a crash during
 * the call may keep a prefix of the records (replay cuts a torn one off). */
int dpp_journal_append_many(dpp_journal_t *j, const dpp_journal_rec_t *recs, size_t n);

/* Group commit: dpp_journal_write() appends n records to the journal's
 * buffer (checked as for dpp_journal_append_many(); written out at once when
 * the buffer passes 1 MiB); dpp_journal_flush() writes the buffer to the
 * file with one write, unsynced; dpp_journal_sync() flushes and makes every
 * record so far durable with one fdatasync (nothing to do: returns 0 at
 * once). A record is durable only after the sync returns 0; whoever acts on
 * it waits for that. A write that fails drops every buffered record (cut
 * back off the file) and returns -errno, as dpp_journal_append() does. */
int dpp_journal_write(dpp_journal_t *j, const dpp_journal_rec_t *recs, size_t n);
int dpp_journal_flush(dpp_journal_t *j);
int dpp_journal_sync(dpp_journal_t *j);

/* Replaces the journal by a snapshot of the caller's state: writes
 * dir/journal.tmp = SNAPSHOT_BEGIN, recs[0..n), SNAPSHOT_END, fsyncs it,
 * renames it over dir/journal, fsyncs the directory, and appends to the new
 * file from then on. A crash at any point leaves the old or the new journal,
 * both complete. Before the rename, an error deletes journal.tmp and keeps
 * the old journal in use; an error after it (the directory fsync) fails the
 * journal as in dpp_journal_append(). On success, records written and not
 * yet flushed are dropped: the snapshot, the caller's state, holds them. */
int dpp_journal_compact(dpp_journal_t *j, const dpp_journal_rec_t *recs, size_t n);

/* Whether dir/journal is still the file being appended to: 0, -ENOENT when
 * it was unlinked (or renamed away), -ESTALE when the path now names another
 * file. Either way what is appended from now on would not be replayed: the
 * caller rewrites the journal from its state (dpp_journal_compact(), which
 * creates the file anew). */
int dpp_journal_check_path(const dpp_journal_t *j);

/* Current counters, for the caller's compaction policy (e.g. compact when
 * file_size exceeds twice snapshot_bytes plus some MiB). */
void dpp_journal_get_stats(const dpp_journal_t *j, dpp_journal_stats_t *out);

/* Closes the file and frees j. Accepts NULL. Everything appended is already
 * durable; records only written are flushed into the file, unsynced. (Named
 * open/close rather than new/free: it pairs like a file, and
 * dpp_journal_open does I/O a _new would not.) */
void dpp_journal_close(dpp_journal_t *j);

#endif
