// SPDX-License-Identifier: Apache-2.0
// Writes the binary seed corpora of the fuzz targets: valid frames of every
// message type, TFRecord files (clean, corrupt, truncated), index texts,
// tf.Examples and blocks, each built with the project's own writers or
// protobuf-c. Usage: fuzz_make_corpus DIR (writes DIR/<target>/<name>; the
// same bytes every run). `cmake --build build-fuzz --target fuzz_corpus`
// rewrites tests/fuzz/corpus/.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "format/block.h"
#include "wire/frame.h"
#include "format/tfrecord.h"
#include "dpp.pb-c.h"
#include "example.pb-c.h"
#include "fuzz_shapes.h"

/* A growable byte buffer; every helper aborts on out-of-memory (a tool). */
typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes_t;

static void die(const char *what)
{
    fprintf(stderr, "make_corpus: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void put(bytes_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        if ((b->p = realloc(b->p, cap)) == NULL)
            die("realloc");
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_byte(bytes_t *b, uint8_t v)
{
    put(b, &v, 1);
}

static const char *out_dir;

static void write_seed(const char *target, const char *name, const bytes_t *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die(path);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (b->n && fwrite(b->p, 1, b->n, f) != b->n) || fclose(f) != 0)
        die(path);
}

/* ---- frames ---------------------------------------------------------------- */

static void put_frame(bytes_t *b, uint16_t type, const ProtobufCMessage *m, const void *payload,
                      uint32_t payload_len)
{
    size_t len;
    uint8_t *f = dpp_frame_pack(type, m, payload_len, &len);
    if (f == NULL)
        die("dpp_frame_pack");
    put(b, f, len);
    put(b, payload, payload_len);
    free(f);
}

static const char small_spec[] =
    "{\"table\":\"t\",\"batch_size\":8,\"features\":{\"dense\":[{\"name\":\"i1\"}],"
    "\"sparse\":[{\"name\":\"c1\",\"transforms\":[{\"op\":\"modulo\",\"n\":1000}]}]},"
    "\"label\":{\"name\":\"label\"}}";

static uint8_t *small_block(size_t *len);

/* One frame of each message type, in a plausible order. */
static void put_conversation(bytes_t *b)
{
    Dpp__Hello hello = DPP__HELLO__INIT;
    hello.version = DPP_PROTOCOL_VERSION;
    hello.role = "worker";
    put_frame(b, DPP_MSG_HELLO, &hello.base, NULL, 0);
    Dpp__HelloReply hello_reply = DPP__HELLO_REPLY__INIT;
    hello_reply.version = DPP_PROTOCOL_VERSION;
    put_frame(b, DPP_MSG_HELLO_REPLY, &hello_reply.base, NULL, 0);
    Dpp__Error error = DPP__ERROR__INIT;
    error.code = -1001;
    error.message = "invalid session spec";
    put_frame(b, DPP_MSG_ERROR, &error.base, NULL, 0);
    Dpp__SubmitRequest submit = DPP__SUBMIT_REQUEST__INIT;
    submit.spec_json = (char *)small_spec;
    put_frame(b, DPP_MSG_SUBMIT, &submit.base, NULL, 0);
    Dpp__SubmitReply submit_reply = DPP__SUBMIT_REPLY__INIT;
    submit_reply.session_id = "s-0001";
    put_frame(b, DPP_MSG_SUBMIT_REPLY, &submit_reply.base, NULL, 0);
    Dpp__StatusRequest status = DPP__STATUS_REQUEST__INIT;
    status.session_id = "s-0001";
    put_frame(b, DPP_MSG_STATUS, &status.base, NULL, 0);
    Dpp__CancelRequest cancel = DPP__CANCEL_REQUEST__INIT;
    cancel.session_id = "s-0001";
    put_frame(b, DPP_MSG_CANCEL, &cancel.base, NULL, 0);
    Dpp__CancelReply cancel_reply = DPP__CANCEL_REPLY__INIT;
    cancel_reply.session_id = "s-0001";
    cancel_reply.state = "running";
    put_frame(b, DPP_MSG_CANCEL_REPLY, &cancel_reply.base, NULL, 0);
    Dpp__RegisterRequest reg = DPP__REGISTER_REQUEST__INIT;
    reg.data_addr = "127.0.0.1:7001";
    reg.threads = 4;
    put_frame(b, DPP_MSG_REGISTER, &reg.base, NULL, 0);
    Dpp__RegisterReply reg_reply = DPP__REGISTER_REPLY__INIT;
    reg_reply.worker_id = 3;
    reg_reply.heartbeat_ms = 500;
    reg_reply.lease_timeout_ms = 5000;
    put_frame(b, DPP_MSG_REGISTER_REPLY, &reg_reply.base, NULL, 0);
    Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
    hb.worker_id = 3;
    put_frame(b, DPP_MSG_HEARTBEAT, &hb.base, NULL, 0);
    Dpp__LeaseRequest lease = DPP__LEASE_REQUEST__INIT;
    lease.max_leases = 2;
    put_frame(b, DPP_MSG_LEASE, &lease.base, NULL, 0);
    Dpp__Rejects rejects = DPP__REJECTS__INIT;
    rejects.corrupt = 1;
    rejects.example = 2;
    Dpp__SplitDone done = DPP__SPLIT_DONE__INIT;
    done.lease_id = 9;
    done.blocks = 2;
    done.rows = 100;
    done.records_rejected = 3;
    done.rejects = &rejects;
    put_frame(b, DPP_MSG_SPLIT_DONE, &done.base, NULL, 0);
    Dpp__AttachRequest attach = DPP__ATTACH_REQUEST__INIT;
    attach.session_id = "s-0001";
    attach.rank = 1;
    attach.resume = 1;
    attach.resume_epoch = 2;
    put_frame(b, DPP_MSG_ATTACH, &attach.base, NULL, 0);
    Dpp__SplitConsumed consumed = DPP__SPLIT_CONSUMED__INIT;
    consumed.session_id = "s-0001";
    consumed.epoch = 1;
    consumed.split_id = 7;
    put_frame(b, DPP_MSG_SPLIT_CONSUMED, &consumed.base, NULL, 0);
    Dpp__Subscribe sub = DPP__SUBSCRIBE__INIT;
    sub.session_id = "s-0001";
    sub.credits = 8;
    put_frame(b, DPP_MSG_SUBSCRIBE, &sub.base, NULL, 0);
    Dpp__Credit credit = DPP__CREDIT__INIT;
    credit.credits = 4;
    put_frame(b, DPP_MSG_CREDIT, &credit.base, NULL, 0);
}

static void frame_seeds(void)
{
    bytes_t b = {0};

    put_byte(&b, 0); /* the whole stream in one read */
    Dpp__Hello hello = DPP__HELLO__INIT;
    hello.version = DPP_PROTOCOL_VERSION;
    hello.role = "client";
    put_frame(&b, DPP_MSG_HELLO, &hello.base, NULL, 0);
    write_seed("frame", "hello", &b);

    b.n = 0;
    put_byte(&b, 7);
    Dpp__SubmitRequest submit = DPP__SUBMIT_REQUEST__INIT;
    submit.spec_json = (char *)small_spec;
    put_frame(&b, DPP_MSG_SUBMIT, &submit.base, NULL, 0);
    write_seed("frame", "submit", &b);

    b.n = 0;
    put_byte(&b, 3);
    Dpp__Rejects rejects = DPP__REJECTS__INIT;
    rejects.truncated = 1;
    rejects.type = 5;
    Dpp__SessionStatus st = DPP__SESSION_STATUS__INIT;
    st.session_id = "s-0001";
    st.state = "running";
    st.table = "criteo";
    st.epochs = 2;
    st.consumers = 4;
    st.rows_produced = 123456;
    st.rejects = &rejects;
    Dpp__SessionStatus st2 = DPP__SESSION_STATUS__INIT;
    st2.session_id = "s-0002";
    st2.state = "failed";
    st2.error = "cancelled";
    Dpp__SessionStatus *sessions[] = {&st, &st2};
    Dpp__StatusReply status = DPP__STATUS_REPLY__INIT;
    status.n_sessions = 2;
    status.sessions = sessions;
    put_frame(&b, DPP_MSG_STATUS_REPLY, &status.base, NULL, 0);
    write_seed("frame", "status_reply", &b);

    b.n = 0;
    put_byte(&b, 1); /* one byte per read */
    Dpp__Lease l1 = DPP__LEASE__INIT;
    l1.lease_id = 1;
    l1.session_id = "s-0001";
    l1.path = "/data/criteo/part-0.tfrecord";
    l1.rel_path = "part-0.tfrecord";
    l1.spec_json = (char *)small_spec;
    l1.byte_end = 4096;
    l1.record_count = 10;
    Dpp__Lease l2 = DPP__LEASE__INIT;
    l2.lease_id = 2;
    l2.kind = DPP__LEASE__KIND__INDEX;
    l2.path = "/data/criteo/part-1.tfrecord";
    l2.split_rows = 65536;
    Dpp__Lease *leases[] = {&l1, &l2};
    Dpp__LeaseReply lease_reply = DPP__LEASE_REPLY__INIT;
    lease_reply.n_leases = 2;
    lease_reply.leases = leases;
    put_frame(&b, DPP_MSG_LEASE_REPLY, &lease_reply.base, NULL, 0);
    write_seed("frame", "lease_reply", &b);

    b.n = 0;
    put_byte(&b, 5);
    uint64_t boundaries[] = {0, 1000, 2000, 2500};
    Dpp__IndexDone idx = DPP__INDEX_DONE__INIT;
    idx.lease_id = 2;
    idx.records = 130000;
    idx.n_boundaries = 4;
    idx.boundaries = boundaries;
    idx.from_sidecar = 1;
    idx.file_size = 2600;
    idx.file_mtime_ns = -5;
    idx.rejects = &rejects;
    idx.reject_detail = "truncated record at 2500";
    put_frame(&b, DPP_MSG_INDEX_DONE, &idx.base, NULL, 0);
    write_seed("frame", "index_done", &b);

    b.n = 0;
    put_byte(&b, 9);
    char *dense_names[] = {"i1", "user_emb"};
    uint32_t dense_dims[] = {1, 16};
    char *sparse_names[] = {"c1", "item_ids"};
    protobuf_c_boolean sparse_weighted[] = {0, 1};
    char *workers[] = {"127.0.0.1:7001", "127.0.0.1:7002"};
    Dpp__AttachReply ar = DPP__ATTACH_REPLY__INIT;
    ar.session_id = "s-0001";
    ar.consumers = 2;
    ar.epochs = 1;
    ar.batch_size = 4096;
    ar.n_dense_names = 2;
    ar.dense_names = dense_names;
    ar.n_dense_dims = 2;
    ar.dense_dims = dense_dims;
    ar.n_sparse_names = 2;
    ar.sparse_names = sparse_names;
    ar.n_sparse_weighted = 2;
    ar.sparse_weighted = sparse_weighted;
    ar.label_name = "label";
    ar.n_workers = 2;
    ar.workers = workers;
    ar.state = "running";
    put_frame(&b, DPP_MSG_ATTACH_REPLY, &ar.base, NULL, 0);
    write_seed("frame", "attach_reply", &b);

    b.n = 0;
    put_byte(&b, 13);
    size_t blen;
    uint8_t *block = small_block(&blen);
    Dpp__BlockHeader bh = DPP__BLOCK_HEADER__INIT;
    bh.epoch = 1;
    bh.split_id = 3;
    bh.rows = 3;
    bh.codec = 0;
    bh.raw_size = blen;
    bh.last = 1;
    put_frame(&b, DPP_MSG_BLOCK, &bh.base, block, (uint32_t)blen);
    free(block);
    write_seed("frame", "block", &b);

    b.n = 0;
    put_byte(&b, 33);
    put_conversation(&b);
    write_seed("frame", "conversation", &b);

    b.n = 0;
    put_byte(&b, 2);
    put_conversation(&b);
    b.n -= 5; /* ends inside the last frame */
    write_seed("frame", "truncated", &b);

    b.n = 0;
    put_byte(&b, 4);
    put(&b, "GET / HTTP/1.1\r\n\r\n", 18);
    write_seed("frame", "not_dpp", &b);
    free(b.p);
}

/* ---- tf.Examples ------------------------------------------------------------- */

/* A feature entry for the Features message under construction. */
typedef struct feature_set {
    Tfex__FeatureEntry entries[16];
    Tfex__FeatureEntry *ptrs[16];
    Tfex__Feature features[16];
    Tfex__FloatList floats[16];
    Tfex__Int64List ints[16];
    Tfex__BytesList bytes[16];
    size_t n;
} feature_set_t;

static Tfex__Feature *add_entry(feature_set_t *s, const char *key)
{
    size_t i = s->n++;
    tfex__feature_entry__init(&s->entries[i]);
    tfex__feature__init(&s->features[i]);
    s->entries[i].key = (char *)key;
    s->entries[i].value = &s->features[i];
    s->ptrs[i] = &s->entries[i];
    return &s->features[i];
}

static void add_floats(feature_set_t *s, const char *key, float *v, size_t n)
{
    Tfex__Feature *f = add_entry(s, key);
    Tfex__FloatList *l = &s->floats[s->n - 1];
    tfex__float_list__init(l);
    l->n_value = n;
    l->value = v;
    f->kind_case = TFEX__FEATURE__KIND_FLOAT_LIST;
    f->float_list = l;
}

static void add_int64s(feature_set_t *s, const char *key, int64_t *v, size_t n)
{
    Tfex__Feature *f = add_entry(s, key);
    Tfex__Int64List *l = &s->ints[s->n - 1];
    tfex__int64_list__init(l);
    l->n_value = n;
    l->value = v;
    f->kind_case = TFEX__FEATURE__KIND_INT64_LIST;
    f->int64_list = l;
}

static void add_bytes(feature_set_t *s, const char *key, ProtobufCBinaryData *v, size_t n)
{
    Tfex__Feature *f = add_entry(s, key);
    Tfex__BytesList *l = &s->bytes[s->n - 1];
    tfex__bytes_list__init(l);
    l->n_value = n;
    l->value = v;
    f->kind_case = TFEX__FEATURE__KIND_BYTES_LIST;
    f->bytes_list = l;
}

static void pack_example(feature_set_t *s, bytes_t *out)
{
    Tfex__Features features = TFEX__FEATURES__INIT;
    features.n_feature = s->n;
    features.feature = s->ptrs;
    Tfex__Example ex = TFEX__EXAMPLE__INIT;
    ex.features = &features;
    size_t n = tfex__example__get_packed_size(&ex);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        die("malloc");
    tfex__example__pack(&ex, buf);
    put(out, buf, n);
    free(buf);
}

/* Record i of a small Criteo-like table, using the fuzz target's names. */
static void example_row(unsigned i, bytes_t *out)
{
    feature_set_t s = {0};
    float label = (float)(i % 2), i1 = 0.5f * (float)i, emb[16];
    int64_t i13 = 7 + i, c1[3] = {1, -1, (int64_t)i * 1000003}, ids[2] = {42, 1 << 20};
    float weights[2] = {0.25f, 1.5f};
    for (unsigned k = 0; k < 16; k++)
        emb[k] = (float)k / 8.0f - 1.0f;
    ProtobufCBinaryData tag = {3, (uint8_t *)"abc"};
    add_floats(&s, "label", &label, 1);
    add_floats(&s, "i1", &i1, 1);
    add_int64s(&s, "i13", &i13, 1);
    if (i != 1)
        add_floats(&s, "user_emb", emb, 16);
    add_int64s(&s, "c1", c1, 1 + i % 3);
    add_int64s(&s, "c26", NULL, 0);
    add_int64s(&s, "item_ids", ids, 2);
    add_floats(&s, "item_weights_long_name", weights, 2);
    add_bytes(&s, "y", &tag, 1);
    add_bytes(&s, "not_projected", &tag, 1);
    pack_example(&s, out);
}

/* Hand-written protobuf for the encodings protobuf-c never emits here. */
static void pb_varint(bytes_t *b, uint64_t v)
{
    while (v >= 0x80) {
        put_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(b, (uint8_t)v);
}

static void pb_len(bytes_t *b, unsigned field, const bytes_t *body)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, body->n);
    put(b, body->p, body->n);
}

/* Example{features{feature{key, value=Feature(list field `kind`, list)}}}. */
static void wrap_entry(bytes_t *features, const char *key, unsigned kind, const bytes_t *list)
{
    bytes_t feature = {0}, entry = {0}, k = {0};
    pb_len(&feature, kind, list);
    put(&k, key, strlen(key));
    pb_len(&entry, 1, &k);
    pb_len(&entry, 2, &feature);
    pb_len(features, 1, &entry);
    free(feature.p);
    free(entry.p);
    free(k.p);
}

static void unpacked_example(bytes_t *out)
{
    bytes_t features = {0}, list = {0};
    /* label: unpacked floats (wire type 5) */
    float one = 1.0f;
    pb_varint(&list, 1 << 3 | 5);
    put(&list, &one, 4);
    wrap_entry(&features, "label", 2, &list);
    /* c1: unpacked int64s, then a packed run, in one list */
    list.n = 0;
    pb_varint(&list, 1 << 3 | 0);
    pb_varint(&list, UINT64_MAX); /* -1: ten bytes */
    pb_varint(&list, 1 << 3 | 0);
    pb_varint(&list, 300);
    bytes_t packed = {0};
    pb_varint(&packed, 5);
    pb_varint(&packed, 1u << 31);
    pb_len(&list, 1, &packed);
    wrap_entry(&features, "c1", 3, &list);
    /* i1: a Feature with no list set */
    list.n = 0;
    bytes_t entry = {0}, k = {0}, empty = {0};
    put(&k, "i1", 2);
    pb_len(&entry, 1, &k);
    pb_len(&entry, 2, &empty);
    pb_len(&features, 1, &entry);
    /* an unknown field at the Example level */
    pb_len(out, 1, &features);
    pb_varint(out, 5 << 3 | 0);
    pb_varint(out, 12345);
    free(features.p);
    free(list.p);
    free(packed.p);
    free(entry.p);
    free(k.p);
}

static void example_seeds(void)
{
    bytes_t b = {0};
    example_row(0, &b);
    write_seed("example", "full", &b);
    b.n = 0;
    example_row(1, &b);
    write_seed("example", "no_emb", &b);
    b.n = 0;
    unpacked_example(&b);
    write_seed("example", "unpacked", &b);
    b.n = 0;
    write_seed("example", "empty", &b);
    free(b.p);
}

/* ---- TFRecord files and their indexes ----------------------------------------- */

static void put_record(bytes_t *file, const bytes_t *payload)
{
    size_t start = file->n;
    uint8_t pad[DPP_TFRECORD_OVERHEAD] = {0};
    put(file, pad, sizeof pad);
    put(file, payload->p, payload->n);
    /* frame in place: header before, CRC after the payload */
    uint8_t *rec = file->p + start;
    memmove(rec + 12, rec + 16, payload->n);
    dpp_tfrecord_frame(rec, rec + 12, payload->n);
}

/* A file of n records of example_row(); *sizes gets each framed size. */
static void tfrecord_file(bytes_t *file, unsigned n, size_t *sizes)
{
    bytes_t payload = {0};
    for (unsigned i = 0; i < n; i++) {
        payload.n = 0;
        example_row(i, &payload);
        put_record(file, &payload);
        if (sizes)
            sizes[i] = payload.n + DPP_TFRECORD_OVERHEAD;
    }
    free(payload.p);
}

static void tfrecord_seeds(void)
{
    bytes_t b = {0};
    size_t sizes[3];

    /* prefix: record limit (0: none), record to restart from */
    put_byte(&b, 0);
    put_byte(&b, 1);
    tfrecord_file(&b, 3, sizes);
    write_seed("tfrecord", "three", &b);

    /* the same with a limit the records pass, and one they do not */
    b.p[0] = 255;
    write_seed("tfrecord", "limit_ok", &b);
    b.p[0] = 20;
    write_seed("tfrecord", "too_big", &b);

    b.p[0] = 0;
    b.p[2 + sizes[0] + 20] ^= 0x40; /* a payload byte of record 1 */
    write_seed("tfrecord", "bad_payload_crc", &b);
    b.p[2 + sizes[0] + 20] ^= 0x40;

    b.p[2 + sizes[0] + 9] ^= 0x01; /* record 1's length CRC */
    write_seed("tfrecord", "bad_length_crc", &b);
    b.p[2 + sizes[0] + 9] ^= 0x01;

    b.n -= 7;
    write_seed("tfrecord", "truncated", &b);

    b.n = 0;
    put_byte(&b, 0);
    put_byte(&b, 2);
    bytes_t empty = {0};
    for (int i = 0; i < 3; i++)
        put_record(&b, &empty);
    write_seed("tfrecord", "empty_records", &b);
    free(b.p);

    /* Index sidecars of the three-record file, in the spellings allowed. */
    char text[256];
    bytes_t t = {0};
    size_t off = 0;
    int len = 0;
    for (int i = 0; i < 3; i++) {
        len += snprintf(text + len, sizeof text - (size_t)len, "%zu %zu\n", off, sizes[i]);
        off += sizes[i];
    }
    put(&t, text, (size_t)len);
    write_seed("tfindex", "three", &t);
    t.n = 0;
    len = snprintf(text, sizeof text, "0\t%zu\r\n%zu\t%zu", sizes[0], sizes[0], sizes[1]);
    put(&t, text, (size_t)len);
    write_seed("tfindex", "tabs_crlf_no_final_newline", &t);
    t.n = 0;
    write_seed("tfindex", "empty", &t);
    put(&t, "0 16\n16 15\n", 11);
    write_seed("tfindex", "bad_size", &t);
    t.n = 0;
    put(&t, "0 18446744073709551615\n", 23);
    write_seed("tfindex", "huge", &t);
    free(t.p);
}

/* ---- blocks -------------------------------------------------------------------- */

/* A block of `rows` rows of the given shape, with varied values. */
static uint8_t *make_block(const dpp_block_shape_t *shape, unsigned rows, size_t *len)
{
    dpp_block_builder_t b;
    if (dpp_block_builder_init(&b, shape) != 0)
        die("dpp_block_builder_init");
    float dense[16];
    int64_t ids[3][4];
    float weights[3][4];
    const int64_t *idp[3];
    const float *wp[3];
    size_t lens[3];
    for (unsigned r = 0; r < rows; r++) {
        for (unsigned i = 0; i < 16; i++)
            dense[i] = (float)(r * 16 + i) * 0.5f;
        for (unsigned k = 0; k < shape->nsparse; k++) {
            lens[k] = (r + k) % 4;
            for (size_t j = 0; j < lens[k]; j++) {
                ids[k][j] = (int64_t)(r * 100 + k * 10 + j);
                weights[k][j] = 0.5f + (float)j;
            }
            idp[k] = ids[k];
            wp[k] = weights[k];
        }
        if (dpp_block_builder_append(&b, (float)(r % 2), dense, idp, wp, lens) != 0)
            die("dpp_block_builder_append");
    }
    uint8_t *out;
    if (dpp_block_builder_finish(&b, &out, len) != 0)
        die("dpp_block_builder_finish");
    dpp_block_builder_close(&b);
    return out;
}

static uint8_t *small_block(size_t *len)
{
    return make_block(&dpp_fuzz_shapes[2], 3, len);
}

/* fuzz_block's input: 12 bytes of header fields, then the payload. */
static void put_block_input(bytes_t *b, uint8_t codec, uint8_t flags, uint64_t raw_size,
                            const void *payload, size_t len)
{
    uint8_t prefix[12] = {codec, flags, 1, 0};
    memcpy(prefix + 4, &raw_size, 8);
    put(b, prefix, sizeof prefix);
    put(b, payload, len);
}

static void block_seeds(void)
{
    bytes_t b = {0};
    char name[64];
    for (size_t s = 0; s < DPP_FUZZ_NSHAPES; s++) {
        size_t len;
        uint8_t *raw = make_block(&dpp_fuzz_shapes[s], 3, &len);
        b.n = 0;
        put_block_input(&b, 0, 0, 0, raw, len);
        snprintf(name, sizeof name, "shape%zu_raw", s);
        write_seed("block", name, &b);

        size_t bound = ZSTD_compressBound(len);
        uint8_t *z = malloc(bound);
        if (z == NULL)
            die("malloc");
        size_t zn = ZSTD_compress(z, bound, raw, len, 3);
        if (ZSTD_isError(zn)) {
            errno = EINVAL;
            die("ZSTD_compress");
        }
        b.n = 0;
        /* raw_size given explicitly, as the BLOCK header carries it */
        put_block_input(&b, 1, 1, len, z, zn);
        snprintf(name, sizeof name, "shape%zu_zstd", s);
        write_seed("block", name, &b);
        free(z);
        free(raw);
    }
    size_t len;
    uint8_t *raw = make_block(&dpp_fuzz_shapes[3], 0, &len);
    b.n = 0;
    put_block_input(&b, 0, 0, 0, raw, len);
    write_seed("block", "no_rows", &b);
    free(raw);
    free(b.p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST)
        die(out_dir);
    frame_seeds();
    example_seeds();
    tfrecord_seeds();
    block_seeds();
    return 0;
}
