/* SPDX-License-Identifier: Apache-2.0 */
/* mailbox.h: the tests' own transport provider, plugged in through the
 * public coll_transport_ops_t vtable. */
#ifndef COLL_TESTS_MAILBOX_H
#define COLL_TESTS_MAILBOX_H

#include <stdint.h>

#include "coll_transport.h"

#define MB_MAX_WORLD 8

typedef enum mb_variant {
  MB_FULL_NO_BARRIER, /* sizeof(coll_transport_ops_t), barrier NULL */
  MB_OLD_SIZE,        /* size ends before the barrier slot, which holds a
                         poison function that must never be called */
  MB_WITH_BARRIER,    /* full size, with the mailbox's own barrier */
  MB_V1_POISONED      /* full size but version 1, its version 2 slots
                         poison functions that must never be called */
} mb_variant_t;

const char *mb_variant_name(mb_variant_t v);

/* Makes `world` mailbox endpoints, plugs each in with
 * coll_transport_create and makes a comm over it (timeout_ms per comm).
 * Returns 0 on success. */
int mb_comms(int world, mb_variant_t v, int64_t timeout_ms,
             coll_comm_t **comms);

/* How often a poison slot (past an older table's size, or a version 2 slot
 * of a version 1 table) was called. */
int mb_poison_calls(void);
void mb_poison_reset(void);

#endif
