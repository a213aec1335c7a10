/* SPDX-License-Identifier: Apache-2.0 */
/* env_list.c: the environment variables libcoll reads, for --env.
 *
 * This table mirrors COLL_ENV_MAP in src/core/env.h, which coll-perf cannot
 * include (it uses the public API only); tests/tools checks that the two
 * lists hold the same names. */
#include <stdio.h>
#include <stdlib.h>

#include "perf.h"

static const struct {
  const char *name, *meaning;
  int secret; /* --env says whether it is set, never its value */
} perf_env_vars[] = {
    {"RANK", "this process's rank, 0..WORLD_SIZE-1 (env:// init)", 0},
    {"WORLD_SIZE", "number of ranks in the job (env:// init)", 0},
    {"LOCAL_RANK", "rank within this host; picks the CUDA device", 0},
    {"MASTER_ADDR", "host of rank 0's rendezvous store", 0},
    {"MASTER_PORT", "port of rank 0's rendezvous store", 0},
    {"COLL_DEBUG", "log level: NONE, WARN (default), INFO, TRACE", 0},
    {"COLL_SOCKET_IFNAME",
     "interface to listen on; default: the one that reaches MASTER_ADDR", 0},
    {"COLL_TIMEOUT_MS",
     "default bound on every wait of a comm, ms (default 300000)", 0},
    {"COLL_AUTH_TOKEN",
     "shared secret checked by the store and transport handshakes", 1},
    {"COLL_NCCL_LIBRARY",
     "path or name of libnccl to load (default libnccl.so.2)", 0},
    {"COLL_ALGO",
     "allreduce algorithm: auto (default), ring, rd (recursive doubling)", 0},
    {"COLL_RING_THRESHOLD",
     "bytes from which auto picks the ring over recursive doubling", 0},
    {"COLL_SEGMENT_BYTES",
     "pipeline segment of the CPU ring, bytes (default 1 MiB)", 0},
    {"COLL_CHECK_MISMATCH",
     "1 (default): ranks verify they agree on count/dtype/op; 0: skip", 0},
    {"COLL_SIMD", "reduction kernels: auto (default), scalar, avx2, avx512", 0},
    {"COLL_BACKEND",
     "coll_comm_init_env backend: auto (default: NCCL if usable), cpu, nccl",
     0},
};

void perf_print_env(void) {
  size_t i;
  printf("# environment variables libcoll reads (value here, meaning)\n");
  for (i = 0; i < sizeof perf_env_vars / sizeof perf_env_vars[0]; i++) {
    const char *v = getenv(perf_env_vars[i].name);
    if (v != NULL && perf_env_vars[i].secret) v = "(set)";
    printf("%-20s %-16s %s\n", perf_env_vars[i].name, v != NULL ? v : "(unset)",
           perf_env_vars[i].meaning);
  }
}
