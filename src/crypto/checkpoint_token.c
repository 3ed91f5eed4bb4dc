/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint tokens: packing, parsing and the HMAC-SHA256 that makes a
 * token the master can trust (layout in checkpoint_token.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/errtext.h"
#include "base/util.h"
#include "crypto/checkpoint_token.h"
#include "crypto/hmac.h"
#include "dpp/error.h"

#define TOKEN_MAGIC "DPT1"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int dpp_ckpt_token_pack(const dpp_ckpt_token_t *t, const uint8_t key[DPP_CKPT_KEY_LEN],
                        uint8_t out[DPP_CKPT_TOKEN_SIZE])
{
    memset(out, 0, DPP_CKPT_TOKEN_SIZE);
    memcpy(out, TOKEN_MAGIC, 4);
    out[4] = DPP_CKPT_TOKEN_VERSION;
    memcpy(out + 8, t->session, strnlen(t->session, sizeof t->session - 1));
    const uint32_t v[] = {t->rank,    t->epoch,   t->seq,         t->index,
                          t->row,     t->batches, t->rank_splits, t->generation};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        put32(out + 32 + 4 * i, v[i]);
    return dpp_hmac_sha256(key, DPP_CKPT_KEY_LEN, out, DPP_CKPT_MAC_OFFSET,
                           out + DPP_CKPT_MAC_OFFSET);
}

int dpp_ckpt_token_parse(const void *buf, size_t len, dpp_ckpt_token_t *t, char *why, size_t whylen)
{
    const uint8_t *p = buf;
    memset(t, 0, sizeof *t);
    if (buf == NULL || len < 8 || memcmp(p, TOKEN_MAGIC, 4) != 0)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "magic: not a dpp checkpoint token (%zu bytes, no \"%s\")", buf ? len : 0,
                        TOKEN_MAGIC);
    unsigned version = (unsigned)p[4] | (unsigned)p[5] << 8;
    if (version == 1)
        return dpp_errf(
            DPP_ETOKEN, why, whylen,
            "version: the token is version 1, from an older version of dpp (checksummed, "
            "not signed); this version takes only signed version-%d tokens: take a new "
            "checkpoint",
            DPP_CKPT_TOKEN_VERSION);
    if (version != DPP_CKPT_TOKEN_VERSION)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "version: the token is version %u, this client reads version %d", version,
                        DPP_CKPT_TOKEN_VERSION);
    if (len != DPP_CKPT_TOKEN_SIZE)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "length: the token is %zu bytes, a version-%d token is %d", len,
                        DPP_CKPT_TOKEN_VERSION, DPP_CKPT_TOKEN_SIZE);
    if (p[6] || p[7])
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "flags: the token says 0x%02x%02x, version %d has none", p[7], p[6],
                        DPP_CKPT_TOKEN_VERSION);
    if (p[8] == 0 || memchr(p + 8, 0, 24) == NULL)
        return dpp_errf(DPP_ETOKEN, why, whylen, "session: the token's session id is %s",
                        p[8] == 0 ? "empty" : "not terminated within 24 bytes");
    memcpy(t->session, p + 8, 24);
    uint32_t *v[] = {&t->rank, &t->epoch,   &t->seq,         &t->index,
                     &t->row,  &t->batches, &t->rank_splits, &t->generation};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        *v[i] = dpp_load_le32(p + 32 + 4 * i);
    return 0;
}

int dpp_ckpt_token_verify(const uint8_t buf[DPP_CKPT_TOKEN_SIZE],
                          const uint8_t key[DPP_CKPT_KEY_LEN])
{
    uint8_t mac[DPP_SHA256_LEN];
    int ok = dpp_hmac_sha256(key, DPP_CKPT_KEY_LEN, buf, DPP_CKPT_MAC_OFFSET, mac) == 0 &&
             dpp_ct_equal(mac, buf + DPP_CKPT_MAC_OFFSET, DPP_SHA256_LEN);
    explicit_bzero(mac, sizeof mac);
    return ok;
}
