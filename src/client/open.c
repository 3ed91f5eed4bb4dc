/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient, opening and closing a client: options, the attach to the
 * master, the session's schema, starting and stopping the I/O thread.
 * Nothing here aborts or exits: every failure is a negative return. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "checkpoint.h"
#include "client_internal.h"
#include "core.h"
#include "io.h"
#include "crypto/hmac.h"
#include "crypto/token.h"
#include "format/block.h"
#include "wire/net.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

#define DPP_CLIENT_DEFAULT_PREFETCH 8
#define DPP_CLIENT_DEFAULT_PREFETCH_SPLITS 4
#define DPP_CLIENT_DEFAULT_MAX_BLOCK_MB 256
#define DPP_CLIENT_DEFAULT_BUDGET (256u << 20)
#define DPP_CLIENT_DEFAULT_TIMEOUT_MS 10000

/* Why this thread's last open failed (dpp_client_open_error()). */
static _Thread_local char open_error[1024];

static void set_open_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(open_error, sizeof open_error, fmt, ap);
    va_end(ap);
}

const char *dpp_client_open_error(void)
{
    return open_error;
}

void dpp_client_options_init(dpp_client_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->prefetch = DPP_CLIENT_DEFAULT_PREFETCH;
    o->memory_budget = DPP_CLIENT_DEFAULT_BUDGET;
    o->connect_timeout_ms = DPP_CLIENT_DEFAULT_TIMEOUT_MS;
    o->prefetch_splits = DPP_CLIENT_DEFAULT_PREFETCH_SPLITS;
}

/* resume: the token's bytes (DPP_CKPT_TOKEN_SIZE) and fields, or NULL;
 * o->elastic_tokens: an elastic resume to o->world_size ranks. */
static int attach(dpp_client_t *c, const char *master, int timeout_ms, const uint8_t *resume_raw,
                  const dpp_ckpt_token_t *resume, const dpp_client_options_t *o,
                  struct sockaddr_storage *master_ss, Dpp__AttachReply **reply)
{
    dpp_sync_conn_t conn;
    char hint[512];
    int rc = dpp_addr_parse(master, master_ss);
    if (rc) {
        set_open_error("master %s: %s", master, dpp_connect_hint(rc, hint, sizeof hint));
        return rc;
    }
    if ((rc = dpp_sync_connect(&conn, master, "client", timeout_ms, &c->auth)) != 0) {
        if (conn.error[0])
            set_open_error("master %s: %s", master, conn.error);
        else
            set_open_error("master %s: %s", master, dpp_connect_hint(rc, hint, sizeof hint));
        return rc;
    }
    Dpp__AttachRequest req = DPP__ATTACH_REQUEST__INIT;
    req.session_id = c->session;
    req.rank = c->rank;
    req.prefetch_splits = c->core->prefetch_splits;
    req.client_id = c->core->client_id;
    if (resume) {
        req.resume = 1;
        req.resume_epoch = resume->epoch;
        req.resume_seq = resume->seq;
        req.resume_token.data = (uint8_t *)resume_raw;
        req.resume_token.len = DPP_CKPT_TOKEN_SIZE;
        req.generation = resume->generation;
        req.generation_known = 1;
    }
    if (o->elastic_tokens) {
        req.elastic_tokens.data = (uint8_t *)o->elastic_tokens;
        req.elastic_tokens.len = o->elastic_tokens_len;
        req.elastic_consumers = o->world_size;
    }
    uint16_t type;
    ProtobufCMessage *m = NULL;
    rc = dpp_sync_call(&conn, DPP_MSG_ATTACH, &req.base, &type, &m, timeout_ms);
    dpp_sync_close(&conn);
    if (rc)
        return rc;
    if (type == DPP_MSG_ATTACH_REPLY) {
        *reply = (Dpp__AttachReply *)m;
        return 0;
    }
    rc = DPP_EMSGTYPE;
    if (type == DPP_MSG_ERROR) {
        rc = ((Dpp__Error *)m)->code;
        set_open_error("%s", ((Dpp__Error *)m)->message);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc < 0 ? rc : DPP_EMSG;
}

int dpp_client_open_opts(dpp_client_t **out, const dpp_client_options_t *o)
{
    *out = NULL;
    open_error[0] = '\0';
    dpp_ckpt_token_t tok, *resume = NULL;
    if (o == NULL || o->master == NULL || o->master[0] == '\0' || o->prefetch == 0 ||
        o->prefetch > 1024 || o->memory_budget == 0 || o->prefetch_splits > 1024 ||
        o->max_block_mb > 4096)
        return DPP_EINVAL;
    if (o->resume_token) {
        char why[512];
        if (dpp_ckpt_token_parse(o->resume_token, o->resume_token_len, &tok, why, sizeof why)) {
            set_open_error("checkpoint token refused: %s", why);
            return DPP_ETOKEN;
        }
        if (o->session && strcmp(o->session, tok.session) != 0) {
            set_open_error("checkpoint token refused: session: the token says \"%s\", the "
                           "options say \"%s\"",
                           tok.session, o->session);
            return DPP_ETOKEN;
        }
        if (tok.rank != o->rank) {
            set_open_error("checkpoint token refused: rank: the token says %u, the options say %u",
                           tok.rank, o->rank);
            return DPP_ETOKEN;
        }
        resume = &tok;
    }
    dpp_ckpt_token_t first;
    if (o->elastic_tokens) {
        size_t n = o->elastic_tokens_len / DPP_CKPT_TOKEN_SIZE;
        if (resume) {
            set_open_error("elastic resume: give either resume_token or elastic_tokens, not both");
            return DPP_EINVAL;
        }
        if (o->world_size == 0 || o->rank >= o->world_size) {
            set_open_error("elastic resume: world_size (the new world's, %u) is required, and "
                           "rank (%u) below it",
                           o->world_size, o->rank);
            return DPP_ERANK;
        }
        if (n == 0 || o->elastic_tokens_len % DPP_CKPT_TOKEN_SIZE != 0) {
            set_open_error("elastic resume: %zu bytes of tokens: expected every old rank's "
                           "%d-byte checkpoint token, concatenated in rank order",
                           o->elastic_tokens_len, DPP_CKPT_TOKEN_SIZE);
            return DPP_ETOKEN;
        }
        for (size_t i = 0; i < n; i++) {
            dpp_ckpt_token_t t;
            char why[512];
            if (dpp_ckpt_token_parse((const uint8_t *)o->elastic_tokens + i * DPP_CKPT_TOKEN_SIZE,
                                     DPP_CKPT_TOKEN_SIZE, &t, why, sizeof why)) {
                set_open_error("elastic resume: token %zu refused: %s", i, why);
                return DPP_ETOKEN;
            }
            if (i == 0)
                first = t;
            if (t.rank != i || strcmp(t.session, first.session) != 0 ||
                t.generation != first.generation) {
                set_open_error("elastic resume: token %zu is rank %u of session %s at generation "
                               "%u, token 0 rank 0 of %s at %u: give one checkpoint's tokens of "
                               "every rank, in rank order",
                               i, t.rank, t.session, t.generation, first.session,
                               first.generation);
                return DPP_ETOKEN;
            }
        }
        if (o->session && strcmp(o->session, first.session) != 0) {
            set_open_error("elastic resume: the tokens are of session \"%s\", the options say "
                           "\"%s\"",
                           first.session, o->session);
            return DPP_ETOKEN;
        }
    }
    const char *session = resume            ? tok.session
                          : o->elastic_tokens ? first.session
                                              : o->session;
    if (session == NULL || session[0] == '\0')
        return DPP_EINVAL;
    if (strlen(session) >= 24)
        return DPP_ENOSESSION;
    dpp_client_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    Dpp__AttachReply *r = NULL;
    int rc = -ENOMEM;
    if ((c->core = dpp__core_new()) == NULL || (c->zctx = ZSTD_createDCtx()) == NULL)
        goto fail;
    if (o->token) {
        /* the token itself; without it, the file $DPP_TOKEN_FILE names */
        char *t = strdup(o->token);
        if (t == NULL)
            goto fail;
        c->auth.token = (const uint8_t *)t;
        c->auth.len = strlen(t);
    } else {
        char why[256];
        if ((rc = dpp_auth_load(&c->auth, NULL, why, sizeof why)) != 0) {
            fprintf(stderr, "libdppclient: %s\n", why);
            set_open_error("%s", why);
            goto fail;
        }
    }
    snprintf(c->session, sizeof c->session, "%s", session);
    c->rank = o->rank;
    dpp_core_t *core = c->core;
    core->prefetch = o->prefetch;
    core->prefetch_splits =
        o->prefetch_splits ? o->prefetch_splits : DPP_CLIENT_DEFAULT_PREFETCH_SPLITS;
    core->max_raw = (size_t)(o->max_block_mb ? o->max_block_mb : DPP_CLIENT_DEFAULT_MAX_BLOCK_MB)
                    << 20;
    /* A zstd frame may ask for a window larger than its content: bound the
     * decoder's memory by the largest block accepted, too. */
    unsigned wlog = 10;
    while (wlog < 31 && ((size_t)1 << wlog) < core->max_raw)
        wlog++;
    ZSTD_DCtx_setParameter(c->zctx, ZSTD_d_windowLogMax, (int)wlog);
    core->budget = o->memory_budget;
    /* this client's id for the rank's ownership at the master */
    do {
        if ((rc = dpp_random_bytes(&core->client_id, sizeof core->client_id)) != 0)
            goto fail;
    } while (core->client_id == 0);
    struct sockaddr_storage master_ss;
    int timeout = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : DPP_CLIENT_DEFAULT_TIMEOUT_MS;
    /* A master that is not up yet (or restarting) is waited for until the
     * timeout, with backoff; any answer it gives ends the wait. */
    int64_t deadline = dpp_now_ms() + timeout;
    unsigned backoff_ms = 100;
    for (;;) {
        int64_t left = deadline - dpp_now_ms();
        rc =
            attach(c, o->master, left > 0 ? (int)left : 1, o->resume_token, resume, o, &master_ss,
                   &r);
        if (rc != -ECONNREFUSED && rc != DPP_ECLOSED && rc != -ECONNRESET)
            break;
        if (dpp_now_ms() + (int64_t)backoff_ms >= deadline)
            break;
        struct timespec ts = {backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        backoff_ms = backoff_ms >= 500 ? 1000 : backoff_ms * 2;
    }
    if (rc)
        goto fail;
    if (resume) {
        /* the master checked it; so does the client, before anything
         * starts, against what the master answered */
        char why[512];
        if ((rc = dpp__token_check_reply(resume, o->resume_token, r, why, sizeof why)) != 0) {
            set_open_error("checkpoint token refused: %s", why);
            goto fail;
        }
    }
    dpp__core_take_key(core, r);
    if ((rc = dpp__core_take_rest(core, r)) != 0)
        goto fail;
    if (o->world_size && o->world_size != r->consumers) {
        set_open_error("world_size %u does not match session %s, which has %u consumer%s (ranks "
                       "0 to %u): give the trainers' world size to the spec's \"consumers\", or "
                       "leave world_size 0",
                       o->world_size, c->session, r->consumers, r->consumers == 1 ? "" : "s",
                       r->consumers - 1);
        rc = DPP_ERANK;
        goto fail;
    }
    if ((rc = dpp__core_set_schema(core, r)) != 0)
        goto fail;
    if ((rc = dpp_block_builder_init(&c->assembly, &core->shape)) != 0)
        goto fail;
    if (core->nsources > 0 &&
        (c->assembly_sources = calloc(r->batch_size, sizeof *c->assembly_sources)) == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    /* A failed session still opens, so that the trainer can read why with
     * dpp_client_error() after next() reports DPP_EFAILED. */
    if (dpp__state_failed(r->state))
        dpp__core_fail(core, DPP_EFAILED, r->error);
    c->epochs = r->epochs;
    c->batch_size = r->batch_size;
    dpp__core_plan(core, r);
    /* A finished session has nothing left for anyone: next() says so at
     * once (a resume may still go back into it: the master decides). */
    if (strcmp(r->state, "done") == 0 && !resume)
        c->session_ended = 1;
    if (resume && (rc = dpp__client_start_at(c, resume)) != 0)
        goto fail;
    if (!resume && r->taken_over && (r->start_seq > 0 || r->epoch > 0)) {
        /* the rank was read before (a client gone without a token): go on
         * from its first split not consumed */
        dpp_ckpt_token_t at = {.rank = c->rank,
                               .epoch = r->epoch,
                               .seq = r->start_seq,
                               .batches = (uint32_t)(r->start_records / r->batch_size),
                               .rank_splits = r->rank_splits_per_epoch};
        if ((rc = dpp__client_start_at(c, &at)) != 0)
            goto fail;
    }
    rc = dpp__io_start(core, c->session, c->rank, &c->auth, &master_ss, r->workers, r->n_workers,
                       &c->io);
    if (rc)
        goto fail;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    open_error[0] = '\0';
    *out = c;
    return 0;

fail:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    dpp_block_builder_close(&c->assembly);
    free(c->assembly_sources);
    ZSTD_freeDCtx(c->zctx);
    if (c->core)
        dpp__core_unref(c->core);
    free((void *)c->auth.token);
    free(c);
    return rc;
}

int dpp_client_open(dpp_client_t **out, const char *master_addr, const char *session, unsigned rank,
                    int timeout_ms)
{
    dpp_client_options_t o;
    dpp_client_options_init(&o);
    o.master = master_addr;
    o.session = session;
    o.rank = rank;
    if (timeout_ms > 0)
        o.connect_timeout_ms = timeout_ms;
    return dpp_client_open_opts(out, &o);
}

void dpp_client_close(dpp_client_t *c)
{
    if (c == NULL)
        return;
    dpp__io_stop(c->io);
    free(c->cur.raw);
    dpp_block_builder_close(&c->assembly);
    free(c->assembly_sources);
    ZSTD_freeDCtx(c->zctx);
    dpp__core_unref(c->core);
    free((void *)c->auth.token);
    free(c);
}
