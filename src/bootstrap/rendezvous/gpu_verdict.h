/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_verdict.h: whether every rank of a comm has a GPU of its own, judged
 * from the GPU each rank says it would run NCCL on (its PCI bus id) and its
 * host: what COLL_BACKEND=auto asks of the ranks before it picks NCCL
 * (NCCL refuses two ranks of one comm on one GPU). A rank's GPU count or
 * LOCAL_WORLD_SIZE cannot tell that: where each rank sees only its own GPU
 * (srun --gpus-per-task=1, a CUDA_VISIBLE_DEVICES per rank) every rank
 * calls it device 0. The judging knows nothing of CUDA: a GPU is a word. */
#ifndef COLL_BOOTSTRAP_GPU_VERDICT_H
#define COLL_BOOTSTRAP_GPU_VERDICT_H

#include <stddef.h>

/* A GPU's word, with its NUL: "0000:3b:00.0" and room to spare. */
#define COLL_GPU_ID_MAX 40

typedef enum coll_gpus_kind {
  COLL_GPUS_OWN = 0, /* every rank has one, no two of a host the same */
  COLL_GPUS_MISSING, /* rank_a named none (no NCCL there, or not asked) */
  COLL_GPUS_SHARED   /* rank_a and rank_b, of one host, both on gpu */
} coll_gpus_kind_t;

typedef struct coll_gpus {
  coll_gpus_kind_t kind;
  int rank_a, rank_b;
  char gpu[COLL_GPU_ID_MAX];
} coll_gpus_t;

/* What one rank said: the number of its host (coll_host_table_t, host_id.h)
 * and its GPU ("": none). */
typedef struct coll_gpu_rank {
  int host;
  char gpu[COLL_GPU_ID_MAX];
} coll_gpu_rank_t;

/* The verdict over ranks[0..world): MISSING naming the lowest rank without
 * a GPU, else SHARED naming two ranks of one host on one GPU (the same pair
 * for the same input), else OWN. order holds world ints of scratch. Any
 * thread. */
void coll__gpus_judge(const coll_gpu_rank_t *ranks, int world, int *order,
                      coll_gpus_t *out);

/* The verdict as one word list ("own", "missing 3", "shared 2 5
 * 0000:3b:00.0") and back: 0, or -1 for a text no build writes. */
void coll__gpus_text(const coll_gpus_t *v, char *out, size_t cap);
int coll__gpus_parse(const char *text, coll_gpus_t *out);

/* A GPU's word as ranks compare it: lower case, no blanks, at most
 * COLL_GPU_ID_MAX - 1 bytes. */
void coll__gpu_word(const char *id, char out[COLL_GPU_ID_MAX]);

#endif
