// SPDX-License-Identifier: Apache-2.0
// Frame header encoding, incremental frame parsing and message packing.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "wire/frame.h"

void dpp_frame_limits_default(dpp_frame_limits_t *lim)
{
    lim->max_msg = DPP_FRAME_DEFAULT_MAX_MSG;
    lim->max_payload = DPP_FRAME_DEFAULT_MAX_PAYLOAD;
}

const ProtobufCMessageDescriptor *dpp_msg_descriptor(uint16_t type)
{
    switch (type) {
#define DPP_MSG_DESC(name, num, desc)                                                              \
    case num:                                                                                      \
        return &desc;
        DPP_MSG_TYPES(DPP_MSG_DESC)
#undef DPP_MSG_DESC
    }
    return NULL;
}

const char *dpp_msg_name(uint16_t type)
{
    switch (type) {
#define DPP_MSG_NAME(name, num, desc)                                                              \
    case num:                                                                                      \
        return #name;
        DPP_MSG_TYPES(DPP_MSG_NAME)
#undef DPP_MSG_NAME
    }
    return "UNKNOWN";
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void dpp_frame_header_encode(uint8_t out[DPP_FRAME_HEADER_SIZE], uint16_t type, uint32_t msg_len,
                             uint32_t payload_len)
{
    put_u32(out, DPP_FRAME_MAGIC);
    out[4] = (uint8_t)type;
    out[5] = (uint8_t)(type >> 8);
    out[6] = 0;
    out[7] = 0;
    put_u32(out + 8, msg_len);
    put_u32(out + 12, payload_len);
}

int dpp_frame_parse(const uint8_t *buf, size_t len, const dpp_frame_limits_t *lim, dpp_frame_t *f,
                    size_t *frame_len)
{
    *frame_len = 0;
    /* Check the magic on a partial header too, so garbage is refused at once
     * instead of after 16 bytes have trickled in. */
    static const uint8_t magic[4] = {'D', 'P', 'P', '1'};
    if (memcmp(buf, magic, len < 4 ? len : 4) != 0)
        return DPP_EFRAME;
    if (len < DPP_FRAME_HEADER_SIZE)
        return 1;
    uint16_t type = (uint16_t)(buf[4] | buf[5] << 8);
    if (buf[6] != 0 || buf[7] != 0)
        return DPP_EFRAME;
    uint32_t msg_len = get_u32(buf + 8);
    uint32_t payload_len = get_u32(buf + 12);
    if (msg_len > lim->max_msg || payload_len > lim->max_payload)
        return DPP_EFRAMESIZE;
    if (dpp_msg_descriptor(type) == NULL)
        return DPP_EMSGTYPE;
    size_t total = (size_t)DPP_FRAME_HEADER_SIZE + msg_len + payload_len;
    *frame_len = total;
    if (len < total)
        return 1;
    f->type = type;
    f->msg = buf + DPP_FRAME_HEADER_SIZE;
    f->msg_len = msg_len;
    f->payload = f->msg + msg_len;
    f->payload_len = payload_len;
    return 0;
}

uint8_t *dpp_frame_pack(uint16_t type, const ProtobufCMessage *msg, uint32_t payload_len,
                        size_t *len)
{
    size_t msg_len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(DPP_FRAME_HEADER_SIZE + msg_len);
    if (buf == NULL)
        return NULL;
    protobuf_c_message_pack(msg, buf + DPP_FRAME_HEADER_SIZE);
    dpp_frame_header_encode(buf, type, (uint32_t)msg_len, payload_len);
    *len = DPP_FRAME_HEADER_SIZE + msg_len;
    return buf;
}

ProtobufCMessage *dpp_frame_unpack(const dpp_frame_t *f)
{
    const ProtobufCMessageDescriptor *d = dpp_msg_descriptor(f->type);
    if (d == NULL)
        return NULL;
    return protobuf_c_message_unpack(d, NULL, f->msg_len, f->msg);
}
