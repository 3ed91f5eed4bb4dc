/* SPDX-License-Identifier: Apache-2.0 */
/* The master's HTTP endpoints (--http): /metrics, /healthz, /readyz. */
#ifndef DPP_MASTER_METRICS_H
#define DPP_MASTER_METRICS_H

#include "master.h"

/* Serves them on addr (HOST:PORT). Returns 0 or a negative error (logged). */
int dpp_master_http_start(dpp_master_t *m, const char *addr);

/* Stops serving (on the loop thread). Accepts a master without --http. */
void dpp_master_http_stop(dpp_master_t *m);

#endif
