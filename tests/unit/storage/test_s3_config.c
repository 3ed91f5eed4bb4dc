/* SPDX-License-Identifier: Apache-2.0 */
/* The AWS shared files as the AWS tools write them, malformed ones, and the
 * order in which the environment, the credentials file and the config file
 * are consulted; s3:// URLs and bucket names. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpp/error.h"
#include "storage/s3.h"
#include "storage/s3_config.h"

static const char files[] = "# the AWS CLI's format\n"
                            "[default]\n"
                            "aws_access_key_id = AKIDEFAULT\n"
                            "aws_secret_access_key=  s3cr3t/with+signs=  \r\n"
                            "\n"
                            "; another comment\n"
                            "[profile ci]\n"
                            "region = eu-west-3\n"
                            "s3 =\n"
                            "    region = not-this-one\n"
                            "    addressing_style = path\n"
                            "[ ci ]\n"
                            "aws_access_key_id = AKICI\n";

static int get(const char *text, const char *section, const char *key, char *out, size_t cap,
               unsigned *line)
{
    return dpp_s3_ini_get(text, strlen(text), section, key, out, cap, line);
}

static void test_ini(void **state)
{
    (void)state;
    char v[64];
    unsigned line = 0;
    assert_int_equal(get(files, "default", "aws_access_key_id", v, sizeof v, &line), 1);
    assert_string_equal(v, "AKIDEFAULT");
    assert_int_equal(get(files, "default", "aws_secret_access_key", v, sizeof v, &line), 1);
    assert_string_equal(v, "s3cr3t/with+signs=");
    /* The nested block's region is not the profile's. */
    assert_int_equal(get(files, "profile ci", "region", v, sizeof v, &line), 1);
    assert_string_equal(v, "eu-west-3");
    assert_int_equal(get(files, "ci", "aws_access_key_id", v, sizeof v, &line), 1);
    assert_string_equal(v, "AKICI");
    assert_int_equal(get(files, "ci", "region", v, sizeof v, &line), 0);
    assert_int_equal(get(files, "nosuch", "region", v, sizeof v, &line), 0);
    assert_int_equal(get("", "default", "region", v, sizeof v, &line), 0);
    /* A value that does not fit is an error, not a cut value. */
    assert_int_equal(get(files, "default", "aws_access_key_id", v, 5, &line), DPP_EINVAL);
    assert_int_equal(line, 3);

    static const struct {
        const char *text;
        unsigned line;
    } bad[] = {
        {"[default]\naws_access_key_id AKID\n", 2},
        {"[default\n", 1},
        {"[default]\n= value\n", 2},
        {"[default]\nregion = a\nx\n", 3},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        line = 0;
        assert_int_equal(get(bad[i].text, "default", "zzz", v, sizeof v, &line), DPP_EINVAL);
        assert_int_equal(line, bad[i].line);
    }
    static const char nul[] = "[default]\nregion = a\0b\n";
    assert_int_equal(dpp_s3_ini_get(nul, sizeof nul - 1, "default", "region", v, sizeof v, &line),
                     DPP_EINVAL);
    assert_int_equal(line, 2);
}

static char dir[64];

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void clear_env(void)
{
    static const char *const vars[] = {"AWS_ACCESS_KEY_ID",       "AWS_SECRET_ACCESS_KEY",
                                       "AWS_SESSION_TOKEN",       "AWS_REGION",
                                       "AWS_DEFAULT_REGION",      "AWS_ENDPOINT_URL",
                                       "AWS_ENDPOINT_URL_S3",     "AWS_PROFILE",
                                       "DPP_S3_ADDRESSING_STYLE", "DPP_S3_MAX_ATTEMPTS",
                                       "DPP_S3_BACKOFF_BASE_MS",  "DPP_S3_STALL_S",
                                       "AWS_CA_BUNDLE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    char path[128];
    snprintf(path, sizeof path, "%s/credentials", dir);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    snprintf(path, sizeof path, "%s/config", dir);
    setenv("AWS_CONFIG_FILE", path, 1);
}

static void test_config_order(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dpp-s3cfg.XXXXXX");
    assert_non_null(mkdtemp(dir));
    clear_env();
    dpp_s3_config_t c;
    char err[512];

    /* Nothing anywhere: AWS itself, us-east-1, no key (check says where to put one). */
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.endpoint, "https://s3.us-east-1.amazonaws.com");
    assert_int_equal(c.path_style, 0);
    assert_string_equal(c.key_id, "");
    assert_int_equal(c.max_attempts, DPP_S3_DEFAULT_ATTEMPTS);
    assert_int_equal(dpp_s3_config_check(&c, "s3://b/t", err, sizeof err), DPP_EAUTH);
    assert_non_null(strstr(err, "s3://b/t: no S3 credentials: set AWS_ACCESS_KEY_ID"));

    /* The files: the default profile, then a named one with its region. */
    write_file("credentials", files);
    write_file("config", files);
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.key_id, "AKIDEFAULT");
    assert_string_equal(c.secret, "s3cr3t/with+signs=");
    assert_non_null(strstr(c.source, "profile default of /tmp/dpp-s3cfg."));
    assert_string_equal(c.region, "us-east-1");
    setenv("AWS_PROFILE", "ci", 1);
    write_file("credentials", "[ci]\naws_access_key_id = AKICI\naws_secret_access_key = x\n"
                              "aws_session_token = TOKEN\n");
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.key_id, "AKICI");
    assert_string_equal(c.token, "TOKEN");
    assert_string_equal(c.region, "eu-west-3");
    assert_string_equal(c.endpoint, "https://s3.eu-west-3.amazonaws.com");
    /* A profile with a key id but no secret is not half used. */
    write_file("credentials", "[ci]\naws_access_key_id = AKICI\n");
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.key_id, "");

    /* The environment wins over the files, AWS_REGION over the profile's. */
    setenv("AWS_ACCESS_KEY_ID", "AKIENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
    setenv("AWS_REGION", "sa-east-1", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.key_id, "AKIENV");
    assert_string_equal(c.source, "the environment");
    assert_string_equal(c.region, "sa-east-1");
    assert_string_equal(c.endpoint, "http://127.0.0.1:9000");
    assert_int_equal(c.path_style, 1);
    assert_int_equal(dpp_s3_config_check(&c, "s3://b/t", err, sizeof err), 0);
    setenv("AWS_ENDPOINT_URL_S3", "https://s3.example.com:8443", 1);
    setenv("DPP_S3_ADDRESSING_STYLE", "virtual", 1);
    setenv("DPP_S3_MAX_ATTEMPTS", "3", 1);
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.endpoint, "https://s3.example.com:8443");
    assert_int_equal(c.path_style, 0);
    assert_int_equal(c.max_attempts, 3);
    assert_string_equal(c.ca_bundle, "");
    char pem[128];
    snprintf(pem, sizeof pem, "%s/ca.pem", dir);
    write_file("ca.pem", "-----BEGIN CERTIFICATE-----\n");
    setenv("AWS_CA_BUNDLE", pem, 1);
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), 0);
    assert_string_equal(c.ca_bundle, pem);
    unsetenv("AWS_CA_BUNDLE");
    unlink(pem);

    /* Refusals name the variable or the file and line. */
    static const struct {
        const char *var, *value, *says;
    } bad[] = {
        {"DPP_S3_MAX_ATTEMPTS", "0", "DPP_S3_MAX_ATTEMPTS=0: expected a whole number in [1, 100]"},
        {"DPP_S3_STALL_S", "5s", "DPP_S3_STALL_S=5s: expected a whole number"},
        {"DPP_S3_ADDRESSING_STYLE", "vhost", "expected path or virtual"},
        {"AWS_ENDPOINT_URL_S3", "s3.example.com", "expected http://host[:port]"},
        {"AWS_ENDPOINT_URL_S3", "http://h:1/bucket", "expected no path after host[:port]"},
        {"AWS_CA_BUNDLE", "/no/such/ca.pem",
         "AWS_CA_BUNDLE=/no/such/ca.pem: No such file or directory: expected a readable PEM"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *old = getenv(bad[i].var) ? strdup(getenv(bad[i].var)) : NULL;
        setenv(bad[i].var, bad[i].value, 1);
        assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), DPP_EINVAL);
        assert_non_null(strstr(err, bad[i].says));
        if (old)
            setenv(bad[i].var, old, 1);
        else
            unsetenv(bad[i].var);
        free(old);
    }
    unsetenv("AWS_SECRET_ACCESS_KEY");
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), DPP_EINVAL);
    assert_non_null(strstr(err, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"));
    unsetenv("AWS_ACCESS_KEY_ID");
    write_file("credentials", "[ci]\naws_access_key_id AKICI\n");
    assert_int_equal(dpp_s3_config_load(&c, err, sizeof err), DPP_EINVAL);
    assert_non_null(strstr(err, "/credentials line 2: expected [section], key = value"));

    char path[128];
    snprintf(path, sizeof path, "%s/credentials", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config", dir);
    unlink(path);
    rmdir(dir);
    clear_env();
}

static void test_urls(void **state)
{
    (void)state;
    dpp_s3_url_t u;
    char err[256];
    assert_int_equal(dpp_s3_url_parse("s3://my-bucket.1/t/ds=1/a b", &u, err, sizeof err), 0);
    assert_string_equal(u.bucket, "my-bucket.1");
    assert_string_equal(u.key, "t/ds=1/a b");
    assert_int_equal(dpp_s3_url_parse("s3://abc", &u, err, sizeof err), 0);
    assert_string_equal(u.key, "");
    static const char *const bad[] = {"s3://",       "s3://ab/x",    "s3://Upper/x", "s3://-abc/x",
                                      "s3://abc-/x", "s3://a_b_c/x", "http://abc/x", "s3:/abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(dpp_s3_url_parse(bad[i], &u, err, sizeof err), DPP_EINVAL);
    char long_key[1100] = "s3://abc/";
    memset(long_key + 9, 'k', 1025);
    long_key[9 + 1025] = '\0';
    assert_int_equal(dpp_s3_url_parse(long_key, &u, err, sizeof err), DPP_EINVAL);
    assert_non_null(strstr(err, "the key is over 1024 bytes"));
    assert_int_equal(dpp_s3_is_url("s3://x"), 1);
    assert_int_equal(dpp_s3_is_url("/data/s3://x"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ini),
        cmocka_unit_test(test_config_order),
        cmocka_unit_test(test_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
