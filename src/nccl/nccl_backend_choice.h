/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_backend_choice.h: the COLL_BACKEND variable (auto, cpu or nccl). */
#ifndef COLL_NCCL_NCCL_BACKEND_CHOICE_H
#define COLL_NCCL_NCCL_BACKEND_CHOICE_H

/* COLL_BACKEND's value, NULL when unset or empty. Any thread. */
const char *coll__backend_choice(void);

#endif
