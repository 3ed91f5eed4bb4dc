// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the frame decoder (src/wire/frame.c). The input is what
// arrives on a connection, after one byte that picks how it is cut into reads.
// The stream is parsed whole, then read by read the way src/wire/conn.c
// does (append, parse whole frames, keep the partial one); both must see the
// same frames and end the same way. Every whole frame's message is unpacked
// with its type's descriptor, walked field by field, packed and parsed again.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "wire/frame.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "fuzz_util.h"

/* Small limits, so that the fuzzer reaches whole frames and the limit checks
 * with inputs of a few KB. */
static const dpp_frame_limits_t limits = {.max_msg = 1u << 16, .max_payload = 1u << 16};

/* What one pass over the stream saw: a digest of its frames and how it
 * ended (0: at a frame boundary, 1: inside a frame, or the error). */
typedef struct outcome {
    uint64_t digest;
    size_t frames;
    int end;
    size_t end_frame_len; /* for end == 1 */
} outcome_t;

static void record_frame(outcome_t *o, const dpp_frame_t *f, size_t frame_len)
{
    uint64_t v[4] = {f->type, f->msg_len, f->payload_len, frame_len};
    for (int i = 0; i < 4; i++)
        o->digest = (o->digest ^ v[i]) * 0x100000001b3ull;
    o->frames++;
}

static size_t field_size(const ProtobufCFieldDescriptor *fd)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    FUZZ_CHECK(0, "field %s has unknown type %d", fd->name, (int)fd->type);
    return 0;
}

static size_t walk_message(const ProtobufCMessage *m, unsigned depth);

/* Reads one value the way a handler would: strings to their NUL, bytes and
 * nested messages whole. Returns the unknown fields met in nested messages. */
static size_t walk_value(const ProtobufCFieldDescriptor *fd, const void *p, unsigned depth)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        if (s)
            fuzz_touch(s, strlen(s) + 1);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        fuzz_touch(b->data, b->len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        return sub ? walk_message(sub, depth + 1) : 0;
    }
    default:
        fuzz_touch(p, field_size(fd));
    }
    return 0;
}

/* Returns the number of unknown fields in m and the messages inside it. */
static size_t walk_message(const ProtobufCMessage *m, unsigned depth)
{
    size_t unknown = m->n_unknown_fields;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    FUZZ_CHECK(depth < 16, "messages nest %u deep; dpp.proto nests 2", depth);
    FUZZ_CHECK(d && d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC, "bad descriptor");
    const uint8_t *base = (const uint8_t *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        const void *member = base + fd->offset;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n;
            memcpy(&n, base + fd->quantifier_offset, sizeof n);
            const uint8_t *arr = *(const uint8_t *const *)member;
            FUZZ_CHECK(n == 0 || arr != NULL, "%s: %zu values, no array", fd->name, n);
            for (size_t j = 0; j < n; j++)
                unknown += walk_value(fd, arr + j * field_size(fd), depth);
            continue;
        }
        if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which;
            memcpy(&which, base + fd->quantifier_offset, sizeof which);
            if (which != fd->id)
                continue;
        }
        unknown += walk_value(fd, member, depth);
    }
    for (unsigned j = 0; j < m->n_unknown_fields; j++)
        fuzz_touch(m->unknown_fields[j].data, m->unknown_fields[j].len);
    return unknown;
}

/* What a daemon does with a whole frame, plus a pack/parse round trip. */
static void handle_frame(const dpp_frame_t *f)
{
    fuzz_touch(f->payload, f->payload_len);
    ProtobufCMessage *m = dpp_frame_unpack(f);
    if (m == NULL)
        return; /* DPP_EMSG for the daemon */
    FUZZ_CHECK(m->descriptor == dpp_msg_descriptor(f->type), "type %u unpacked as %s", f->type,
               m->descriptor->name);
    /* protobuf-c keeps unknown fields and packs them back as they were
     * tagged; it accepts field number 0 in a non-minimal tag varint but
     * refuses it once packed minimally, so only a message without unknown
     * fields must survive the round trip. dpp never re-sends a message it
     * received. */
    if (walk_message(m, 0) != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return;
    }

    size_t len;
    uint8_t *buf = dpp_frame_pack(f->type, m, 0, &len);
    FUZZ_CHECK(buf != NULL, "dpp_frame_pack failed");
    dpp_frame_limits_t lim;
    dpp_frame_limits_default(&lim);
    dpp_frame_t g;
    size_t glen;
    int rc = dpp_frame_parse(buf, len, &lim, &g, &glen);
    FUZZ_CHECK(rc == 0 && glen == len && g.type == f->type && g.payload_len == 0,
               "repacked %s does not parse: rc %d", dpp_msg_name(f->type), rc);
    ProtobufCMessage *m2 = dpp_frame_unpack(&g);
    FUZZ_CHECK(m2 != NULL, "repacked %s does not unpack", dpp_msg_name(f->type));
    FUZZ_CHECK(protobuf_c_message_get_packed_size(m2) == g.msg_len,
               "repacked %s: size %zu, packed again %zu", dpp_msg_name(f->type), (size_t)g.msg_len,
               protobuf_c_message_get_packed_size(m2));
    protobuf_c_message_free_unpacked(m2, NULL);
    protobuf_c_message_free_unpacked(m, NULL);
    free(buf);
}

/* The documented results of dpp_frame_parse() on buf[0..len). */
static void check_result(int rc, const uint8_t *buf, size_t len, const dpp_frame_t *f,
                         size_t frame_len)
{
    if (rc == 0) {
        FUZZ_CHECK(frame_len == DPP_FRAME_HEADER_SIZE + (size_t)f->msg_len + f->payload_len &&
                       frame_len <= len,
                   "frame of %zu bytes in %zu", frame_len, len);
        FUZZ_CHECK(f->msg == buf + DPP_FRAME_HEADER_SIZE && f->payload == f->msg + f->msg_len,
                   "frame pointers");
        FUZZ_CHECK(f->msg_len <= limits.max_msg && f->payload_len <= limits.max_payload,
                   "frame over the limits");
        FUZZ_CHECK(dpp_msg_descriptor(f->type) != NULL, "unknown type %u accepted", f->type);
    } else if (rc == 1) {
        FUZZ_CHECK(len < DPP_FRAME_HEADER_SIZE ? frame_len == 0 : frame_len > len,
                   "need more: frame_len %zu with %zu bytes", frame_len, len);
    } else {
        FUZZ_CHECK(rc == DPP_EFRAME || rc == DPP_EFRAMESIZE || rc == DPP_EMSGTYPE, "rc %d", rc);
    }
}

static void parse_whole(const uint8_t *data, size_t size, outcome_t *o)
{
    size_t off = 0;
    while (off < size) {
        dpp_frame_t f;
        size_t flen;
        int rc = dpp_frame_parse(data + off, size - off, &limits, &f, &flen);
        check_result(rc, data + off, size - off, &f, flen);
        if (rc != 0) {
            o->end = rc;
            o->end_frame_len = rc == 1 ? flen : 0;
            return;
        }
        record_frame(o, &f, flen);
        off += flen;
    }
    o->end = 0;
}

/* Read sizes from a xorshift generator seeded by the first input byte. */
static size_t next_read(uint32_t *state, uint32_t max)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return 1 + x % max;
}

static void parse_by_reads(const uint8_t *data, size_t size, uint8_t mode, outcome_t *o)
{
    uint32_t state = 0x9e3779b9u ^ mode;
    uint32_t max = mode == 0 ? UINT32_MAX : 1u + mode % 64u;
    uint8_t *buf = NULL; /* bytes received and not yet consumed */
    size_t len = 0, pos = 0;
    o->end = 0;
    while (pos < size) {
        size_t n = next_read(&state, max);
        if (n > size - pos)
            n = size - pos;
        uint8_t *grown = realloc(buf, len + n);
        FUZZ_CHECK(grown != NULL, "out of memory");
        buf = grown;
        memcpy(buf + len, data + pos, n);
        len += n;
        pos += n;

        size_t off = 0;
        o->end = 0;
        o->end_frame_len = 0;
        while (off < len) {
            /* An exactly sized copy, so ASan catches a read past the bytes
             * received so far. */
            size_t avail = len - off;
            uint8_t *view = malloc(avail);
            FUZZ_CHECK(view != NULL, "out of memory");
            memcpy(view, buf + off, avail);
            dpp_frame_t f;
            size_t flen;
            int rc = dpp_frame_parse(view, avail, &limits, &f, &flen);
            check_result(rc, view, avail, &f, flen);
            if (rc == 0) {
                record_frame(o, &f, flen);
                handle_frame(&f);
                off += flen;
            } else {
                o->end = rc;
                o->end_frame_len = rc == 1 ? flen : 0;
            }
            free(view);
            if (rc != 0)
                break;
        }
        if (o->end < 0)
            break; /* the connection closes */
        memmove(buf, buf + off, len - off);
        len -= off;
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    outcome_t whole = {0}, reads = {0};
    parse_whole(data, size, &whole);
    parse_by_reads(data, size, mode, &reads);
    FUZZ_CHECK(whole.frames == reads.frames && whole.digest == reads.digest,
               "whole stream: %zu frames, read by read: %zu frames (or other lengths)",
               whole.frames, reads.frames);
    FUZZ_CHECK(whole.end == reads.end && whole.end_frame_len == reads.end_frame_len,
               "whole stream ends with %d (%zu), read by read with %d (%zu)", whole.end,
               whole.end_frame_len, reads.end, reads.end_frame_len);
    return 0;
}
