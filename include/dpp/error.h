/* SPDX-License-Identifier: Apache-2.0 */
/* dpp error numbers, shared by the daemons, the wire protocol, dppctl and the
 * client library. Functions return 0 on success and a negative number on
 * failure: -errno for system errors, one of DPP_E* below for dpp's own. The
 * same numbers travel in Error messages and map to dppctl exit codes. */
#ifndef DPP_ERROR_H
#define DPP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message). Numbers are part of the wire protocol: never
 * renumber, only append. */
#define DPP_ERRORS(X)                                                                              \
    X(DPP_ESPEC, -1001, "invalid session spec")                                                    \
    X(DPP_EFRAME, -1002, "malformed frame")                                                        \
    X(DPP_EFRAMESIZE, -1003, "frame exceeds the size limit")                                       \
    X(DPP_EMSGTYPE, -1004, "unknown or unexpected message type")                                   \
    X(DPP_EMSG, -1005, "message does not decode")                                                  \
    X(DPP_EVERSION, -1006, "protocol version mismatch")                                            \
    X(DPP_ENOSESSION, -1007, "no such session")                                                    \
    X(DPP_ECORRUPT, -1008, "corrupted record")                                                     \
    X(DPP_ETRUNCATED, -1009, "truncated record")                                                   \
    X(DPP_EEXAMPLE, -1010, "unparsable tf.Example")                                                \
    X(DPP_EMISSING, -1011, "missing feature")                                                      \
    X(DPP_ETYPE, -1012, "feature has the wrong type or length")                                    \
    X(DPP_ETOOBIG, -1013, "record exceeds the size limit")                                         \
    X(DPP_EPATH, -1014, "path outside the data roots")                                             \
    X(DPP_ETIMEDOUT, -1015, "timed out")                                                           \
    X(DPP_ECLOSED, -1016, "connection closed")                                                     \
    X(DPP_EBLOCK, -1017, "malformed block")                                                        \
    X(DPP_ENOFEATURE, -1018, "no such feature in the batch")                                       \
    X(DPP_EFAILED, -1019, "session failed")                                                        \
    X(DPP_ERANK, -1020, "rank out of range")                                                       \
    X(DPP_EINVAL, -1021, "invalid argument")                                                       \
    X(DPP_ETOKEN, -1022, "checkpoint token does not fit the session")                              \
    X(DPP_EAUTH, -1023, "authentication failed")                                                   \
    X(DPP_EINDEX, -1024, "a file's records disagree with its index")                              \
    X(DPP_EHELD, -1025, "the rank is read by another client")                                     \
    X(DPP_ERESOLVE, -1026, "the host name does not resolve")                                       \
    X(DPP_ESTORAGE, -1027, "the object store refused the request")                                 \
    X(DPP_ECHANGED, -1028, "the object changed since the session was planned")

enum dpp_error {
#define DPP_ERROR_ENUM(name, num, msg) name = num,
    DPP_ERRORS(DPP_ERROR_ENUM)
#undef DPP_ERROR_ENUM
};

/* Human-readable text for err (a DPP_E* code or -errno). Never NULL; the
 * string is static. */
const char *dpp_strerror(int err);

/* Symbolic name of err ("DPP_ESPEC", "ENOENT", ...). Never NULL; static. */
const char *dpp_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
