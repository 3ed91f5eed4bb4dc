/* SPDX-License-Identifier: Apache-2.0 */
#include "storage/s3_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errtext.h"
#include "base/parse.h"
#include "dpp/error.h"

/* The AWS files are a few lines; a bigger one is not one of them. */
#define INI_MAX_BYTES (1u << 20)

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static void trim(const char **s, const char **e)
{
    while (*s < *e && is_blank(**s))
        (*s)++;
    while (*e > *s && is_blank((*e)[-1]))
        (*e)--;
}

static int equals(const char *s, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(e - s) == n && memcmp(s, word, n) == 0;
}

int dpp_s3_ini_get(const char *text, size_t len, const char *section, const char *key, char *out,
                   size_t cap, unsigned *line)
{
    const char *p = text, *end = text + len;
    int in_section = 0;
    unsigned n = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *s = p, *e = eol ? eol : end;
        p = eol ? eol + 1 : end;
        n++;
        if (memchr(s, '\0', (size_t)(e - s)) != NULL)
            goto bad;
        int indented = s < e && is_blank(*s);
        trim(&s, &e);
        if (s == e || *s == '#' || *s == ';')
            continue;
        if (indented)
            continue; /* a nested block's line ("s3 =" then "  addressing_style = ...") */
        if (*s == '[') {
            if (e[-1] != ']')
                goto bad;
            const char *ns = s + 1, *ne = e - 1;
            trim(&ns, &ne);
            in_section = equals(ns, ne, section);
            continue;
        }
        const char *eq = memchr(s, '=', (size_t)(e - s));
        if (eq == NULL)
            goto bad;
        const char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;
        trim(&ks, &ke);
        trim(&vs, &ve);
        if (ks == ke)
            goto bad;
        if (!in_section || !equals(ks, ke, key))
            continue;
        if ((size_t)(ve - vs) >= cap)
            goto bad;
        memcpy(out, vs, (size_t)(ve - vs));
        out[ve - vs] = '\0';
        return 1;
    }
    return 0;
bad:
    *line = n;
    return DPP_EINVAL;
}

/* The file's text (malloc'd, NUL-terminated) or NULL with *rc: 0 when it
 * does not exist, else the error. */
static char *read_small(const char *path, size_t *len, int *rc)
{
    *rc = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT && errno != ENOTDIR)
            *rc = -errno;
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > INI_MAX_BYTES) {
        *rc = DPP_EINVAL;
        goto out;
    }
    if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
        *rc = -ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    *len = got;
out:
    close(fd);
    if (*rc != 0) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

/* The file named by env_name, else ~/.aws/<name>, into path. */
static void aws_file(char *path, size_t cap, const char *env_name, const char *name)
{
    const char *p = getenv(env_name);
    const char *home = getenv("HOME");
    if (p != NULL && *p != '\0')
        snprintf(path, cap, "%s", p);
    else
        snprintf(path, cap, "%s/.aws/%s", home != NULL && *home != '\0' ? home : "/", name);
}

/* Sets out from the environment's first set variable of names; 1 when one
 * was, 0 when none; DPP_EINVAL when it does not fit. */
static int from_env(char *out, size_t cap, const char *const *names, char *err, size_t errlen)
{
    for (; *names != NULL; names++) {
        const char *v = getenv(*names);
        if (v == NULL || *v == '\0')
            continue;
        if (strlen(v) >= cap)
            return dpp_errf(DPP_EINVAL, err, errlen, "%s: longer than %zu bytes", *names, cap - 1);
        memcpy(out, v, strlen(v) + 1);
        return 1;
    }
    return 0;
}

static int ini_lookup(const char *path, const char *text, size_t len, const char *section,
                      const char *key, char *out, size_t cap, char *err, size_t errlen)
{
    unsigned line = 0;
    int rc = dpp_s3_ini_get(text, len, section, key, out, cap, &line);
    if (rc < 0)
        return dpp_errf(rc, err, errlen,
                        "%s line %u: expected [section], key = value or a comment (values up "
                        "to %zu bytes)",
                        path, line, cap - 1);
    return rc;
}

static int load_profile(dpp_s3_config_t *c, const char *profile, int need_keys, char *err,
                        size_t errlen)
{
    char path[512];
    size_t len = 0;
    int rc;
    char *text;
    if (need_keys) {
        aws_file(path, sizeof path, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
        if ((text = read_small(path, &len, &rc)) == NULL && rc != 0)
            return dpp_errf(rc, err, errlen, "%s: cannot be read (%s)", path, dpp_strerror(rc));
        if (text != NULL) {
            rc = ini_lookup(path, text, len, profile, "aws_access_key_id", c->key_id,
                            sizeof c->key_id, err, errlen);
            if (rc == 1)
                rc = ini_lookup(path, text, len, profile, "aws_secret_access_key", c->secret,
                                sizeof c->secret, err, errlen);
            if (rc == 1) {
                int t = ini_lookup(path, text, len, profile, "aws_session_token", c->token,
                                   sizeof c->token, err, errlen);
                rc = t < 0 ? t : 1;
            }
            free(text);
            if (rc < 0)
                return rc;
            if (rc == 1)
                snprintf(c->source, sizeof c->source, "profile %s of %s", profile, path);
            else
                c->key_id[0] = c->secret[0] = c->token[0] = '\0';
        }
    }
    if (c->region[0] == '\0') {
        aws_file(path, sizeof path, "AWS_CONFIG_FILE", "config");
        if ((text = read_small(path, &len, &rc)) == NULL && rc != 0)
            return dpp_errf(rc, err, errlen, "%s: cannot be read (%s)", path, dpp_strerror(rc));
        if (text != NULL) {
            char section[128];
            if (strcmp(profile, "default") == 0)
                snprintf(section, sizeof section, "default");
            else
                snprintf(section, sizeof section, "profile %s", profile);
            rc = ini_lookup(path, text, len, section, "region", c->region, sizeof c->region, err,
                            errlen);
            free(text);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int load_tuning(const char *name, unsigned lo, unsigned hi, unsigned *out, char *err,
                       size_t errlen)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return 0;
    unsigned long long x;
    if (dpp_parse_uint(v, hi, &x) != 0 || x < lo)
        return dpp_errf(DPP_EINVAL, err, errlen, "%s=%s: expected a whole number in [%u, %u]", name,
                        v, lo, hi);
    *out = (unsigned)x;
    return 0;
}

int dpp_s3_config_load(dpp_s3_config_t *c, char *err, size_t errlen)
{
    static const char *const key_vars[] = {"AWS_ACCESS_KEY_ID", NULL};
    static const char *const secret_vars[] = {"AWS_SECRET_ACCESS_KEY", NULL};
    static const char *const token_vars[] = {"AWS_SESSION_TOKEN", NULL};
    static const char *const region_vars[] = {"AWS_REGION", "AWS_DEFAULT_REGION", NULL};
    static const char *const endpoint_vars[] = {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", NULL};
    memset(c, 0, sizeof *c);
    c->max_attempts = DPP_S3_DEFAULT_ATTEMPTS;
    c->backoff_base_ms = DPP_S3_DEFAULT_BACKOFF_BASE_MS;
    c->backoff_max_ms = DPP_S3_DEFAULT_BACKOFF_MAX_MS;
    c->stall_s = DPP_S3_DEFAULT_STALL_S;
    int rc, has_key, has_secret;
    if ((rc = from_env(c->region, sizeof c->region, region_vars, err, errlen)) < 0 ||
        (rc = from_env(c->endpoint, sizeof c->endpoint, endpoint_vars, err, errlen)) < 0 ||
        (has_key = from_env(c->key_id, sizeof c->key_id, key_vars, err, errlen)) < 0 ||
        (has_secret = from_env(c->secret, sizeof c->secret, secret_vars, err, errlen)) < 0 ||
        (rc = from_env(c->token, sizeof c->token, token_vars, err, errlen)) < 0)
        goto fail;
    if (has_key != has_secret) {
        rc = dpp_errf(DPP_EINVAL, err, errlen, "%s is set but %s is not: set both, or neither",
                      has_key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                      has_key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        goto fail;
    }
    if (has_key)
        snprintf(c->source, sizeof c->source, "the environment");
    const char *profile = getenv("AWS_PROFILE");
    if (profile == NULL || *profile == '\0')
        profile = "default";
    if (strlen(profile) > 100) {
        rc = dpp_errf(DPP_EINVAL, err, errlen, "AWS_PROFILE: longer than 100 bytes");
        goto fail;
    }
    if ((rc = load_profile(c, profile, !has_key, err, errlen)) != 0)
        goto fail;
    if (c->region[0] == '\0')
        snprintf(c->region, sizeof c->region, "us-east-1");

    size_t elen = strlen(c->endpoint);
    while (elen > 0 && c->endpoint[elen - 1] == '/')
        c->endpoint[--elen] = '\0';
    int custom = elen > 0;
    if (custom && strncmp(c->endpoint, "http://", 7) != 0 &&
        strncmp(c->endpoint, "https://", 8) != 0) {
        rc = dpp_errf(DPP_EINVAL, err, errlen,
                      "AWS_ENDPOINT_URL=%s: expected http://host[:port] or https://host[:port]",
                      c->endpoint);
        goto fail;
    }
    if (custom && strchr(strstr(c->endpoint, "//") + 2, '/') != NULL) {
        rc = dpp_errf(DPP_EINVAL, err, errlen,
                      "AWS_ENDPOINT_URL=%s: expected no path after host[:port]", c->endpoint);
        goto fail;
    }
    if (!custom)
        snprintf(c->endpoint, sizeof c->endpoint, "https://s3.%s.amazonaws.com", c->region);
    c->path_style = custom;
    const char *style = getenv("DPP_S3_ADDRESSING_STYLE");
    if (style != NULL && *style != '\0') {
        if (strcmp(style, "path") == 0)
            c->path_style = 1;
        else if (strcmp(style, "virtual") == 0)
            c->path_style = 0;
        else {
            rc = dpp_errf(DPP_EINVAL, err, errlen,
                          "DPP_S3_ADDRESSING_STYLE=%s: expected path or virtual", style);
            goto fail;
        }
    }
    const char *ca = getenv("AWS_CA_BUNDLE");
    if (ca != NULL && *ca != '\0') {
        if (strlen(ca) >= sizeof c->ca_bundle) {
            rc = dpp_errf(DPP_EINVAL, err, errlen, "AWS_CA_BUNDLE: longer than %zu bytes",
                          sizeof c->ca_bundle - 1);
            goto fail;
        }
        if (access(ca, R_OK) != 0) {
            rc = dpp_errf(DPP_EINVAL, err, errlen,
                          "AWS_CA_BUNDLE=%s: %s: expected a readable PEM file of CA certificates",
                          ca, strerror(errno));
            goto fail;
        }
        snprintf(c->ca_bundle, sizeof c->ca_bundle, "%s", ca);
    }
    if ((rc = load_tuning("DPP_S3_MAX_ATTEMPTS", 1, 100, &c->max_attempts, err, errlen)) != 0 ||
        (rc = load_tuning("DPP_S3_BACKOFF_BASE_MS", 1, 60000, &c->backoff_base_ms, err, errlen)) !=
            0 ||
        (rc = load_tuning("DPP_S3_STALL_S", 1, 3600, &c->stall_s, err, errlen)) != 0)
        goto fail;
    if (c->backoff_max_ms < c->backoff_base_ms)
        c->backoff_max_ms = c->backoff_base_ms;
    return 0;
fail:
    memset(c->secret, 0, sizeof c->secret);
    memset(c->token, 0, sizeof c->token);
    return rc;
}

int dpp_s3_config_check(const dpp_s3_config_t *c, const char *what, char *err, size_t errlen)
{
    if (c->key_id[0] != '\0' && c->secret[0] != '\0')
        return 0;
    return dpp_errf(
        DPP_EAUTH, err, errlen,
        "%s: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in "
        "the daemon's environment, or aws_access_key_id and aws_secret_access_key "
        "in profile %s of ~/.aws/credentials (AWS_PROFILE, "
        "AWS_SHARED_CREDENTIALS_FILE)",
        what, getenv("AWS_PROFILE") && *getenv("AWS_PROFILE") ? getenv("AWS_PROFILE") : "default");
}
