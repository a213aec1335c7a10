/* SPDX-License-Identifier: Apache-2.0 */
/* comm.c: the communicator shell shared by every backend. */
#include "core/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"

int64_t coll__config_timeout_ms(const coll_comm_config_t *cfg) {
  if (cfg != NULL &&
      cfg->size >= offsetof(coll_comm_config_t, timeout_ms) + sizeof(int64_t) &&
      cfg->timeout_ms != 0)
    return cfg->timeout_ms;
  return coll__default_timeout_ms();
}

/* Where the magic ends: a config this long or longer must carry it. */
#define CONFIG_MAGIC_END \
  (offsetof(coll_comm_config_t, magic) + sizeof(uint64_t))

coll_status_t coll__config_check(const coll_comm_config_t *cfg,
                                 const char *what) {
  /* The layouts before the magic existed: {size, timeout_ms}, then with
   * name, then with abort_handle. A caller built against one of them has
   * exactly its size; any other size below the magic is not a config. */
  static const size_t old_sizes[] = {
      offsetof(coll_comm_config_t, name),
      offsetof(coll_comm_config_t, abort_handle),
      offsetof(coll_comm_config_t, magic),
  };
  size_t i;
  if (cfg == NULL) return COLL_OK;
  if (cfg->size >= CONFIG_MAGIC_END) {
    if (cfg->magic == COLL_COMM_CONFIG_MAGIC) return COLL_OK;
    return coll__err(COLL_ERR_INVALID_ARG,
                     "%s: the config was not made with COLL_COMM_CONFIG_INIT "
                     "(magic %#llx); start from coll_comm_config_t cfg = "
                     "COLL_COMM_CONFIG_INIT",
                     what, (unsigned long long)cfg->magic);
  }
  for (i = 0; i < sizeof old_sizes / sizeof old_sizes[0]; i++)
    if (cfg->size == old_sizes[i]) return COLL_OK;
  return coll__err(COLL_ERR_INVALID_ARG,
                   "%s: config size %zu is not the size of any "
                   "coll_comm_config_t; start from coll_comm_config_t cfg = "
                   "COLL_COMM_CONFIG_INIT",
                   what, cfg->size);
}

coll_abort_handle_t *coll__config_abort_handle(const coll_comm_config_t *cfg) {
  if (cfg == NULL || cfg->size < offsetof(coll_comm_config_t, abort_handle) +
                                     sizeof(coll_abort_handle_t *))
    return NULL;
  return cfg->abort_handle;
}

coll_status_t coll__comm_new(const coll_backend_ops_t *ops, int rank, int world,
                             const coll_comm_config_t *cfg, coll_comm_t **out) {
  coll_comm_t *c;
  coll_status_t s;
  const char *name = NULL;
  coll_abort_handle_t *adopt = NULL;
  COLL_CHECK(coll__config_check(cfg, "comm config"));
  if (cfg != NULL) {
    if (cfg->size >= offsetof(coll_comm_config_t, name) + sizeof(char *))
      name = cfg->name;
    adopt = coll__config_abort_handle(cfg);
  }
  c = calloc(1, sizeof *c);
  if (c == NULL) return coll__err(COLL_ERR_NO_MEMORY, "comm: out of memory");
  if (adopt != NULL) {
    /* An NCCL init claimed (bound) it when it started; a comm adopts a
     * handle once. */
    atomic_store(&adopt->bound, 1);
    s = atomic_exchange(&adopt->adopted, 1) == 0
            ? COLL_OK
            : coll__abort_handle_bind(adopt, "comm");
    if (s == COLL_OK) coll__abort_handle_ref(adopt);
    c->abort = adopt;
  } else {
    s = coll__abort_handle_new(&c->abort);
    /* Its own from the start, like a group's: a config that hands it to
     * another constructor (a shrink's, an init's) is refused. */
    if (s == COLL_OK) {
      atomic_store(&c->abort->bound, 1);
      atomic_store(&c->abort->adopted, 1);
    }
  }
  if (s != COLL_OK) {
    free(c);
    return s;
  }
  c->ops = ops;
  c->rank = rank;
  c->world = world;
  c->timeout_ms = coll__config_timeout_ms(cfg);
  if (name != NULL)
    snprintf(c->name, sizeof c->name, "%s", name);
  else
    snprintf(c->name, sizeof c->name, "%s rank %d/%d", ops->name, rank, world);
  c->trace = coll__trace_new(rank, world, ops->name, c->name);
  uv_mutex_lock(&c->abort->guard);
  c->abort->comm = c;
  uv_mutex_unlock(&c->abort->guard);
  *out = c;
  return COLL_OK;
}

void coll__comm_free_shell(coll_comm_t *c) {
  if (c == NULL) return;
  uv_mutex_lock(&c->abort->guard);
  if (c->abort->comm == c) c->abort->comm = NULL;
  uv_mutex_unlock(&c->abort->guard);
  coll_abort_handle_release(c->abort);
  coll__trace_release(c->trace);
  free(c);
}

coll_status_t coll_comm_destroy(coll_comm_t *c) {
  coll_abort_handle_t *h;
  int aborted;
  coll_status_t s;
  coll__err_clear();
  if (c == NULL) return COLL_OK;
  h = c->abort;
  /* Unlink under the guard: from here on coll_abort on a handle of this
   * comm is a no-op, so nothing races the backend's destroy. */
  uv_mutex_lock(&h->guard);
  h->comm = NULL;
  atomic_store(&h->retired, 1);
  aborted = atomic_exchange(&h->claimed, 1);
  uv_mutex_unlock(&h->guard);
  s = c->ops->destroy(c, aborted);
  coll__comm_free_shell(c);
  return s;
}

int coll_comm_rank(const coll_comm_t *c) { return c ? c->rank : -1; }
int coll_comm_size(const coll_comm_t *c) { return c ? c->world : -1; }
const char *coll_comm_backend(const coll_comm_t *c) {
  return c ? c->ops->name : NULL;
}
