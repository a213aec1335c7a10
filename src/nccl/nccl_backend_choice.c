/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_backend_choice.c: reads COLL_BACKEND (declared in core/env.h). */
#include "nccl/nccl_backend_choice.h"

#include "core/env.h"

const char *coll__backend_choice(void) { return coll__env(COLL_ENV_BACKEND); }
