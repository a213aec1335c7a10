/* SPDX-License-Identifier: Apache-2.0 */
/* env.h: every environment variable libcoll reads, declared in one list. */
#ifndef COLL_CORE_ENV_H
#define COLL_CORE_ENV_H

#include <stdint.h>

#include "coll.h"

/* A comm's bound on every wait when neither its config nor COLL_TIMEOUT_MS
 * gives one: five minutes. Named here only. */
#define COLL_DEFAULT_TIMEOUT_MS 300000
/* A TCP peer silent this long while a call waits on it is unresponsive. */
#define COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS 10000
#define COLL_ENV_STR_(x) #x
#define COLL_ENV_XSTR_(x) COLL_ENV_STR_(x)

/* X(id, name, meaning). docs/environment.md mirrors this list; the
 * `coll-perf --env` option prints it. */
#define COLL_ENV_MAP(X)                                                         \
  X(RANK, "RANK", "this process's rank, 0..WORLD_SIZE-1 (env:// init)")         \
  X(WORLD_SIZE, "WORLD_SIZE", "number of ranks in the job (env:// init)")       \
  X(LOCAL_RANK, "LOCAL_RANK", "rank within this host; picks the CUDA device")   \
  X(LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE",                                       \
    "ranks on this host; above its CUDA device count, auto picks CPU")          \
  X(OMPI_RANK, "OMPI_COMM_WORLD_RANK",                                          \
    "rank under Open MPI's mpirun, when RANK is unset")                         \
  X(OMPI_SIZE, "OMPI_COMM_WORLD_SIZE",                                          \
    "world size under Open MPI's mpirun, when WORLD_SIZE is unset")             \
  X(OMPI_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK",                              \
    "rank within this host under mpirun, when LOCAL_RANK is unset")             \
  X(OMPI_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE",                              \
    "ranks on this host under mpirun, when LOCAL_WORLD_SIZE is unset")          \
  X(PMI_RANK, "PMI_RANK", "rank under a PMI launcher (MPICH, Intel MPI)")       \
  X(PMI_SIZE, "PMI_SIZE", "world size under a PMI launcher")                    \
  X(SLURM_PROCID, "SLURM_PROCID", "rank under Slurm's srun")                    \
  X(SLURM_NTASKS, "SLURM_NTASKS", "world size under Slurm's srun")              \
  X(SLURM_LOCALID, "SLURM_LOCALID", "rank within this node under srun")         \
  X(SLURM_NODEID, "SLURM_NODEID",                                               \
    "this node's index in the step, for SLURM_STEP_TASKS_PER_NODE")             \
  X(SLURM_STEP_TASKS_PER_NODE, "SLURM_STEP_TASKS_PER_NODE",                     \
    "tasks per node of the srun step (\"2(x3),1\"): local world size")          \
  X(MASTER_ADDR, "MASTER_ADDR", "host of rank 0's rendezvous store")            \
  X(MASTER_PORT, "MASTER_PORT", "port of rank 0's rendezvous store")            \
  X(DEBUG, "COLL_DEBUG", "log level: NONE, WARN (default), INFO, TRACE")        \
  X(SOCKET_IFNAME, "COLL_SOCKET_IFNAME",                                        \
    "interface to listen on; default: the one that reaches MASTER_ADDR")        \
  X(TIMEOUT_MS, "COLL_TIMEOUT_MS",                                              \
    "default bound on every wait of a comm, ms (default " COLL_ENV_XSTR_(       \
        COLL_DEFAULT_TIMEOUT_MS) ")")                                           \
  X(AUTH_TOKEN, "COLL_AUTH_TOKEN",                                              \
    "shared secret checked by the store and transport handshakes")              \
  X(NCCL_LIBRARY, "COLL_NCCL_LIBRARY",                                          \
    "path or name of libnccl to load (default libnccl.so.2)")                   \
  X(NCCL_SHRINKABLE, "COLL_NCCL_SHRINKABLE",                                    \
    "1: a failed or aborted NCCL comm keeps NCCL's comm for a shrink "          \
    "(NCCL 2.27 only; 2.28+ always can)")                                       \
  X(NCCL_COMM_BLOCKING, "NCCL_COMM_BLOCKING",                                   \
    "NCCL's own: 1 would make NCCL comms blocking, so libcoll refuses to "      \
    "make NCCL comms while it is 1")                                            \
  X(ALGO, "COLL_ALGO",                                                          \
    "allreduce algorithm: auto (default), ring, rd (recursive doubling), "      \
    "rh (recursive halving, then doubling), twolevel (within hosts, then "      \
    "across), shm (through shared memory, where the transport has it)")         \
  X(RING_THRESHOLD, "COLL_RING_THRESHOLD",                                      \
    "bytes from which auto picks the ring (or two-level) over recursive "       \
    "doubling")                                                                 \
  X(LINK_PROBE, "COLL_LINK_PROBE",                                              \
    "ring threshold from the links measured at comm creation: auto (default: "  \
    "on comms that span hosts), 1 (always), 0 (never)")                         \
  X(SEGMENT_BYTES, "COLL_SEGMENT_BYTES",                                        \
    "pipeline segment of the CPU ring, bytes, at every size (default: 256 "     \
    "KiB; over TCP within a host an eighth of a ring block up to 1 MiB; 1 "     \
    "MiB where a host's ranks outnumber its cores)")                            \
  X(CHECK_MISMATCH, "COLL_CHECK_MISMATCH",                                      \
    "1 (default): ranks verify they agree on count/dtype/op; 0: skip")          \
  X(SIMD, "COLL_SIMD",                                                          \
    "reduction kernels: auto (default), scalar, avx2, avx512")                  \
  X(BACKEND, "COLL_BACKEND",                                                    \
    "coll_comm_init_env backend: auto (default: NCCL if usable), cpu, nccl")    \
  X(TRACE_FILE, "COLL_TRACE_FILE",                                              \
    "flight recorder file; %r rank, %p pid, %c comm number (unset: off)")       \
  X(TRACE_ENTRIES, "COLL_TRACE_ENTRIES",                                        \
    "collectives the flight recorder keeps per comm (256; 0: off)")             \
  X(TRANSPORT, "COLL_TRANSPORT",                                                \
    "process transport: auto (default: shm when all ranks share a host, else "  \
    "tcp), tcp, shm")                                                           \
  X(SHM_SPIN_US, "COLL_SHM_SPIN_US",                                            \
    "shm transport: microseconds a waiter spins before it sleeps (50)")         \
  X(HEARTBEAT_TIMEOUT_MS, "COLL_HEARTBEAT_TIMEOUT_MS",                        \
    "TCP: a peer silent this long while a call waits on it is unresponsive, " \
    "ms (default " COLL_ENV_XSTR_(COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS) "; 0: "  \
    "off)") \
  X(TCP_CONGESTION, "COLL_TCP_CONGESTION",                                      \
    "TCP: congestion control of the connections between ranks, e.g. cubic "     \
    "(default: the host's, net.ipv4.tcp_congestion_control)")                   \
  X(ELASTIC, "COLL_ELASTIC",                                                    \
    "TCP: 1 keeps a control connection per peer so coll_comm_shrink works "     \
    "after a failure (0, the default: none)")

typedef enum coll_env {
#define COLL_ENV_ENUM_(id, name, meaning) COLL_ENV_##id,
  COLL_ENV_MAP(COLL_ENV_ENUM_)
#undef COLL_ENV_ENUM_
      COLL_ENV_COUNT
} coll_env_t;

/* The variable's value, or NULL when unset or empty. Any thread. */
const char *coll__env(coll_env_t id);
/* The variable's name / meaning. */
const char *coll__env_name(coll_env_t id);
const char *coll__env_meaning(coll_env_t id);
/* Parses a decimal integer variable: returns 1 and sets *out when set and
 * valid, 0 when unset, -1 when set but not a number (a warning is logged). */
int coll__env_int(coll_env_t id, int64_t *out);
/* The same without the warning, for callers that refuse the value. */
int coll__env_parse_int(coll_env_t id, int64_t *out);

/* The default comm timeout in ms: COLL_TIMEOUT_MS when set and not 0, else
 * COLL_DEFAULT_TIMEOUT_MS. Any thread. */
int64_t coll__default_timeout_ms(void);
/* COLL_OK, or COLL_ERR_INVALID_ARG naming COLL_TIMEOUT_MS when it is set to
 * something other than a number. Every comm constructor calls it first, so
 * a typo is an error at creation, not a silent default. */
coll_status_t coll__env_timeout_check(void);

#endif
