/* SPDX-License-Identifier: Apache-2.0 */
/* transport_ops.c: coll_transport_create: a third party's table
 * (coll_transport_ops_t, version 1 or 2) checked and adapted into a
 * provider table. A version 1 table's slots go in as they are; a version 2
 * table goes through transport_ops_v2.c, which converts its slots. */
#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "transport/endpoint.h"
#include "transport/transport_ops.h"

#define OPS_END(slot)                     \
  (offsetof(coll_transport_ops_t, slot) + \
   sizeof(((coll_transport_ops_t *)0)->slot))
#define OPS_HAS(ops, slot) ((ops)->size >= OPS_END(slot))

static const char *name_of(const coll_transport_ops_t *ops) {
  return ops->name ? ops->name : "?";
}

/* The first slot of a version 2 group that is NULL while another of the
 * group is set; NULL when every group is whole. */
static const char *half_group(const coll_transport_ops_t *o, const char **set,
                              const char **group) {
  struct {
    const char *names, *n[4];
    int has[4];
  } g[3] = {
      {"fail, origin",
       {"fail", "origin"},
       {o->fail != NULL, o->origin != NULL}},
      {"bind, ask, tell, heard",
       {"bind", "ask", "tell", "heard"},
       {o->bind != NULL, o->ask != NULL, o->tell != NULL, o->heard != NULL}},
      {"link_send, link_recv, shrink, leave",
       {"link_send", "link_recv", "shrink", "leave"},
       {o->link_send != NULL, o->link_recv != NULL, o->shrink != NULL,
        o->leave != NULL}},
  };
  for (int i = 0; i < 3; i++) {
    int k, any = 0, missing = -1;
    for (k = 0; k < 4 && g[i].n[k] != NULL; k++) {
      any |= g[i].has[k];
      if (!g[i].has[k] && missing < 0) missing = k;
    }
    if (any && missing >= 0) {
      for (k = 0; !g[i].has[k]; k++) continue;
      *set = g[i].n[k];
      *group = g[i].names;
      return g[i].n[missing];
    }
  }
  return NULL;
}

/* Size, version and slots; COLL_OK or INVALID_ARG with a sentence. */
static coll_status_t check_ops(const coll_transport_ops_t *ops) {
  const coll_status_t s = COLL_ERR_INVALID_ARG;
  const char *set = NULL, *group = NULL, *missing;
  if (ops == NULL) return coll__err(s, "transport_create: ops is NULL");
  if (!OPS_HAS(ops, destroy))
    return coll__err(s,
                     "transport_create: ops->size %zu is too small for the "
                     "mandatory slots (need %zu)",
                     ops->size, OPS_END(destroy));
  if (ops->version < 1 || ops->version > COLL_TRANSPORT_OPS_VERSION)
    return coll__err(s,
                     "transport_create: transport '%.32s' has ops->version "
                     "%u; this libcoll knows versions 1..%u (set it to "
                     "COLL_TRANSPORT_OPS_VERSION)",
                     name_of(ops), ops->version,
                     (unsigned)COLL_TRANSPORT_OPS_VERSION);
  if (ops->isend == NULL || ops->irecv == NULL || ops->wait == NULL ||
      ops->abort == NULL || ops->destroy == NULL)
    return coll__err(s,
                     "transport_create: transport '%.32s' lacks mandatory "
                     "slot %s",
                     name_of(ops),
                     ops->isend == NULL   ? "isend"
                     : ops->irecv == NULL ? "irecv"
                     : ops->wait == NULL  ? "wait"
                     : ops->abort == NULL ? "abort"
                                          : "destroy");
  if (ops->version < 2) return COLL_OK;
  if (!OPS_HAS(ops, leave))
    return coll__err(s,
                     "transport_create: transport '%.32s' says version %u "
                     "but its ops->size %zu is too small for the version %u "
                     "slots (need %zu; a version 1 table says version 1)",
                     name_of(ops), ops->version, ops->size, ops->version,
                     OPS_END(leave));
  missing = half_group(ops, &set, &group);
  if (missing != NULL)
    return coll__err(s,
                     "transport_create: transport '%.32s' sets %s but not "
                     "%s: the slots %s come together (all set or all NULL)",
                     name_of(ops), set, missing, group);
  return COLL_OK;
}

/* The one rule for ctx: it becomes the transport's only when this call
 * returns COLL_OK. On any failure no slot of the table is called, so the
 * caller frees ctx as it would have without calling us. (Calling destroy on
 * some failures would need the slot to be trusted, which a table that is
 * NULL or too small cannot be; one rule is easier to get right.) */
coll_status_t coll_transport_create(const coll_transport_ops_t *ops, void *ctx,
                                    int rank, int world,
                                    coll_transport_t **out) {
  coll_provider_t p = {.size = sizeof p, .version = COLL_PROVIDER_VERSION};
  coll__err_clear();
  if (out != NULL) *out = NULL;
  COLL_CHECK(check_ops(ops));
  if (out == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "transport_create: out is NULL");
  if (ops->version >= 2)
    return coll__tops_v2_create(ops, ctx, rank, world, out);
  /* Version 1: the slots as they are, read no further than barrier. */
  p.name = ops->name;
  p.isend = ops->isend;
  p.irecv = ops->irecv;
  p.wait = ops->wait;
  p.abort = ops->abort;
  p.destroy = ops->destroy;
  if (OPS_HAS(ops, barrier)) p.barrier = ops->barrier;
  return coll__t_create(&p, ctx, rank, world, out);
}

void coll_transport_where(const coll_transport_t *t,
                          unsigned char out[COLL_TRANSPORT_WHERE_BYTES]) {
  coll_pos_snap_t p;
  memset(&p, 0, sizeof p);
  if (t != NULL) coll__pos_read(t->pos, &p);
  coll__tops_where_encode(&p, out);
}
