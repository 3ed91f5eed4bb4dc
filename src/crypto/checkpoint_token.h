/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint tokens (docs/client.md#checkpoints-and-resume): their layout,
 * and signing and verifying them with HMAC-SHA256 under a session's token
 * key. One copy, used by libdppclient (which writes and pre-checks tokens)
 * and the master (which verifies them before a resume acts on one). */
#ifndef DPP_CRYPTO_CHECKPOINT_TOKEN_H
#define DPP_CRYPTO_CHECKPOINT_TOKEN_H

#include <stddef.h>
#include <stdint.h>

/* A token is 96 bytes, little-endian:
 *
 *   0  4  magic "DPT1" (every version; the version field tells them apart)
 *   4  2  version (2; version 1 was 64 bytes with a CRC32C and is refused)
 *   6  2  flags (0)
 *   8 24  session id, NUL-padded (at most 23 bytes)
 *  32  4  rank
 *  36  4  epoch (== the session's epochs: taken after the last batch)
 *  40  4  split position in the rank's plan of that epoch
 *  44  4  block index in that split
 *  48  4  row in that block
 *  52  4  batches handed out in the epoch before this position
 *  56  4  splits of the rank in the epoch (DPP_CKPT_SPLITS_UNKNOWN: not
 *         known to the client yet)
 *  60  4  generation: the session's elastic resumes before the position (0
 *         before any; tokens of older versions have 0 here)
 *  64 32  HMAC-SHA256 under the session's token key of bytes 0..63
 *
 * The MAC is the whole SHA-256 output, not truncated. */
#define DPP_CKPT_TOKEN_SIZE 96
#define DPP_CKPT_TOKEN_VERSION 2
#define DPP_CKPT_TOKEN_V1_SIZE 64
#define DPP_CKPT_MAC_OFFSET 64
#define DPP_CKPT_KEY_LEN 32
#define DPP_CKPT_SPLITS_UNKNOWN 0xffffffffu

/* The fields of a token. session is NUL-terminated. Parsing leaves checking
 * generation to the caller (after the fields a forger would change, so
 * that a refusal names those). */
typedef struct dpp_ckpt_token {
    char session[24];
    uint32_t rank, epoch, seq, index, row, batches, rank_splits;
    uint32_t generation;
} dpp_ckpt_token_t;

/* Writes t as a signed token to out (DPP_CKPT_TOKEN_SIZE bytes). A session
 * id longer than 23 bytes is cut (session ids are shorter). Returns 0, or
 * -ENOMEM when the MAC could not be computed (out is then no token). */
int dpp_ckpt_token_pack(const dpp_ckpt_token_t *t, const uint8_t key[DPP_CKPT_KEY_LEN],
                        uint8_t out[DPP_CKPT_TOKEN_SIZE]);

/* Reads the fields of the token buf[0..len) into *t without checking its
 * MAC (which needs the session's key). Returns 0, or DPP_ETOKEN with why
 * (NUL-terminated when whylen > 0) naming what is wrong: the length, the
 * magic, a version-1 token ("from an older version of dpp"), another
 * version, the flags or the session id. */
int dpp_ckpt_token_parse(const void *buf, size_t len, dpp_ckpt_token_t *t, char *why,
                         size_t whylen);

/* 1 when buf (DPP_CKPT_TOKEN_SIZE bytes) carries the MAC of its first 64
 * bytes under key, else 0. Compares in constant time. */
int dpp_ckpt_token_verify(const uint8_t buf[DPP_CKPT_TOKEN_SIZE],
                          const uint8_t key[DPP_CKPT_KEY_LEN]);

#endif
