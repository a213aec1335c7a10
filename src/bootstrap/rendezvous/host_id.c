/* SPDX-License-Identifier: Apache-2.0 */
/* host_id.c: the host identity ranks compare to learn they can share
 * memory (and that the ring orders ranks by), and the numbering of the
 * distinct hosts of a comm. */
#include "bootstrap/rendezvous/host_id.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

coll_host_id_test_hook_t coll__host_id_test_hook = {-1, NULL, NULL, 0};

static void read_boot_id(char *out, size_t cap) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  out[0] = '\0';
  if (f == NULL) return;
  if (fgets(out, (int)cap, f) == NULL) out[0] = '\0';
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
}

static unsigned long long ns_inode(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

void coll__host_id(char out[COLL_HOST_ID_MAX]) {
  char boot[64];
  read_boot_id(boot, sizeof boot);
  /* Without a boot id this process is a host of its own: sharing memory
   * is then never assumed. */
  if (boot[0] == '\0')
    snprintf(boot, sizeof boot, "unknown-pid%d", (int)getpid());
  snprintf(out, COLL_HOST_ID_MAX, "%s/net:%llu/ipc:%llu", boot,
           ns_inode("/proc/self/ns/net"), ns_inode("/proc/self/ns/ipc"));
}

void coll__host_id_of_rank(int rank, char out[COLL_HOST_ID_MAX]) {
  const coll_host_id_test_hook_t *h = &coll__host_id_test_hook;
  if (h->rank == rank && h->id != NULL) {
    snprintf(out, COLL_HOST_ID_MAX, "%s", h->id);
  } else if (h->ids != NULL && rank >= 0 && rank < h->nids &&
             h->ids[rank] != NULL) {
    snprintf(out, COLL_HOST_ID_MAX, "%s", h->ids[rank]);
  } else {
    coll__host_id(out);
  }
}

int coll__host_table_index(coll_host_table_t *tab, const char *id) {
  int i;
  for (i = 0; i < tab->n; i++)
    if (strncmp(tab->ids[i], id, COLL_HOST_ID_MAX) == 0) return i;
  if (tab->n == tab->cap) {
    int cap = tab->cap > 0 ? 2 * tab->cap : 8;
    void *p = realloc(tab->ids, (size_t)cap * sizeof *tab->ids);
    if (p == NULL) {
      coll__err(COLL_ERR_NO_MEMORY, "host table: out of memory");
      return -1;
    }
    tab->ids = p;
    tab->cap = cap;
  }
  snprintf(tab->ids[tab->n], COLL_HOST_ID_MAX, "%s", id);
  return tab->n++;
}

void coll__host_table_free(coll_host_table_t *tab) {
  free(tab->ids);
  tab->ids = NULL;
  tab->n = tab->cap = 0;
}
