/* SPDX-License-Identifier: Apache-2.0 */
/* Where an S3-compatible store is and who signs for it, taken as the AWS
 * tools take them: the environment first, then the shared credentials and
 * config files of a profile. The secret never leaves this struct: no log
 * line, message, journal record or status carries it. */
#ifndef DPP_STORAGE_S3_CONFIG_H
#define DPP_STORAGE_S3_CONFIG_H

#include <stddef.h>

typedef struct dpp_s3_config {
    /* scheme://host[:port] without a trailing '/': AWS_ENDPOINT_URL_S3 or
     * AWS_ENDPOINT_URL; https://s3.<region>.amazonaws.com when neither. */
    char endpoint[256];
    char region[64]; /* AWS_REGION, AWS_DEFAULT_REGION, the profile's region; us-east-1 */
    char key_id[128];
    char secret[128];
    char token[4096]; /* AWS_SESSION_TOKEN or aws_session_token; "" for none */
    /* 1: endpoint/bucket/key; 0: bucket.host/key. DPP_S3_ADDRESSING_STYLE=
     * path|virtual; path by default with an endpoint URL (S3-compatible
     * stores), virtual for AWS itself. */
    int path_style;
    /* AWS_CA_BUNDLE: a PEM file of the CAs that https endpoints are checked
     * against instead of the system's ("" for the system's). */
    char ca_bundle[512];
    /* Where the key came from, for messages: "the environment" or
     * "profile default of /root/.aws/credentials"; "" when none was found. */
    char source[640];
    unsigned max_attempts;    /* tries of one request, the first included (DPP_S3_MAX_ATTEMPTS) */
    unsigned backoff_base_ms; /* the first retry waits up to this, each next up to twice as long */
    unsigned backoff_max_ms;  /* ... but never more than this */
    unsigned stall_s;         /* a transfer that moves no byte for this long is retried */
} dpp_s3_config_t;

#define DPP_S3_DEFAULT_ATTEMPTS 8u
#define DPP_S3_DEFAULT_BACKOFF_BASE_MS 50u
#define DPP_S3_DEFAULT_BACKOFF_MAX_MS 5000u
#define DPP_S3_DEFAULT_STALL_S 30u

/* Fills c from the environment and the profile (AWS_PROFILE, else
 * "default") of AWS_SHARED_CREDENTIALS_FILE (else ~/.aws/credentials) and
 * AWS_CONFIG_FILE (else ~/.aws/config; its region). Missing files are not
 * errors; no key found leaves key_id "" (dpp_s3_config_check says so when a
 * table needs one). Returns 0, or DPP_EINVAL with err naming the variable or
 * the file and line that is malformed. */
int dpp_s3_config_load(dpp_s3_config_t *c, char *err, size_t errlen);

/* 0 when c can sign requests; DPP_EAUTH with err saying where keys are
 * looked for, for `what` (an s3:// URL), when it cannot. */
int dpp_s3_config_check(const dpp_s3_config_t *c, const char *what, char *err, size_t errlen);

/* Looks `key` up in section `section` of an INI text[0..len) as the AWS
 * files write them ("[default]", "[profile x]", "key = value", '#' and ';'
 * comments, indented lines continue a nested block and are skipped). The
 * value is trimmed and written to out (cap bytes with the NUL). Returns 1
 * when found, 0 when not; DPP_EINVAL with *line (1-based) for a line that
 * is neither a section, a comment nor key = value, or a value that does not
 * fit out. */
int dpp_s3_ini_get(const char *text, size_t len, const char *section, const char *key, char *out,
                   size_t cap, unsigned *line);

#endif
