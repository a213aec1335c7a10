/* SPDX-License-Identifier: Apache-2.0 */
/* shm_test.c: forked rank processes over the shared-memory transport. */
#include "shm_test.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "transport/shm/shm.h"

const char *shm_test_job_id[TT_MAX_RANKS];
int64_t shm_test_setup_ms;
int shm_test_fn_owns_transport;
const int *shm_test_names;
int shm_test_name_world;

typedef struct file_rdv {
  const char *dir;
} file_rdv_t;

static coll_status_t file_publish(void *ctx, int rank, const char *addr) {
  const file_rdv_t *r = ctx;
  char tmp[256], path[256];
  FILE *f;
  snprintf(tmp, sizeof tmp, "%s/addr.%d.tmp", r->dir, rank);
  snprintf(path, sizeof path, "%s/addr.%d", r->dir, rank);
  f = fopen(tmp, "w");
  if (f == NULL) return coll__err(COLL_ERR_SYSTEM, "cannot write %s", tmp);
  fputs(addr, f);
  fclose(f);
  return rename(tmp, path) == 0
             ? COLL_OK
             : coll__err(COLL_ERR_SYSTEM, "cannot rename %s", tmp);
}

static coll_status_t file_lookup(void *ctx, int rank, char *addr, size_t cap,
                                 int64_t deadline_ms) {
  const file_rdv_t *r = ctx;
  char path[256];
  snprintf(path, sizeof path, "%s/addr.%d", r->dir, rank);
  for (;;) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      size_t n = fread(addr, 1, cap - 1, f);
      fclose(f);
      addr[n] = '\0';
      return COLL_OK;
    }
    if (coll__now_ms() >= deadline_ms)
      return coll__err(COLL_ERR_TIMEOUT, "rank %d never published", rank);
    test_sleep_ms(1);
  }
}

static void child(int rank, int world, const char *dir, shm_rank_fn fn,
                  void *arg, tt_result_t *res, void (*setup)(int)) {
  file_rdv_t fr = {dir};
  coll_shm_rdv_t rdv = {&fr, file_publish, file_lookup, NULL};
  coll_shm_opts_t o = {
      .rank = rank,
      .world = world,
      .job_id =
          shm_test_job_id[rank] != NULL ? shm_test_job_id[rank] : "shm-test",
      .token = NULL,
      .deadline_ms = coll__now_ms() +
                     (shm_test_setup_ms > 0 ? shm_test_setup_ms : TT_WAIT_MS),
      .names = shm_test_names,
      .name_world = shm_test_name_world};
  coll_transport_t *t = NULL;
  coll_status_t s;
  if (setup != NULL) setup(rank);
  s = coll__shm_transport_create(&o, &rdv, &t);
  if (s != COLL_OK) {
    tt_fail(res, "create: %s: %s", coll_status_name(s), coll_last_error());
    _exit(2); /* a failed setup, told apart from a failed body */
  }
  fn(t, rank, world, res, arg);
  if (!shm_test_fn_owns_transport) coll_transport_destroy(t);
  _exit(res->failed ? 1 : 0);
}

int shm_run(int world, shm_rank_fn fn, void *arg, tt_result_t *res, int *status,
            void (*setup)(int rank)) {
  char dir[] = "/tmp/coll-shm-test-XXXXXX";
  pid_t pids[TT_MAX_RANKS];
  tt_result_t *shared;
  int64_t end = test_now_ms() + SHM_RUN_MS;
  int bad = 0, left = world;
  if (world > TT_MAX_RANKS || mkdtemp(dir) == NULL) return -1;
  shared = mmap(NULL, sizeof *shared * TT_MAX_RANKS, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return -1;
  memset(shared, 0, sizeof *shared * TT_MAX_RANKS);
  fflush(NULL);
  for (int r = 0; r < world; r++) {
    pids[r] = fork();
    if (pids[r] == 0) child(r, world, dir, fn, arg, &shared[r], setup);
    if (pids[r] < 0) return -1;
  }
  while (left > 0) {
    for (int r = 0; r < world; r++) {
      int st;
      if (pids[r] <= 0 || waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      if (status != NULL)
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
      pids[r] = 0;
      left--;
    }
    if (left > 0 && test_now_ms() > end) {
      for (int r = 0; r < world; r++)
        if (pids[r] > 0) {
          fprintf(stderr, "HANG: shm rank %d still running after %d ms\n", r,
                  SHM_RUN_MS);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
          if (status != NULL) status[r] = -1;
          pids[r] = 0;
          left--;
        }
      bad = 1;
    }
    if (left > 0) test_sleep_ms(2);
  }
  memcpy(res, shared, sizeof *res * (size_t)world);
  munmap(shared, sizeof *shared * TT_MAX_RANKS);
  for (int r = 0; r < world; r++) {
    char p[300];
    snprintf(p, sizeof p, "%s/addr.%d", dir, r);
    unlink(p);
  }
  rmdir(dir);
  return bad ? 1 : 0;
}

static int foreign(const char *name) {
  /* Open MPI's shared-memory segments, from tests that may run beside. */
  return strstr(name, "vader") != NULL || strstr(name, "sm_segment") != NULL ||
         strstr(name, "ompi") != NULL || strstr(name, "pmix") != NULL;
}

char *shm_devshm_list(void) {
  DIR *d = opendir("/dev/shm");
  size_t cap = 4096, len = 0;
  char *out = calloc(1, cap);
  struct dirent *e;
  if (out == NULL) return NULL;
  out[0] = '\n';
  len = 1;
  if (d == NULL) return out;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (e->d_name[0] == '.' || foreign(e->d_name)) continue;
    if (len + n + 2 > cap) {
      char *grown = realloc(out, cap * 2 + n);
      if (grown == NULL) break;
      out = grown;
      cap = cap * 2 + n;
    }
    memcpy(out + len, e->d_name, n);
    len += n;
    out[len++] = '\n';
    out[len] = '\0';
  }
  closedir(d);
  return out;
}

const char *shm_devshm_new(const char *before, const char *after) {
  static char name[256];
  const char *p = after + 1;
  while (*p != '\0') {
    const char *nl = strchr(p, '\n');
    size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
    char key[260];
    snprintf(key, sizeof key, "\n%.*s\n", (int)(n < 250 ? n : 250), p);
    if (n > 0 && strstr(before, key) == NULL) {
      snprintf(name, sizeof name, "%.*s", (int)(n < 250 ? n : 250), p);
      return name;
    }
    p += n + (nl != NULL);
  }
  return NULL;
}
