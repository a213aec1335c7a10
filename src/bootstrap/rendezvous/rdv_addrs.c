/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_addrs.c: how the ranks of a rendezvous learn each other's TCP
 * addresses (coll__rdv_tcp_adapter). Every rank sets "addr/<r>"; rank 0,
 * which has no lower rank to dial, reads them all and sets the table
 * "addrs/<c>" (ranks c * ADDRS_PER_KEY onwards, one address a line, an
 * empty line for a rank that never published); every other rank reads the
 * keys of the table that hold its lower ranks, once. So rank 0's store
 * serves about 2n requests for the addresses where every rank looking up
 * every lower rank cost n(n-1)/2, one round trip each. A rank whose table
 * does not come, or names no address for a rank, asks for that rank's
 * "addr/<r>" itself without waiting, so the texts of a missing rank are
 * those of a lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/rdv_int.h"
#include "bootstrap/store/store_ext.h"
#include "core/clock.h"
#include "core/error.h"
#include "transport/tcp/tcp.h"

/* Addresses per key of the table: at most 512 * (COLL_ADDR_TEXT_MAX + 1),
 * 49 KiB, inside the store's 64 KiB value. */
#define ADDRS_PER_KEY 512
#define ADDRS_KEY_BYTES ((size_t)ADDRS_PER_KEY * (COLL_ADDR_TEXT_MAX + 1))

static coll_status_t addr_get(coll_rdv_t *r, int rank, char *addr, size_t cap,
                              int64_t timeout_ms) {
  char key[COLL_RDV_KEY_MAX];
  size_t len = 0;
  coll_status_t s;
  snprintf(key, sizeof key, "addr/%d", rank);
  s = coll__store_get(r->store, key, addr, cap - 1, &len, timeout_ms);
  if (s == COLL_ERR_TIMEOUT)
    return coll__err(s,
                     "rendezvous at %s: rank %d did not publish its address "
                     "in time",
                     r->where, rank);
  if (s != COLL_OK) return s;
  addr[len] = '\0';
  return COLL_OK;
}

/* Rank 0: every rank's address (waiting until the deadline; once it passed
 * the rest are asked without waiting), then the table. A rank still
 * missing fails rank 0's part after the table is out, naming the first
 * such rank: the others learn from the table at once. */
static coll_status_t gather(coll_rdv_t *r, const char *addr0) {
  char *buf = malloc(ADDRS_KEY_BYTES), key[COLL_RDV_KEY_MAX],
       one[COLL_ADDR_TEXT_MAX];
  int q, first_missing = -1;
  size_t used = 0;
  coll_status_t s = COLL_OK;
  if (buf == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  for (q = 0; q < r->world && s == COLL_OK; q++) {
    const char *a = one;
    if (q == 0) {
      a = addr0;
    } else {
      s = addr_get(r, q, one, sizeof one, coll__remaining_ms(r->deadline_ms));
      if (s == COLL_ERR_TIMEOUT && coll__store_usable(r->store)) {
        if (first_missing < 0) first_missing = q;
        a = "";
        s = COLL_OK;
      }
      if (s != COLL_OK) break;
    }
    used += (size_t)snprintf(buf + used, ADDRS_KEY_BYTES - used, "%s\n", a);
    if ((q + 1) % ADDRS_PER_KEY == 0 || q + 1 == r->world) {
      snprintf(key, sizeof key, "addrs/%d", q / ADDRS_PER_KEY);
      s = coll__store_set(r->store, key, buf, used);
      used = 0;
    }
  }
  free(buf);
  if (s != COLL_OK) return s;
  if (first_missing >= 0)
    return coll__err(COLL_ERR_TIMEOUT,
                     "rendezvous at %s: rank %d did not publish its address "
                     "in time",
                     r->where, first_missing);
  return COLL_OK;
}

static coll_status_t rdv_publish(void *ctx, int rank, const char *addr) {
  coll_rdv_t *r = ctx;
  char key[COLL_RDV_KEY_MAX];
  snprintf(key, sizeof key, "addr/%d", rank);
  if (rank == coll__rdv_test_hooks.publish_rank &&
      coll__rdv_test_hooks.publish_addr != NULL)
    addr = coll__rdv_test_hooks.publish_addr;
  if (coll__rdv_test_hooks.publish_as != NULL) {
    const char *other = coll__rdv_test_hooks.publish_as(rank, addr);
    if (other != NULL) addr = other;
  }
  COLL_CHECK(coll__store_set(r->store, key, addr, strlen(addr)));
  return rank == 0 ? gather(r, addr) : COLL_OK;
}

/* Reads the table's key that holds `rank` into r->addrs, waiting until the
 * deadline. COLL_ERR_TIMEOUT (text cleared) when it did not come. */
static coll_status_t load(coll_rdv_t *r, int rank, int64_t deadline_ms) {
  int c = rank / ADDRS_PER_KEY, q = c * ADDRS_PER_KEY;
  char key[COLL_RDV_KEY_MAX], *buf = malloc(ADDRS_KEY_BYTES + 1), *line;
  size_t len = 0;
  coll_status_t s;
  if (buf == NULL)
    return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  snprintf(key, sizeof key, "addrs/%d", c);
  s = coll__store_get(r->store, key, buf, ADDRS_KEY_BYTES, &len,
                      coll__remaining_ms(deadline_ms));
  if (s == COLL_ERR_TIMEOUT) coll__err_clear();
  if (s != COLL_OK) goto out;
  buf[len] = '\0';
  for (line = buf; q < r->world && q < (c + 1) * ADDRS_PER_KEY; q++) {
    char *end = strchr(line, '\n');
    if (end == NULL) break; /* short: the rest read as missing */
    *end = '\0';
    snprintf(r->addrs[q], sizeof r->addrs[q], "%s", line);
    line = end + 1;
  }
  r->addrs_loaded[c] = 1;
out:
  free(buf);
  return s;
}

static coll_status_t rdv_lookup(void *ctx, int rank, char *addr, size_t cap,
                                int64_t deadline_ms) {
  coll_rdv_t *r = ctx;
  int c = rank / ADDRS_PER_KEY;
  coll_status_t s;
  if (cap < 2)
    return coll__err(COLL_ERR_INVALID_ARG, "rendezvous lookup: no room");
  if (rank < 0 || rank >= r->world)
    return coll__err(COLL_ERR_INVALID_ARG, "rendezvous lookup: no rank %d",
                     rank);
  if (r->addrs == NULL) {
    int keys = (r->world + ADDRS_PER_KEY - 1) / ADDRS_PER_KEY;
    r->addrs = calloc((size_t)r->world, sizeof *r->addrs);
    r->addrs_loaded = calloc((size_t)keys, sizeof *r->addrs_loaded);
    if (r->addrs == NULL || r->addrs_loaded == NULL)
      return coll__err(COLL_ERR_NO_MEMORY, "rendezvous: out of memory");
  }
  if (!r->addrs_loaded[c]) {
    s = load(r, rank, deadline_ms);
    if (s != COLL_OK && s != COLL_ERR_TIMEOUT) return s;
  }
  if (r->addrs[rank][0] == '\0' || strlen(r->addrs[rank]) >= cap)
    return addr_get(r, rank, addr, cap, 0); /* what a lookup would say */
  snprintf(addr, cap, "%s", r->addrs[rank]);
  return COLL_OK;
}

void coll__rdv_tcp_adapter(coll_rdv_t *r, struct coll_tcp_rdv *out) {
  out->ctx = r;
  out->publish = rdv_publish;
  out->lookup = rdv_lookup;
}
