/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_dryrun.c: what `tests/gpu/run.sh --dry-run` runs in place of
 * review_gpu on a machine without a GPU: the NCCL stand-in with one device,
 * under the environment each step gives its ranks. It checks what the steps
 * rely on before any GPU is involved: each rank of a two-rank step sees
 * LOCAL_WORLD_SIZE=1, LOCAL_RANK=0 and a host id of its own, and
 * COLL_BACKEND=nccl selects NCCL there (the GPU check's two ranks share one
 * GPU, which only NCCL itself may refuse); NCCL_COMM_BLOCKING=1 is refused
 * at once. Prints "PASS|FAIL name: detail" lines like review_gpu.
 *
 *   gpu_dryrun STEP       (a rank2-* step, or init-blocking) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "nccl/nccl_env.h"
#include "standin.h"

static int failures;

static void check(int ok, const char *name, int rank, const char *detail) {
  if (rank >= 0)
    printf("%s dry-%s (rank %d): %s\n", ok ? "PASS" : "FAIL", name, rank,
           detail);
  else
    printf("%s dry-%s: %s\n", ok ? "PASS" : "FAIL", name, detail);
  fflush(stdout);
  failures += !ok;
}

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v != NULL ? v : dflt;
}

/* A rank of a two-rank step under coll-run. */
static void rank_env(const char *step) {
  char want_host[32], detail[512];
  int rank = atoi(env_or("RANK", "-1")), selected;
  const char *lws = env_or("LOCAL_WORLD_SIZE", "(unset)");
  const char *lr = env_or("LOCAL_RANK", "(unset)");
  const char *host = env_or("NCCL_HOSTID", "(unset)");
  const char *backend = env_or("COLL_BACKEND", "(unset)");
  snprintf(want_host, sizeof want_host, "h%d", rank);
  selected = coll__nccl_env_selected();
  snprintf(detail, sizeof detail,
           "LOCAL_WORLD_SIZE=%s LOCAL_RANK=%s NCCL_HOSTID=%s COLL_BACKEND=%s: "
           "%s",
           lws, lr, host, backend,
           selected == COLL_NCCL_PICK_NCCL
               ? "NCCL selected on a stand-in with one device"
               : coll_last_error());
  check(strcmp(lws, "1") == 0 && strcmp(lr, "0") == 0 &&
            strcmp(host, want_host) == 0 && strcmp(backend, "nccl") == 0 &&
            selected == COLL_NCCL_PICK_NCCL,
        step, rank, detail);
}

static void init_blocking(void) {
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_unique_id_t id;
  coll_comm_t *c = NULL;
  coll_status_t s;
  struct timespec t0, t1;
  double ms;
  char detail[600];
  setenv("NCCL_COMM_BLOCKING", "1", 1);
  cfg.timeout_ms = 2000;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  s = coll_unique_id_create(&id);
  if (s == COLL_OK) s = coll_comm_init_rank(0, 2, &id, &cfg, &c);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
       (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  snprintf(detail, sizeof detail, "%s after %.1f ms: %s", coll_status_name(s),
           ms, coll_last_error());
  check(s == COLL_ERR_INVALID_ARG && ms < 1000.0, "init-blocking", -1, detail);
  coll_comm_destroy(c);
}

int main(int argc, char **argv) {
  standin_config_t cfg;
  if (argc != 2) {
    fprintf(stderr, "usage: gpu_dryrun STEP\n");
    return 2;
  }
  memset(&cfg, 0, sizeof cfg);
  cfg.ndev = 1;
  standin_install(&cfg);
  if (strcmp(argv[1], "init-blocking") == 0)
    init_blocking();
  else if (strncmp(argv[1], "rank2-", 6) == 0)
    rank_env(argv[1]);
  else
    check(0, argv[1], -1, "not a step of the dry run");
  standin_uninstall();
  return failures ? 1 : 0;
}
