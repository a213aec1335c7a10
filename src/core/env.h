/* SPDX-License-Identifier: Apache-2.0 */
/* env.h: every environment variable libcoll reads, declared in one list
 * with its type, default and accepted values, and the typed accessors
 * every layer reads them through. */
#ifndef COLL_CORE_ENV_H
#define COLL_CORE_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* ---- defaults that more than one layer names ---------------------------- */

/* A comm's bound on every wait when neither its config nor COLL_TIMEOUT_MS
 * gives one: five minutes, long enough for a slow first NCCL init or a
 * checkpoint on another rank, short enough that a hung job ends. */
#define COLL_DEFAULT_TIMEOUT_MS 300000
/* A peer silent this long while a call waits on it is unresponsive: ten
 * heartbeat periods of half a second, far above a scheduling hiccup on a
 * loaded host, far below the comm's timeout. */
#define COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS 10000
/* Bytes from which COLL_ALGO=auto takes the ring over recursive doubling
 * on one host (src/cpu/tuning.c has the measurements). */
#define COLL_DEFAULT_RING_THRESHOLD (256 * 1024)
/* How long a shared-memory waiter spins before it sleeps, microseconds. A
 * few microseconds covers a peer that is running and about to answer;
 * past that, sleeping frees the core. Kept at 50 after measuring 50, 200,
 * 500, 1000 and 5000 (2-vCPU KVM guest, quiet, coll-perf f32 allreduce
 * 4K..64M -n 50, ranks as processes, runs interleaved). Every run there
 * falls into one of two modes for all sizes at once, whatever the setting:
 * 2 ranks, 1 MiB takes ~110 us (9.5 GB/s busbw) or ~550 us (1.9), 16 MiB
 * ~2.7 ms or ~9.5 ms; 4 KiB takes 1.7 us, or 16-20 us in 11 of 29 runs at
 * 50 and in 1 of 27 at >= 200 (that one at 87 us). But 4 ranks on the 2
 * cores lose at >= 200 (4 KiB median 53 us against 34 in one sitting, 61
 * us at 1000), and medians of 3 at 1 MiB and 16 MiB did not move beyond
 * the two modes. Compare again on a machine with more cores than ranks. */
#define COLL_DEFAULT_SHM_SPIN_US 50
/* How long a caller waiting on TCP drives its sockets without sleeping,
 * microseconds, yielding the core between looks (src/transport/tcp/
 * tcp_int.h has the measurements behind the default). */
#define COLL_DEFAULT_TCP_SPIN_US 20
/* Buffers from which the shared-memory collectives copy their peers'
 * buffers once, through the kernel (transport/shm/shm_cma.c), instead of
 * through the shared slots. Off by default: measured on this 2-core host
 * (one sitting, medians of 3, interleaved, f32 SUM in place), single copy
 * from 1 MiB lost to the slots at every size but one: 2 ranks 16 MiB 3.2
 * against 6.5 GB/s busbw, 64 MiB 3.4 against 5.8; 4 ranks 1 MiB 3.4
 * against 5.3, 16 MiB 2.1 against 4.0; it won only 2 ranks at 4 MiB (7.7
 * against 7.5). process_vm_readv pins and copies page by page in the
 * caller, while the slots' copies overlap on both cores. Turn it on where
 * it wins (more cores than ranks, buffers far past the caches), measured
 * as:
 *   VARIANTS="coll coll:COLL_SHM_SINGLE_COPY=1048576 mpi_vader"
 *   BENCH_SIZES=1048576,4194304,16777216,67108864 bench/vs-peers.sh 2 4 */
#define COLL_DEFAULT_SHM_SINGLE_COPY 0
/* The send and receive buffer of a TCP connection between two ranks of
 * a host whose ranks outnumber its cores, bytes; 0 keeps the buffers every
 * connection is made with. Off until a quiet sitting decides: the rough
 * times of a loaded machine favour 512 KiB at 16 MiB and disagree at 1 MiB
 * (src/transport/tcp/tcp_transport.c has the runs). */
#define COLL_DEFAULT_TCP_LOCAL_BUFFER_BYTES 0
/* The flight recorder's ring: 256 collectives cover the minutes before a
 * hang at training rates at 80 bytes each; the bound keeps a typo from
 * asking for gigabytes. */
#define COLL_TRACE_ENTRIES_DEFAULT 256
#define COLL_TRACE_ENTRIES_MAX 65536

/* ---- the list ------------------------------------------------------------ */

/* Kinds of variable:
 *  FOREIGN another program's variable (torchrun's, mpirun's, srun's,
 *          NCCL's): read and checked where it matters (core/launch.c,
 *          api/env_init.c, nccl/), with errors of its own; not a knob.
 *  TEXT    any value, at most `hi` characters (0: no bound).
 *  INT     a decimal integer from lo to hi.
 *  CHOICE  one of `words`, in any case; its value is the word's index.
 * Every value but a FOREIGN one is checked when a comm is created
 * (coll__knobs_load), the same way on every transport. */
typedef enum coll_knob_kind {
  COLL_KNOB_FOREIGN,
  COLL_KNOB_TEXT,
  COLL_KNOB_INT,
  COLL_KNOB_CHOICE
} coll_knob_kind_t;

/* The words of each CHOICE variable, W(var, id, word): the first is the
 * default. Each list also makes an enum, COLL_<var>_<id> (below). */
#define COLL_WORDS_NONE(W)
#define COLL_WORDS_DEBUG(W) \
  W(DEBUG, NONE, "none")    \
  W(DEBUG, WARN, "warn") W(DEBUG, INFO, "info") W(DEBUG, TRACE, "trace")
/* Algorithms by the name of their rows in the CPU collectives' tables
 * (src/cpu/choose.h). */
#define COLL_WORDS_ALGO(W)       \
  W(ALGO, AUTO, "auto")          \
  W(ALGO, RING, "ring")          \
  W(ALGO, RD, "rd")              \
  W(ALGO, RH, "rh")              \
  W(ALGO, TWO_LEVEL, "twolevel") \
  W(ALGO, SHM, "shm") W(ALGO, TREE, "tree") W(ALGO, CHAIN, "chain")
#define COLL_WORDS_SWITCH(W) \
  W(SWITCH, AUTO, "auto") W(SWITCH, OFF, "0") W(SWITCH, ON, "1")
#define COLL_WORDS_SIMD(W) \
  W(SIMD, AUTO, "auto")    \
  W(SIMD, SCALAR, "scalar") W(SIMD, AVX2, "avx2") W(SIMD, AVX512, "avx512")
#define COLL_WORDS_BACKEND(W) \
  W(BACKEND, AUTO, "auto") W(BACKEND, CPU, "cpu") W(BACKEND, NCCL, "nccl")
#define COLL_WORDS_TRANSPORT(W) \
  W(TRANSPORT, AUTO, "auto") W(TRANSPORT, TCP, "tcp") W(TRANSPORT, SHM, "shm")

/* X(id, name, kind, lo, hi, words, dflt, agree, meaning)
 *  lo, hi   INT: the accepted range; TEXT: hi bounds the length.
 *  words    CHOICE: its COLL_WORDS_ list; else COLL_WORDS_NONE.
 *  dflt     INT: the value when unset (may lie outside [lo, hi]: "the
 *           library chooses", as the meaning says); CHOICE: the index.
 *  agree    1 where every rank of a job must set it alike, because it
 *           changes what travels between ranks: the rendezvous compares
 *           them (coll__knobs_agreed_text) and names the ranks that differ.
 *  meaning  what it does, its default and why: `coll-perf --env` prints it
 *           and docs/environment.md says the same.
 * Other programs' variables first (NCCL's beside libcoll's NCCL ones),
 * then libcoll's own. */
#define COLL_I64_MAX INT64_MAX
#define COLL_I64_MIN INT64_MIN
#define COLL_ENV_FOREIGN_(X, id, name, meaning) \
  X(id, name, COLL_KNOB_FOREIGN, 0, 0, COLL_WORDS_NONE, 0, 0, meaning)
#define COLL_ENV_MAP(X)                                                        \
  COLL_ENV_FOREIGN_(X, RANK, "RANK",                                           \
                    "this process's rank, 0..WORLD_SIZE-1 (env:// init)")      \
  COLL_ENV_FOREIGN_(X, WORLD_SIZE, "WORLD_SIZE",                               \
                    "number of ranks in the job (env:// init)")                \
  COLL_ENV_FOREIGN_(X, LOCAL_RANK, "LOCAL_RANK",                               \
                    "rank within this host; picks the CUDA device")            \
  COLL_ENV_FOREIGN_(X, LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE",                   \
                    "ranks on this host (auto compares the ranks' GPUs "       \
                    "instead of counting)")                                    \
  COLL_ENV_FOREIGN_(X, OMPI_RANK, "OMPI_COMM_WORLD_RANK",                      \
                    "rank under Open MPI's mpirun, when RANK is unset")        \
  COLL_ENV_FOREIGN_(X, OMPI_SIZE, "OMPI_COMM_WORLD_SIZE",                      \
                    "world size under Open MPI's mpirun, when WORLD_SIZE is "  \
                    "unset")                                                   \
  COLL_ENV_FOREIGN_(X, OMPI_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK",          \
                    "rank within this host under mpirun, when LOCAL_RANK is "  \
                    "unset")                                                   \
  COLL_ENV_FOREIGN_(X, OMPI_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE",          \
                    "ranks on this host under mpirun, when LOCAL_WORLD_SIZE "  \
                    "is unset")                                                \
  COLL_ENV_FOREIGN_(X, PMI_RANK, "PMI_RANK",                                   \
                    "rank under a PMI launcher (MPICH, Intel MPI)")            \
  COLL_ENV_FOREIGN_(X, PMI_SIZE, "PMI_SIZE",                                   \
                    "world size under a PMI launcher")                         \
  COLL_ENV_FOREIGN_(X, SLURM_PROCID, "SLURM_PROCID",                           \
                    "rank under Slurm's srun")                                 \
  COLL_ENV_FOREIGN_(X, SLURM_NTASKS, "SLURM_NTASKS",                           \
                    "world size under Slurm's srun")                           \
  COLL_ENV_FOREIGN_(X, SLURM_LOCALID, "SLURM_LOCALID",                         \
                    "rank within this node under srun")                        \
  COLL_ENV_FOREIGN_(X, SLURM_NODEID, "SLURM_NODEID",                           \
                    "this node's index in the step, for "                      \
                    "SLURM_STEP_TASKS_PER_NODE")                               \
  COLL_ENV_FOREIGN_(X, SLURM_STEP_TASKS_PER_NODE, "SLURM_STEP_TASKS_PER_NODE", \
                    "tasks per node of the srun step (\"2(x3),1\"): local "    \
                    "world size")                                              \
  COLL_ENV_FOREIGN_(X, MASTER_ADDR, "MASTER_ADDR",                             \
                    "host of rank 0's rendezvous store")                       \
  COLL_ENV_FOREIGN_(X, MASTER_PORT, "MASTER_PORT",                             \
                    "port of rank 0's rendezvous store")                       \
  X(DEBUG, "COLL_DEBUG", COLL_KNOB_CHOICE, 0, 0, COLL_WORDS_DEBUG,             \
    COLL_DEBUG_WARN, 0,                                                        \
    "log level: none, warn (default: problems only), info (setup "             \
    "decisions), trace (every collective)")                                    \
  X(SOCKET_IFNAME, "COLL_SOCKET_IFNAME", COLL_KNOB_TEXT, 0, 15,                \
    COLL_WORDS_NONE, 0, 0,                                                     \
    "interface to listen on (default: the one that reaches MASTER_ADDR, "      \
    "so that every rank can reach this one)")                                  \
  X(TIMEOUT_MS, "COLL_TIMEOUT_MS", COLL_KNOB_INT, COLL_I64_MIN, COLL_I64_MAX,  \
    COLL_WORDS_NONE, 0, 0,                                                     \
    "default bound on every wait of a comm, ms (0 or unset: 300000, five "     \
    "minutes; < 0: no bound)")                                                 \
  X(AUTH_TOKEN, "COLL_AUTH_TOKEN", COLL_KNOB_TEXT, 0, 0, COLL_WORDS_NONE, 0,   \
    0,                                                                         \
    "shared secret checked by the store and transport handshakes (default: "   \
    "none, for jobs on a trusted network)")                                    \
  X(NCCL_LIBRARY, "COLL_NCCL_LIBRARY", COLL_KNOB_TEXT, 0, 0, COLL_WORDS_NONE,  \
    0, 0, "path or name of libnccl to load (default libnccl.so.2)")            \
  X(NCCL_SHRINKABLE, "COLL_NCCL_SHRINKABLE", COLL_KNOB_INT, 0, 1,              \
    COLL_WORDS_NONE, 0, 0,                                                     \
    "1: a failed or aborted NCCL comm keeps NCCL's comm for a shrink (NCCL "   \
    "2.27 only; 2.28+ always can; 0, the default: it is freed at once, as "    \
    "NCCL advises)")                                                           \
  COLL_ENV_FOREIGN_(                                                           \
      X, NCCL_COMM_BLOCKING, "NCCL_COMM_BLOCKING",                             \
      "NCCL's own: 1 would make NCCL comms blocking, so libcoll "              \
      "refuses to make NCCL comms while it is 1")                              \
  X(ALGO, "COLL_ALGO", COLL_KNOB_CHOICE, 0, 0, COLL_WORDS_ALGO,                \
    COLL_ALGO_AUTO, 1,                                                         \
    "CPU comms' algorithm, in every collective that has it: auto (default: "   \
    "by size, ranks and transport), ring, rd (recursive doubling), rh "        \
    "(recursive halving, then doubling), twolevel (within hosts, then "        \
    "across), shm (through shared memory, where the transport has it), tree "  \
    "(broadcast, reduce), chain (broadcast)")                                  \
  X(RING_THRESHOLD, "COLL_RING_THRESHOLD", COLL_KNOB_INT, 0, COLL_I64_MAX,     \
    COLL_WORDS_NONE, -1, 1,                                                    \
    "bytes from which auto picks the ring (or two-level) over recursive "      \
    "doubling (default: 262144 on one host, measured; across hosts, what "     \
    "the link probe finds)")                                                   \
  X(LINK_PROBE, "COLL_LINK_PROBE", COLL_KNOB_CHOICE, 0, 0, COLL_WORDS_SWITCH,  \
    COLL_SWITCH_AUTO, 1,                                                       \
    "ring threshold from the links measured at comm creation: auto "           \
    "(default: on comms that span hosts, whose links no constant fits), 1 "    \
    "(always), 0 (never)")                                                     \
  X(SEGMENT_BYTES, "COLL_SEGMENT_BYTES", COLL_KNOB_INT, 64, 1 << 30,           \
    COLL_WORDS_NONE, -1, 1,                                                    \
    "pipeline segment of the CPU ring, bytes, at every size (default: 256 "    \
    "KiB; over TCP within a host an eighth of a ring block up to 1 MiB; 1 "    \
    "MiB where a host's ranks outnumber its cores)")                           \
  X(CHECK_MISMATCH, "COLL_CHECK_MISMATCH", COLL_KNOB_INT, 0, 1,                \
    COLL_WORDS_NONE, -1, 1,                                                    \
    "1: ranks verify they agree on count/dtype/op/collective; 0: skip "        \
    "(default: 1 on CPU comms, where it rides in the collective's first "      \
    "message; 0 on NCCL comms, where it costs a round of its own)")            \
  X(SIMD, "COLL_SIMD", COLL_KNOB_CHOICE, 0, 0, COLL_WORDS_SIMD,                \
    COLL_SIMD_AUTO, 0,                                                         \
    "reduction kernels: auto (default: the widest this CPU has), scalar, "     \
    "avx2, avx512")                                                            \
  X(BACKEND, "COLL_BACKEND", COLL_KNOB_CHOICE, 0, 0, COLL_WORDS_BACKEND,       \
    COLL_BACKEND_AUTO, 0,                                                      \
    "coll_comm_init_env backend: auto (default: NCCL if usable), cpu, nccl")   \
  X(TRACE_FILE, "COLL_TRACE_FILE", COLL_KNOB_TEXT, 0, 0, COLL_WORDS_NONE, 0,   \
    0, "flight recorder file; %r rank, %p pid, %c comm number (unset: off)")   \
  X(TRACE_ENTRIES, "COLL_TRACE_ENTRIES", COLL_KNOB_INT, 0,                     \
    COLL_TRACE_ENTRIES_MAX, COLL_WORDS_NONE, COLL_TRACE_ENTRIES_DEFAULT, 0,    \
    "collectives the flight recorder keeps per comm (default 256; 0: off)")    \
  X(TRANSPORT, "COLL_TRANSPORT", COLL_KNOB_CHOICE, 0, 0, COLL_WORDS_TRANSPORT, \
    COLL_TRANSPORT_AUTO, 0,                                                    \
    "process transport: auto (default: shm when all ranks share a host, "      \
    "measured ahead of TCP at every size; else tcp), tcp, shm")                \
  X(SHM_SPIN_US, "COLL_SHM_SPIN_US", COLL_KNOB_INT, 0, 1000000,                \
    COLL_WORDS_NONE, COLL_DEFAULT_SHM_SPIN_US, 0,                              \
    "shm transport: microseconds a waiter spins before it sleeps (default "    \
    "50: a peer about to answer, without holding a shared core)")              \
  X(SHM_SINGLE_COPY, "COLL_SHM_SINGLE_COPY", COLL_KNOB_INT, 0, COLL_I64_MAX,   \
    COLL_WORDS_NONE, COLL_DEFAULT_SHM_SINGLE_COPY, 0,                          \
    "shm transport: bytes from which the shared-memory collectives copy "      \
    "peers' buffers once through the kernel (default 1048576; 0: never)")      \
  X(HEARTBEAT_TIMEOUT_MS, "COLL_HEARTBEAT_TIMEOUT_MS", COLL_KNOB_INT, 0,       \
    COLL_I64_MAX, COLL_WORDS_NONE, COLL_DEFAULT_HEARTBEAT_TIMEOUT_MS, 0,       \
    "TCP and shm: a peer silent this long while a call waits on it is "        \
    "unresponsive, ms (default 10000; 0: off)")                                \
  X(TCP_SPIN_US, "COLL_TCP_SPIN_US", COLL_KNOB_INT, 0, 1000000,                \
    COLL_WORDS_NONE, COLL_DEFAULT_TCP_SPIN_US, 0,                              \
    "TCP: microseconds a waiting caller keeps reading its sockets, yielding "  \
    "the core between tries, before it sleeps in poll() (default 20)")         \
  X(TCP_LOCAL_BUFFER_BYTES, "COLL_TCP_LOCAL_BUFFER_BYTES", COLL_KNOB_INT, 0,   \
    1 << 30, COLL_WORDS_NONE, COLL_DEFAULT_TCP_LOCAL_BUFFER_BYTES, 0,          \
    "TCP: send and receive buffer of each connection between ranks of one "    \
    "host whose ranks outnumber its cores, bytes (default 0: the 4 MiB of "    \
    "every connection)")                                                       \
  X(TCP_CONGESTION, "COLL_TCP_CONGESTION", COLL_KNOB_TEXT, 0, 15,              \
    COLL_WORDS_NONE, 0, 0,                                                     \
    "TCP: congestion control of the connections between ranks, e.g. cubic "    \
    "(default: the host's, net.ipv4.tcp_congestion_control)")                  \
  X(ELASTIC, "COLL_ELASTIC", COLL_KNOB_INT, 0, 1, COLL_WORDS_NONE, 0, 0,       \
    "1: TCP comms keep a control connection per peer so coll_comm_shrink "     \
    "works after a failure (0, the default: none, one socket per peer less)")

/* The enums of the CHOICE variables: COLL_ALGO_AUTO, COLL_TRANSPORT_SHM... */
#define COLL_WORD_ENUM_(var, id, word) COLL_##var##_##id,
enum { COLL_WORDS_DEBUG(COLL_WORD_ENUM_) };
enum { COLL_WORDS_ALGO(COLL_WORD_ENUM_) };
enum { COLL_WORDS_SWITCH(COLL_WORD_ENUM_) };
enum { COLL_WORDS_SIMD(COLL_WORD_ENUM_) };
enum { COLL_WORDS_BACKEND(COLL_WORD_ENUM_) };
enum { COLL_WORDS_TRANSPORT(COLL_WORD_ENUM_) };
#undef COLL_WORD_ENUM_

typedef enum coll_env {
#define COLL_ENV_ENUM_(id, name, kind, lo, hi, words, dflt, agree, meaning) \
  COLL_ENV_##id,
  COLL_ENV_MAP(COLL_ENV_ENUM_)
#undef COLL_ENV_ENUM_
      COLL_ENV_COUNT
} coll_env_t;

/* ---- reading them ------------------------------------------------------- */

/* Each variable is parsed here and nowhere else, by its kind, and kept
 * with the text it came from: a reader parses again only when that text
 * changed, so a value set between two calls is seen.
 *
 * Reads and checks every variable but the launchers': COLL_OK, or
 * COLL_ERR_INVALID_ARG naming the first variable whose value is refused
 * and what it accepts (a refused one reads as its default). Every comm
 * constructor, and every transport constructor that reads one, calls it
 * first, so a bad value fails the creation of every comm on every
 * transport. Any thread. */
coll_status_t coll__knobs_load(void);

/* An INT variable's value, or a CHOICE's index into its words; its default
 * when unset or refused. Any thread. */
int64_t coll__knob(coll_env_t id);
/* 1 if the variable is set to an accepted value. Any thread. */
int coll__knob_set(coll_env_t id);
/* A TEXT variable's value, or NULL when unset, empty or refused. Any
 * thread; the string is the environment's (valid until it changes). */
const char *coll__knob_text(coll_env_t id);
/* A CHOICE variable's word ("ring"), the default's when unset. */
const char *coll__knob_word(coll_env_t id);
/* Word i of a CHOICE variable ("?" out of range). */
const char *coll__knob_word_at(coll_env_t id, int64_t i);

/* The variables that every rank must set alike (the `agree` column), as
 * they were read: "algo=auto ring_threshold=default ...", unset INT ones
 * as "default". For the rendezvous's compatibility record. Any thread. */
void coll__knobs_agreed_text(char *out, size_t cap);

/* The default comm timeout in ms: COLL_TIMEOUT_MS when set and not 0, else
 * COLL_DEFAULT_TIMEOUT_MS. Any thread. */
int64_t coll__default_timeout_ms(void);

/* A FOREIGN variable's raw value, or NULL when unset or empty; libcoll's
 * own are read through the accessors above. Any thread. */
const char *coll__env(coll_env_t id);
/* Parses a FOREIGN variable as a decimal integer: 1 and *out when set and
 * valid, 0 when unset, -1 when set but not a number. */
int coll__env_parse_int(coll_env_t id, int64_t *out);

/* The variable's name / meaning / kind. */
const char *coll__env_name(coll_env_t id);
const char *coll__env_meaning(coll_env_t id);
coll_knob_kind_t coll__env_kind(coll_env_t id);
/* What a variable accepts, as its refusal says it ("one of auto, ring,
 * ...", "an integer from 0 to 1"), into buf. */
void coll__knob_accepted(coll_env_t id, char *buf, size_t cap);

#endif
