/* SPDX-License-Identifier: Apache-2.0 */
/* Wire frames: a fixed 16-byte header, a packed protobuf-c message, then
 * optional raw payload bytes (block data travels there so it is never copied
 * through protobuf). Layout and message types: docs/protocol.md. */
#ifndef DPP_WIRE_FRAME_H
#define DPP_WIRE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define DPP_PROTOCOL_VERSION 1
#define DPP_FRAME_MAGIC 0x31505044u /* "DPP1" read as little-endian u32 */
#define DPP_FRAME_HEADER_SIZE 16

/* Message types. Numbers are wire format: append only. */
#define DPP_MSG_TYPES(X)                                                                           \
    X(HELLO, 1, dpp__hello__descriptor)                                                            \
    X(HELLO_REPLY, 2, dpp__hello_reply__descriptor)                                                \
    X(ERROR, 3, dpp__error__descriptor)                                                            \
    X(AUTH, 4, dpp__auth__descriptor)                                                              \
    X(SUBMIT, 10, dpp__submit_request__descriptor)                                                 \
    X(SUBMIT_REPLY, 11, dpp__submit_reply__descriptor)                                             \
    X(STATUS, 12, dpp__status_request__descriptor)                                                 \
    X(STATUS_REPLY, 13, dpp__status_reply__descriptor)                                             \
    X(CANCEL, 14, dpp__cancel_request__descriptor)                                                 \
    X(CANCEL_REPLY, 15, dpp__cancel_reply__descriptor)                                             \
    X(REGISTER, 20, dpp__register_request__descriptor)                                             \
    X(REGISTER_REPLY, 21, dpp__register_reply__descriptor)                                         \
    X(HEARTBEAT, 22, dpp__heartbeat__descriptor)                                                   \
    X(LEASE, 23, dpp__lease_request__descriptor)                                                   \
    X(LEASE_REPLY, 24, dpp__lease_reply__descriptor)                                               \
    X(SPLIT_DONE, 25, dpp__split_done__descriptor)                                                 \
    X(INDEX_DONE, 26, dpp__index_done__descriptor)                                                 \
    X(ATTACH, 30, dpp__attach_request__descriptor)                                                 \
    X(ATTACH_REPLY, 31, dpp__attach_reply__descriptor)                                             \
    X(SPLIT_CONSUMED, 32, dpp__split_consumed__descriptor)                                         \
    X(SUBSCRIBE, 40, dpp__subscribe__descriptor)                                                   \
    X(CREDIT, 41, dpp__credit__descriptor)                                                         \
    X(BLOCK, 42, dpp__block_header__descriptor)

typedef enum dpp_msg_type {
#define DPP_MSG_ENUM(name, num, desc) DPP_MSG_##name = num,
    DPP_MSG_TYPES(DPP_MSG_ENUM)
#undef DPP_MSG_ENUM
} dpp_msg_type_t;

/* Size limits checked before anything is allocated. */
typedef struct dpp_frame_limits {
    uint32_t max_msg;     /* packed message bytes */
    uint32_t max_payload; /* raw payload bytes */
} dpp_frame_limits_t;

#define DPP_FRAME_DEFAULT_MAX_MSG (16u << 20)
#define DPP_FRAME_DEFAULT_MAX_PAYLOAD (256u << 20)

/* A parsed frame. msg and payload point into the caller's buffer. */
typedef struct dpp_frame {
    uint16_t type;
    const uint8_t *msg;
    uint32_t msg_len;
    const uint8_t *payload;
    uint32_t payload_len;
} dpp_frame_t;

void dpp_frame_limits_default(dpp_frame_limits_t *lim);

/* The protobuf-c descriptor of a message type, or NULL for an unknown type. */
const ProtobufCMessageDescriptor *dpp_msg_descriptor(uint16_t type);

/* Name of a message type for logs ("SUBMIT"), "UNKNOWN" otherwise. */
const char *dpp_msg_name(uint16_t type);

/* Writes the 16-byte header: magic u32, type u16, flags u16 (0), msg_len u32,
 * payload_len u32, little-endian. */
void dpp_frame_header_encode(uint8_t out[DPP_FRAME_HEADER_SIZE], uint16_t type, uint32_t msg_len,
                             uint32_t payload_len);

/* Looks for one whole frame at the start of buf[0..len). Returns:
 *   0  with *f set and *frame_len = bytes the frame occupies;
 *   1  when more bytes are needed (*frame_len = total frame size once the
 *      header is complete, else 0), so the caller can size its buffer;
 *   DPP_EFRAME (bad magic or flags), DPP_EFRAMESIZE (a length over limits;
 *   checked as soon as the header is in, before any allocation) or
 *   DPP_EMSGTYPE (unknown type). */
int dpp_frame_parse(const uint8_t *buf, size_t len, const dpp_frame_limits_t *lim, dpp_frame_t *f,
                    size_t *frame_len);

/* Packs header + message into a new malloc'd buffer of *len bytes; the
 * payload (if any) is sent separately by the caller and only counted in the
 * header. Returns NULL on -ENOMEM. Caller frees. */
uint8_t *dpp_frame_pack(uint16_t type, const ProtobufCMessage *msg, uint32_t payload_len,
                        size_t *len);

/* Unpacks f's message with the descriptor of its type. Returns the message
 * (free with protobuf_c_message_free_unpacked(m, NULL)) or NULL when it does
 * not decode. */
ProtobufCMessage *dpp_frame_unpack(const dpp_frame_t *f);

#endif
