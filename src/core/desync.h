/* SPDX-License-Identifier: Apache-2.0 */
/* desync.h: the "who is missing" report of a collective that timed out:
 * where every rank was when it was asked, compared with the call that
 * timed out here, in one sentence. */
#ifndef COLL_CORE_DESYNC_H
#define COLL_CORE_DESYNC_H

#include <stddef.h>
#include <stdint.h>

#include "core/position.h"

/* Longest report kept and carried to the peers (bytes, with the NUL). */
#define COLL_DESYNC_REPORT_MAX 384

/* Writes into buf (n bytes) what pos[0..world) say against pos[self], the
 * call that timed out after timeout_ms:
 * "allreduce #41 timed out after 10.0 s: rank 1 is still in broadcast #40;
 * rank 3 never entered it (last finished allreduce #40); ranks 0,2 are in
 * it". A rank whose answered[r] is 0 "did not answer". Any thread. */
void coll__desync_report(int self, int world, const coll_pos_snap_t *pos,
                         const unsigned char *answered, int64_t timeout_ms,
                         char *buf, size_t n);

#endif
