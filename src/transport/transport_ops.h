/* SPDX-License-Identifier: Apache-2.0 */
/* transport_ops.h: the adapter of a third party's version 2 table
 * (transport_ops_v2.c) and the codec of its "where are you?" answers, for
 * coll_transport_create and coll_transport_where (transport_ops.c). */
#ifndef COLL_TRANSPORT_TRANSPORT_OPS_H
#define COLL_TRANSPORT_TRANSPORT_OPS_H

#include "coll_transport.h"
#include "core/position.h"

/* Makes the endpoint over a checked version 2 table (transport_ops.c
 * checked size, version, mandatory slots and groups; out is not NULL),
 * with coll_transport_create's rules for ctx, and runs its bind slot. */
coll_status_t coll__tops_v2_create(const coll_transport_ops_t *ops, void *ctx,
                                   int rank, int world, coll_transport_t **out);

/* p as the bytes of an answer (little-endian, reserved bytes zero). */
void coll__tops_where_encode(const coll_pos_snap_t *p,
                             unsigned char out[COLL_TRANSPORT_WHERE_BYTES]);
/* An answer from a peer of a world of `world` ranks, judged as bytes off a
 * wire: 1 with *p, or 0 for anything no rank can be in. Any thread. */
int coll__tops_where_decode(const unsigned char in[COLL_TRANSPORT_WHERE_BYTES],
                            int world, coll_pos_snap_t *p);

#endif
