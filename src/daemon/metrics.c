// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition format 0.0.4 writer (see metrics.h). Format rules
// from https://prometheus.io/docs/instrumenting/exposition_formats/ and
// /work/shared/REFERENCE.md.
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dpp/error.h"
#include "daemon/metrics.h"

static const char *const type_names[] = {"counter", "gauge", "histogram"};

void dpp_metrics_init(dpp_metrics_t *m)
{
    memset(m, 0, sizeof *m);
    m->max_bytes = DPP_METRICS_MAX_BYTES;
}

void dpp_metrics_close(dpp_metrics_t *m)
{
    free(m->buf);
    m->buf = NULL;
    m->len = m->cap = 0;
}

void dpp_metrics_reset(dpp_metrics_t *m)
{
    m->len = 0;
    m->error = 0;
    m->has_family = 0;
    m->family[0] = '\0';
}

static int fail(dpp_metrics_t *m, int err)
{
    if (m->error == 0)
        m->error = err;
    return m->error;
}

/* Room for n more bytes plus the terminating NUL. */
static int reserve(dpp_metrics_t *m, size_t n)
{
    if (m->error)
        return m->error;
    if (n > m->max_bytes || m->len > m->max_bytes - n)
        return fail(m, -ENOBUFS);
    size_t need = m->len + n + 1;
    if (need <= m->cap)
        return 0;
    size_t cap = m->cap ? m->cap : 4096;
    while (cap < need)
        cap *= 2;
    char *p = realloc(m->buf, cap);
    if (p == NULL)
        return fail(m, -ENOMEM);
    m->buf = p;
    m->cap = cap;
    return 0;
}

static void put(dpp_metrics_t *m, const char *s, size_t n)
{
    if (reserve(m, n) != 0)
        return;
    memcpy(m->buf + m->len, s, n);
    m->len += n;
    m->buf[m->len] = '\0';
}

static void put_str(dpp_metrics_t *m, const char *s)
{
    put(m, s, strlen(s));
}

/* HELP text escapes backslash and newline; label values also '"'. */
static void put_escaped(dpp_metrics_t *m, const char *s, int quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = *s == '\\'           ? "\\\\"
                          : *s == '\n'         ? "\\n"
                          : quote && *s == '"' ? "\\\""
                                               : NULL;
        if (esc == NULL)
            continue;
        put(m, run, (size_t)(s - run));
        put(m, esc, 2);
        run = s + 1;
    }
    put(m, run, (size_t)(s - run));
}

static int is_name(const char *s, int colon)
{
    if (s == NULL || *s == '\0' || strlen(s) > DPP_METRICS_MAX_NAME)
        return 0;
    for (const char *p = s; *p; p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
                 (colon && *p == ':') || (p > s && *p >= '0' && *p <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

/* Shortest of %.15g..%.17g that strtod maps back to v: 17 significant digits
 * always round-trip, but 0.005 would become 0.0050000000000000001, and le
 * labels are matched as strings, so they must read as other clients write
 * them (Go's strconv 'g', -1). Integral values below 2^63 print as integers.
 * Assumes the C locale's decimal point, as the daemons never call setlocale. */
static void format_double(double v, char *out, size_t len)
{
    if (isnan(v)) {
        snprintf(out, len, "NaN");
    } else if (isinf(v)) {
        snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 9.2e18) {
        snprintf(out, len, "%.0f", v);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, len, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                break;
        }
    }
}

static int check_labels(dpp_metrics_t *m, const dpp_metrics_label_t *labels, size_t n,
                        int histogram)
{
    if (n > 0 && labels == NULL)
        return fail(m, DPP_EINVAL);
    for (size_t i = 0; i < n; i++) {
        if (!is_name(labels[i].name, 0) || strncmp(labels[i].name, "__", 2) == 0 ||
            labels[i].value == NULL || (histogram && strcmp(labels[i].name, "le") == 0))
            return fail(m, DPP_EINVAL);
        for (size_t j = 0; j < i; j++)
            if (strcmp(labels[i].name, labels[j].name) == 0)
                return fail(m, DPP_EINVAL);
    }
    return m->error;
}

/* `name{a="x",le="b"} ` for a sample line; le may be NULL. */
static void put_series(dpp_metrics_t *m, const char *name, const char *suffix,
                       const dpp_metrics_label_t *labels, size_t n, const char *le)
{
    put_str(m, name);
    put_str(m, suffix);
    if (n > 0 || le) {
        put(m, "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                put(m, ",", 1);
            put_str(m, labels[i].name);
            put(m, "=\"", 2);
            put_escaped(m, labels[i].value, 1);
            put(m, "\"", 1);
        }
        if (le) {
            put_str(m, n > 0 ? ",le=\"" : "le=\"");
            put_str(m, le);
            put(m, "\"", 1);
        }
        put(m, "}", 1);
    }
    put(m, " ", 1);
}

/* Whether a `# TYPE name ` line was already written in this render. */
static int declared(const dpp_metrics_t *m, const char *name)
{
    char pat[DPP_METRICS_MAX_NAME + 16];
    int n = snprintf(pat, sizeof pat, "\n# TYPE %s ", name);
    if (m->len == 0)
        return 0;
    if (strncmp(m->buf, pat + 1, (size_t)n - 1) == 0)
        return 1;
    return memmem(m->buf, m->len, pat, (size_t)n) != NULL;
}

int dpp_metrics_family(dpp_metrics_t *m, const char *name, dpp_metric_type_t type, const char *help)
{
    if (m->error)
        return m->error;
    if (!is_name(name, 1) || (unsigned)type > DPP_METRIC_HISTOGRAM || declared(m, name))
        return fail(m, DPP_EINVAL);
    if (help) {
        put_str(m, "# HELP ");
        put_str(m, name);
        put(m, " ", 1);
        put_escaped(m, help, 0);
        put(m, "\n", 1);
    }
    put_str(m, "# TYPE ");
    put_str(m, name);
    put(m, " ", 1);
    put_str(m, type_names[type]);
    put(m, "\n", 1);
    m->has_family = 1;
    m->type = type;
    snprintf(m->family, sizeof m->family, "%s", name);
    return m->error;
}

/* The current family is name and of a type that `histogram` asks for. */
static int check_family(dpp_metrics_t *m, const char *name, int histogram)
{
    if (m->error)
        return m->error;
    if (!m->has_family || name == NULL || strcmp(name, m->family) != 0 ||
        (m->type == DPP_METRIC_HISTOGRAM) != histogram)
        return fail(m, DPP_EINVAL);
    return 0;
}

static int sample_text(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                       size_t nlabels, const char *value)
{
    if (check_family(m, name, 0) != 0 || check_labels(m, labels, nlabels, 0) != 0)
        return m->error;
    put_series(m, name, "", labels, nlabels, NULL);
    put_str(m, value);
    put(m, "\n", 1);
    return m->error;
}

int dpp_metrics_sample(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                       size_t nlabels, double value)
{
    char v[32];
    format_double(value, v, sizeof v);
    return sample_text(m, name, labels, nlabels, v);
}

int dpp_metrics_sample_u64(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                           size_t nlabels, uint64_t value)
{
    char v[32];
    snprintf(v, sizeof v, "%" PRIu64, value);
    return sample_text(m, name, labels, nlabels, v);
}

int dpp_metrics_histogram(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                          size_t nlabels, const double *bounds, const uint64_t *counts,
                          size_t nbuckets, double sum, uint64_t count)
{
    if (check_family(m, name, 1) != 0 || check_labels(m, labels, nlabels, 1) != 0)
        return m->error;
    if (nbuckets > 0 && (bounds == NULL || counts == NULL))
        return fail(m, DPP_EINVAL);
    for (size_t i = 0; i < nbuckets; i++) {
        if (!isfinite(bounds[i]) ||
            (i > 0 && (bounds[i] <= bounds[i - 1] || counts[i] < counts[i - 1])))
            return fail(m, DPP_EINVAL);
    }
    if (nbuckets > 0 && count < counts[nbuckets - 1])
        return fail(m, DPP_EINVAL);
    char le[32], v[32];
    for (size_t i = 0; i < nbuckets; i++) {
        format_double(bounds[i], le, sizeof le);
        put_series(m, name, "_bucket", labels, nlabels, le);
        snprintf(v, sizeof v, "%" PRIu64 "\n", counts[i]);
        put_str(m, v);
    }
    snprintf(v, sizeof v, "%" PRIu64 "\n", count);
    put_series(m, name, "_bucket", labels, nlabels, "+Inf");
    put_str(m, v);
    put_series(m, name, "_sum", labels, nlabels, NULL);
    format_double(sum, le, sizeof le);
    put_str(m, le);
    put(m, "\n", 1);
    put_series(m, name, "_count", labels, nlabels, NULL);
    put_str(m, v);
    return m->error;
}

void dpp_metrics_mark(const dpp_metrics_t *m, dpp_metrics_mark_t *mark)
{
    mark->len = m->len;
    mark->error = m->error;
    mark->has_family = m->has_family;
    mark->type = m->type;
    memcpy(mark->family, m->family, sizeof mark->family);
}

void dpp_metrics_rewind(dpp_metrics_t *m, const dpp_metrics_mark_t *mark)
{
    m->len = mark->len;
    if (m->buf)
        m->buf[m->len] = '\0';
    m->error = mark->error;
    m->has_family = mark->has_family;
    m->type = mark->type;
    memcpy(m->family, mark->family, sizeof m->family);
}

const char *dpp_metrics_text(const dpp_metrics_t *m, size_t *len)
{
    if (m->error) {
        *len = 0;
        return NULL;
    }
    *len = m->len;
    return m->buf ? m->buf : "";
}

int dpp_metrics_error(const dpp_metrics_t *m)
{
    return m->error;
}

int dpp_metrics_counter(dpp_metrics_t *m, const char *name, const char *help, uint64_t v)
{
    dpp_metrics_family(m, name, DPP_METRIC_COUNTER, help);
    return dpp_metrics_sample_u64(m, name, NULL, 0, v);
}

int dpp_metrics_gauge(dpp_metrics_t *m, const char *name, const char *help, double v)
{
    dpp_metrics_family(m, name, DPP_METRIC_GAUGE, help);
    return dpp_metrics_sample(m, name, NULL, 0, v);
}

int dpp_metrics_build_info(dpp_metrics_t *m, const char *role)
{
    dpp_metrics_label_t l[2] = {{"version", DPP_VERSION}, {"role", role}};
    dpp_metrics_family(m, "dpp_build_info", DPP_METRIC_GAUGE, "Build of this daemon (always 1).");
    return dpp_metrics_sample(m, "dpp_build_info", l, 2, 1);
}

/* The first number after `key` in file, or -1. */
static double proc_value(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            v = strtod(line + n, NULL);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

/* When the process started, seconds since 1970: its start in clock ticks
 * after boot (/proc/self/stat, field 22) plus the boot time; -1 unknown. */
static double start_time(void)
{
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    double v = -1;
    if (f && fgets(buf, sizeof buf, f)) {
        const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
        unsigned long long ticks;
        /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
         * cutime cstime priority nice threads itrealvalue starttime */
        if (p && sscanf(p + 2,
                        "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                        "%*d %*d %*d %llu",
                        &ticks) == 1) {
            double btime = proc_value("/proc/stat", "btime ");
            if (btime > 0)
                v = btime + (double)ticks / (double)sysconf(_SC_CLK_TCK);
        }
    }
    if (f)
        fclose(f);
    return v;
}

int dpp_metrics_process(dpp_metrics_t *m)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        dpp_metrics_family(m, "process_cpu_seconds_total", DPP_METRIC_COUNTER,
                           "Total user and system CPU time spent in seconds.");
        dpp_metrics_sample(m, "process_cpu_seconds_total", NULL, 0, cpu);
    }
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, resident;
    if (f && fscanf(f, "%llu %llu", &size, &resident) == 2) {
        double page = (double)sysconf(_SC_PAGESIZE);
        dpp_metrics_gauge(m, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                          (double)size * page);
        dpp_metrics_gauge(m, "process_resident_memory_bytes", "Resident memory size in bytes.",
                          (double)resident * page);
    }
    if (f)
        fclose(f);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            n += e->d_name[0] != '.';
        closedir(d);
        dpp_metrics_gauge(m, "process_open_fds", "Number of open file descriptors.",
                          (double)(n - 1)); /* not the one reading the folder */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        dpp_metrics_gauge(m, "process_max_fds", "Maximum number of open file descriptors.",
                          (double)rl.rlim_cur);
    double start = start_time();
    if (start > 0)
        dpp_metrics_gauge(m, "process_start_time_seconds",
                          "Start time of the process since unix epoch in seconds.", start);
    return dpp_metrics_error(m);
}

int dpp_metrics_rejects(dpp_metrics_t *m, const char *help, const dpp_rejects_t *r)
{
    uint64_t v[DPP_REJECT_NREASONS];
    dpp_rejects_values(r, v);
    dpp_metrics_family(m, "dpp_records_rejected_total", DPP_METRIC_COUNTER, help);
    for (size_t i = 0; i < DPP_REJECT_NREASONS; i++) {
        dpp_metrics_label_t l = {"reason", dpp_reject_names[i]};
        dpp_metrics_sample_u64(m, "dpp_records_rejected_total", &l, 1, v[i]);
    }
    return dpp_metrics_error(m);
}
