// SPDX-License-Identifier: Apache-2.0
// bench_master: how much master work a split costs. Starts a dpp-master
// process on a synthetic table of many small splits, then plays W workers
// and one trainer over real connections, as fast as the master answers:
// each worker asks for a lease, reports the split produced, and the trainer
// acknowledges it (no data moves: the master never reads rows). Prints
// splits per second and the master's CPU time per split, which is what
// decides how many workers and trainers one master can serve.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire/frame.h"
#include "wire/net.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"

#define RECORD_BYTES 100 /* the files are never read: only their sizes count */

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_master: %s: %s\n", what, dpp_strerror(rc));
    exit(1);
}

static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof buf, f) == NULL) {
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    char *p = strrchr(buf, ')'); /* fields after the command name */
    unsigned long utime = 0, stime = 0;
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime);
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static ProtobufCMessage *call(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *m,
                              uint16_t want)
{
    uint16_t got;
    ProtobufCMessage *r;
    int rc = dpp_sync_call(c, type, m, &got, &r, 30000);
    if (rc)
        die(dpp_msg_name(type), rc);
    if (got != want) {
        fprintf(stderr, "bench_master: %s answered %s%s%s\n", dpp_msg_name(type), dpp_msg_name(got),
                got == DPP_MSG_ERROR ? ": " : "",
                got == DPP_MSG_ERROR ? ((Dpp__Error *)r)->message : "");
        exit(1);
    }
    return r;
}

static void send_only(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *m)
{
    int rc = dpp_sync_send(c, type, m, 30000);
    if (rc)
        die(dpp_msg_name(type), rc);
}

static void attach(dpp_sync_conn_t *client, const char *session)
{
    Dpp__AttachRequest a = DPP__ATTACH_REQUEST__INIT;
    a.session_id = (char *)session;
    a.prefetch_splits = 64;
    protobuf_c_message_free_unpacked(call(client, DPP_MSG_ATTACH, &a.base, DPP_MSG_ATTACH_REPLY),
                                     NULL);
}

int main(int argc, char **argv)
{
    const char *master_bin = DPP_BINARY_DIR "/dpp-master";
    unsigned files = 200, records = 1000, split_rows = 10, epochs = 2, nworkers = 16;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--master-bin") == 0 && i + 1 < argc)
            master_bin = argv[++i];
        else if (strcmp(argv[i], "--files") == 0 && i + 1 < argc)
            files = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--split-rows") == 0 && i + 1 < argc)
            split_rows = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--epochs") == 0 && i + 1 < argc)
            epochs = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--workers") == 0 && i + 1 < argc)
            nworkers = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_master [--master-bin PATH] [--files F] [--split-rows S]\n"
                            "                    [--epochs E] [--workers W]\n"
                            "F files (default 200) of 1000 records cut into splits of S records\n"
                            "(default 10: 20,000 splits per epoch), E epochs (default 2), W\n"
                            "simulated workers (default 16), one simulated trainer.\n");
            return 2;
        }
    }
    if (files == 0 || split_rows == 0 || epochs == 0 || nworkers == 0 || nworkers > 1000)
        return 2;
    char tmp[] = "/tmp/dpp-bench-master.XXXXXX";
    if (mkdtemp(tmp) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/root/t/ds=1", tmp);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s/state", path, tmp);
    if (system(cmd) != 0)
        return 1;
    for (unsigned i = 0; i < files; i++) {
        char f[4400];
        snprintf(f, sizeof f, "%s/part-%05u.tfrecord", path, i);
        int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ftruncate(fd, (off_t)records * RECORD_BYTES) != 0) {
            perror(f);
            return 1;
        }
        close(fd);
    }

    char port_file[4400], root[4400], state[4400];
    snprintf(port_file, sizeof port_file, "%s/port", tmp);
    snprintf(root, sizeof root, "%s/root", tmp);
    snprintf(state, sizeof state, "%s/state", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        execl(master_bin, master_bin, "--listen", "127.0.0.1:0", "--port-file", port_file,
              "--data-root", root, "--state-dir", state, "--log-level", "warn",
              "--journal-compact-kb", "1048576", (char *)NULL);
        perror(master_bin);
        _exit(127);
    }
    char addr[64] = "";
    for (int i = 0; i < 200 && addr[0] == '\0'; i++) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fgets(addr, sizeof addr, f) == NULL)
                addr[0] = '\0';
            fclose(f);
        }
        addr[strcspn(addr, "\n")] = '\0';
        if (addr[0] == '\0')
            usleep(20000);
    }
    if (addr[0] == '\0') {
        fprintf(stderr, "bench_master: the master did not start\n");
        kill(pid, SIGKILL);
        return 1;
    }

    /* the session: one block per split, nothing to decode */
    dpp_sync_conn_t ctl, client;
    int rc = dpp_sync_connect(&ctl, addr, "ctl", 10000, NULL);
    if (rc)
        die("connect", rc);
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"table\":\"t\",\"batch_size\":%u,\"epochs\":%u,\"split_rows\":%u,"
             "\"remainder\":\"keep\",\"features\":{\"dense\":[{\"name\":\"x\"}]},"
             "\"label\":{\"name\":\"y\"}}",
             split_rows, epochs, split_rows);
    Dpp__SubmitRequest sub = DPP__SUBMIT_REQUEST__INIT;
    sub.spec_json = spec;
    Dpp__SubmitReply *sr =
        (Dpp__SubmitReply *)call(&ctl, DPP_MSG_SUBMIT, &sub.base, DPP_MSG_SUBMIT_REPLY);
    char session[32];
    snprintf(session, sizeof session, "%s", sr->session_id);
    protobuf_c_message_free_unpacked(&sr->base, NULL);
    dpp_sync_close(&ctl);
    if ((rc = dpp_sync_connect(&client, addr, "client", 10000, NULL)) != 0)
        die("connect", rc);
    attach(&client, session);

    dpp_sync_conn_t *w = calloc(nworkers, sizeof *w);
    for (unsigned k = 0; k < nworkers; k++) {
        if ((rc = dpp_sync_connect(&w[k], addr, "worker", 10000, NULL)) != 0)
            die("connect", rc);
        Dpp__RegisterRequest reg = DPP__REGISTER_REQUEST__INIT;
        reg.data_addr = "127.0.0.1:1";
        reg.threads = 1;
        protobuf_c_message_free_unpacked(
            call(&w[k], DPP_MSG_REGISTER, &reg.base, DPP_MSG_REGISTER_REPLY), NULL);
    }

    uint64_t splits_per_epoch = (uint64_t)files * ((records + split_rows - 1) / split_rows);
    uint64_t total = splits_per_epoch * epochs, done = 0, indexed = 0;
    double cpu0 = cpu_seconds(pid);
    uint64_t t0 = dpp_now_ns(), last_attach = t0;
    uint64_t *bounds = calloc(records / split_rows + 2, sizeof *bounds);
    for (unsigned k = 0; done < total; k = (k + 1) % nworkers) {
        if (dpp_now_ns() - last_attach > 1000000000ull) { /* stay attached */
            attach(&client, session);
            last_attach = dpp_now_ns();
        }
        Dpp__LeaseRequest lr = DPP__LEASE_REQUEST__INIT;
        lr.max_leases = 1;
        Dpp__LeaseReply *rep =
            (Dpp__LeaseReply *)call(&w[k], DPP_MSG_LEASE, &lr.base, DPP_MSG_LEASE_REPLY);
        for (size_t i = 0; i < rep->n_leases; i++) {
            const Dpp__Lease *l = rep->leases[i];
            if (l->kind == DPP__LEASE__KIND__INDEX) {
                size_t n = 0;
                for (uint64_t r = 0; r < records; r += split_rows)
                    bounds[n++] = r * RECORD_BYTES;
                bounds[n++] = (uint64_t)records * RECORD_BYTES;
                Dpp__IndexDone d = DPP__INDEX_DONE__INIT;
                d.lease_id = l->lease_id;
                d.session_id = l->session_id;
                d.file = l->split_id;
                d.records = records;
                d.boundaries = bounds;
                d.n_boundaries = n;
                send_only(&w[k], DPP_MSG_INDEX_DONE, &d.base);
                indexed++;
                continue;
            }
            Dpp__SplitDone d = DPP__SPLIT_DONE__INIT;
            d.lease_id = l->lease_id;
            d.session_id = l->session_id;
            d.split_id = l->split_id;
            d.blocks = 2;
            d.rows = l->record_take;
            send_only(&w[k], DPP_MSG_SPLIT_DONE, &d.base);
            Dpp__SplitConsumed c = DPP__SPLIT_CONSUMED__INIT;
            c.session_id = session;
            c.epoch = l->epoch;
            c.split_id = l->split_id;
            send_only(&client, DPP_MSG_SPLIT_CONSUMED, &c.base);
            done++;
        }
        protobuf_c_message_free_unpacked(&rep->base, NULL);
    }
    double secs = (double)(dpp_now_ns() - t0) / 1e9;
    double cpu = cpu_seconds(pid) - cpu0;
    printf("bench_master: %" PRIu64 " splits (%" PRIu64 " per epoch x %u), %" PRIu64
           " index tasks, %u workers, 1 trainer\n",
           total, splits_per_epoch, epochs, indexed, nworkers);
    printf("%.0f splits/s through lease, done and consumed; master CPU %.3f s = %.1f us per "
           "split (journal fsync included)\n",
           (double)total / secs, cpu, cpu * 1e6 / (double)total);
    for (unsigned k = 0; k < nworkers; k++)
        dpp_sync_close(&w[k]);
    dpp_sync_close(&client);
    kill(pid, SIGINT);
    waitpid(pid, NULL, 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_master: could not remove %s\n", tmp);
    free(bounds);
    free(w);
    return 0;
}
