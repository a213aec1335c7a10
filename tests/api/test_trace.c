/* SPDX-License-Identifier: Apache-2.0 */
/* test_trace.c: the flight recorder (COLL_TRACE_FILE): an abort writes the
 * comm's last collectives, a timeout writes them with the peer it waited
 * on, SIGUSR1 writes every comm of the process and still reaches the
 * handler installed before, the ring wraps at COLL_TRACE_ENTRIES, nothing
 * is written when it is off, COLL_TRACE_ENTRIES is bounded, and an
 * unwritable or too long path is a WARN, not a crash.
 * Every file is read back with Python's json module (trace_json.py). */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "api_test.h"

#define RUN_TIMEOUT_MS 60000
#define NEVER_MS 600000
#define FILE_WAIT_MS 10000
#define MAX_ENTRIES 64

static t_fail_t g_fails;
static char g_root[256]; /* this run's directory */
static volatile sig_atomic_t g_user_sigusr1;

static void user_handler(int sig) {
  (void)sig;
  g_user_sigusr1++;
}

static void begin(void) { t_fail_init(&g_fails); }
static void end(const char *what) {
  int n = t_fail_report(&g_fails, what);
  t_fail_destroy(&g_fails);
  assert_int_equal(n, 0);
}

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) t_fail(&g_fails, "line %d: %s is false", __LINE__, #cond); \
  } while (0)

/* ---- reading a file back ------------------------------------------------ */

typedef struct t_entry {
  unsigned long long seq, count;
  char op[32], dtype[16], redop[16], root[16], state[16], status[32], peer[16];
} t_entry_t;

typedef struct t_doc {
  int rank, size, n;
  char backend[16], reason[16];
  unsigned max;
  unsigned long long recorded;
  t_entry_t e[MAX_ENTRIES];
} t_doc_t;

/* Parses path with trace_json.py; 0 when it is valid JSON of the right
 * shape (else a failure is recorded). */
static int read_doc(const char *path, t_doc_t *d) {
  char cmd[1024], line[512];
  FILE *p;
  int rc, ok = 1;
  memset(d, 0, sizeof *d);
  snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' 2>&1", COLL_TEST_PYTHON,
           COLL_TEST_TRACE_JSON, path);
  p = popen(cmd, "r");
  if (p == NULL) {
    t_fail(&g_fails, "cannot run %s", cmd);
    return -1;
  }
  while (fgets(line, sizeof line, p) != NULL) {
    t_entry_t *e = &d->e[d->n < MAX_ENTRIES ? d->n : MAX_ENTRIES - 1];
    if (sscanf(line, "doc %d %d %15s %15s %u %llu", &d->rank, &d->size,
               d->backend, d->reason, &d->max, &d->recorded) == 6)
      continue;
    if (sscanf(line, "e %llu %31s %15s %llu %15s %15s %15s %31s %15s", &e->seq,
               e->op, e->dtype, &e->count, e->redop, e->root, e->state,
               e->status, e->peer) == 9) {
      d->n++;
      continue;
    }
    t_fail(&g_fails, "%s: %s", path, line);
    ok = 0;
  }
  rc = pclose(p);
  if (rc != 0 || !ok) {
    t_fail(&g_fails, "%s is not a valid trace (checker exit %d)", path, rc);
    return -1;
  }
  return 0;
}

/* Records a failure unless entry i is (seq, op, dtype, count, redop, root,
 * state, status, peer), each as trace_json.py prints it. */
static void expect_entry(const t_doc_t *d, int i, unsigned long long seq,
                         const char *op, const char *dtype,
                         unsigned long long count, const char *redop,
                         const char *root, const char *state,
                         const char *status, const char *peer) {
  const t_entry_t *e = &d->e[i];
  if (i >= d->n) {
    t_fail(&g_fails, "entry %d missing (%d entries)", i, d->n);
    return;
  }
  if (e->seq != seq || strcmp(e->op, op) != 0 || strcmp(e->dtype, dtype) ||
      e->count != count || strcmp(e->redop, redop) || strcmp(e->root, root) ||
      strcmp(e->state, state) || strcmp(e->status, status) ||
      strcmp(e->peer, peer))
    t_fail(&g_fails,
           "entry %d: got %llu %s %s %llu %s %s %s %s %s, expected %llu %s %s "
           "%llu %s %s %s %s %s",
           i, e->seq, e->op, e->dtype, e->count, e->redop, e->root, e->state,
           e->status, e->peer, seq, op, dtype, count, redop, root, state,
           status, peer);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Waits (bounded) for a file that another thread writes. */
static int wait_file(const char *path) {
  int64_t until = test_now_ms() + FILE_WAIT_MS;
  while (!file_exists(path)) {
    if (test_now_ms() > until) return -1;
    test_sleep_ms(5);
  }
  return 0;
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  int n = 0;
  if (d == NULL) return -1;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* A fresh directory for one case, and COLL_TRACE_FILE = dir/pattern
 * (pattern NULL: unset). entries < 0 leaves COLL_TRACE_ENTRIES unset. */
static void setup_case(const char *name, const char *pattern, int entries,
                       char *dir, size_t cap) {
  char v[512];
  snprintf(dir, cap, "%s/%s", g_root, name);
  if (mkdir(dir, 0700) != 0) t_fail(&g_fails, "mkdir %s failed", dir);
  if (pattern != NULL) {
    /* A path that does not fit is a failure, not a silently cut name. */
    if (snprintf(v, sizeof v, "%s/%s", dir, pattern) >= (int)sizeof v)
      t_fail(&g_fails, "trace path %s/%s is too long", dir, pattern);
    setenv("COLL_TRACE_FILE", v, 1);
  } else {
    unsetenv("COLL_TRACE_FILE");
  }
  if (entries >= 0) {
    snprintf(v, sizeof v, "%d", entries);
    setenv("COLL_TRACE_ENTRIES", v, 1);
  } else {
    unsetenv("COLL_TRACE_ENTRIES");
  }
}

/* ---- an abort after a mix of collectives -------------------------------- */

typedef struct mix {
  coll_comm_t *comms[2];
  coll_abort_handle_t *h0;
  atomic_int entered;
  coll_status_t stuck;
} mix_t;

static void mix_rank(int rank, int world, void *arg) {
  mix_t *m = arg;
  float f[100];
  int32_t i[7] = {0};
  uint8_t u[5] = {0}, ug[10];
  double d[3] = {0}, dr[3];
  coll_comm_t *c;
  (void)world;
  if (rank == 2) { /* the aborter */
    while (atomic_load(&m->entered) == 0) test_sleep_ms(1);
    test_sleep_ms(200); /* let rank 0 block; the result does not depend on it */
    if (coll_abort(m->h0) != COLL_OK) t_fail(&g_fails, "abort failed");
    return;
  }
  c = m->comms[rank];
  memset(f, 0, sizeof f);
  t_expect(&g_fails, coll_allreduce(c, f, f, 100, COLL_F32, COLL_SUM, NULL),
           COLL_OK, "allreduce on rank %d", rank);
  t_expect(&g_fails, coll_broadcast(c, i, 7, COLL_I32, 1, NULL), COLL_OK,
           "broadcast on rank %d", rank);
  t_expect(&g_fails, coll_allgather(c, u, ug, 5, COLL_U8, NULL), COLL_OK,
           "allgather on rank %d", rank);
  t_expect(&g_fails, coll_barrier(c), COLL_OK, "barrier on rank %d", rank);
  t_expect(&g_fails, coll_reduce(c, d, dr, 3, COLL_F64, COLL_MAX, 0, NULL),
           COLL_OK, "reduce on rank %d", rank);
  if (rank == 0) {
    /* Rank 1 never sends: only the abort ends this. */
    atomic_store(&m->entered, 1);
    m->stuck = coll_recv(c, f, 4, COLL_F32, 1, 9, NULL);
  }
}

static void test_abort_writes_last_entries(void **state) {
  char dir[512], path[600];
  mix_t m;
  t_doc_t d;
  (void)state;
  begin();
  setup_case("abort", "abort-%r.json", -1, dir, sizeof dir);
  memset(&m, 0, sizeof m);
  atomic_init(&m.entered, 0);
  assert_int_equal(test_inproc_comms(2, NEVER_MS, m.comms), 0);
  assert_int_equal(coll_comm_abort_handle(m.comms[0], &m.h0), COLL_OK);
  test_run_ranks(3, mix_rank, &m, RUN_TIMEOUT_MS, "mix, then abort");
  CHECK(m.stuck == COLL_ERR_ABORTED);
  snprintf(path, sizeof path, "%s/abort-0.json", dir);
  if (read_doc(path, &d) == 0) {
    CHECK(d.rank == 0);
    CHECK(d.size == 2);
    CHECK(strcmp(d.backend, "cpu") == 0);
    CHECK(strcmp(d.reason, "abort") == 0);
    CHECK(d.max == 256);
    CHECK(d.recorded == 6);
    CHECK(d.n == 6);
    expect_entry(&d, 0, 1, "allreduce", "f32", 100, "sum", "-", "done", "OK",
                 "-");
    expect_entry(&d, 1, 2, "broadcast", "i32", 7, "-", "1", "done", "OK", "-");
    expect_entry(&d, 2, 3, "allgather", "u8", 5, "-", "-", "done", "OK", "-");
    expect_entry(&d, 3, 4, "barrier", "-", 0, "-", "-", "done", "OK", "-");
    expect_entry(&d, 4, 5, "reduce", "f64", 3, "max", "0", "done", "OK", "-");
    /* Written before the backend failed it: still in flight. */
    expect_entry(&d, 5, 6, "recv", "f32", 4, "-", "1", "in_flight", "-", "-");
  }
  /* Rank 1's comm was not aborted. */
  snprintf(path, sizeof path, "%s/abort-1.json", dir);
  CHECK(!file_exists(path));
  test_destroy_comms(2, m.comms);
  coll_abort_handle_release(m.h0);
  end("an abort writes the last collectives");
}

/* ---- a timeout --------------------------------------------------------- */

typedef struct tmo {
  coll_comm_t *comms[2];
  coll_status_t st;
} tmo_t;

static void timeout_rank(int rank, int world, void *arg) {
  tmo_t *t = arg;
  float f[4] = {1, 2, 3, 4};
  (void)world;
  /* Rank 1 never joins. */
  if (rank == 0)
    t->st = coll_allreduce(t->comms[0], f, f, 4, COLL_F32, COLL_SUM, NULL);
}

static void test_timeout_writes_file(void **state) {
  char dir[512], path[600];
  tmo_t t;
  t_doc_t d;
  (void)state;
  begin();
  setup_case("timeout", "timeout-%r.json", -1, dir, sizeof dir);
  memset(&t, 0, sizeof t);
  assert_int_equal(test_inproc_comms(2, 300, t.comms), 0);
  test_run_ranks(2, timeout_rank, &t, RUN_TIMEOUT_MS, "timeout");
  CHECK(t.st == COLL_ERR_TIMEOUT);
  snprintf(path, sizeof path, "%s/timeout-0.json", dir);
  if (read_doc(path, &d) == 0) {
    CHECK(strcmp(d.reason, "timeout") == 0);
    CHECK(d.n == 1);
    /* It waited on rank 1, the peer that never came. */
    expect_entry(&d, 0, 1, "allreduce", "f32", 4, "sum", "-", "done",
                 "ERR_TIMEOUT", "1");
  }
  snprintf(path, sizeof path, "%s/timeout-1.json", dir);
  CHECK(!file_exists(path));
  test_destroy_comms(2, t.comms);
  end("a timeout writes the file");
}

/* ---- SIGUSR1 ----------------------------------------------------------- */

static void sig_rank(int rank, int world, void *arg) {
  coll_comm_t **comms = arg;
  double x = rank;
  (void)world;
  t_expect(&g_fails,
           coll_allreduce(comms[rank], &x, &x, 1, COLL_F64, COLL_SUM, NULL),
           COLL_OK, "allreduce on rank %d", rank);
  t_expect(&g_fails, coll_barrier(comms[rank]), COLL_OK, "barrier on rank %d",
           rank);
}

static void test_sigusr1_dumps_every_comm(void **state) {
  char dir[512], path[600];
  coll_comm_t *comms[3];
  sig_atomic_t before;
  t_doc_t d;
  int r;
  (void)state;
  begin();
  setup_case("sigusr1", "sig-%p-%r.json", -1, dir, sizeof dir);
  assert_int_equal(test_inproc_comms(3, NEVER_MS, comms), 0);
  test_run_ranks(3, sig_rank, comms, RUN_TIMEOUT_MS, "collectives");
  before = g_user_sigusr1;
  assert_int_equal(kill(getpid(), SIGUSR1), 0);
  for (r = 0; r < 3; r++) {
    snprintf(path, sizeof path, "%s/sig-%ld-%d.json", dir, (long)getpid(), r);
    if (wait_file(path) != 0) {
      t_fail(&g_fails, "no %s within %d ms of SIGUSR1", path, FILE_WAIT_MS);
      continue;
    }
    if (read_doc(path, &d) != 0) continue;
    CHECK(strcmp(d.reason, "SIGUSR1") == 0);
    CHECK(d.rank == r);
    CHECK(d.size == 3);
    CHECK(d.n == 2);
    expect_entry(&d, 0, 1, "allreduce", "f64", 1, "sum", "-", "done", "OK",
                 "-");
    expect_entry(&d, 1, 2, "barrier", "-", 0, "-", "-", "done", "OK", "-");
  }
  /* The handler the program had before still ran. */
  CHECK(g_user_sigusr1 == before + 1);
  test_destroy_comms(3, comms);
  end("SIGUSR1 dumps every comm");
}

/* ---- the ring wraps ---------------------------------------------------- */

static void test_ring_wraps(void **state) {
  char dir[512], path[600];
  coll_transport_t *ts[1];
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_comm_t *c = NULL;
  coll_abort_handle_t *h = NULL;
  coll_request_t *req = NULL;
  float buf[16];
  t_doc_t d;
  int i;
  (void)state;
  begin();
  setup_case("wrap", "wrap-%r.json", 4, dir, sizeof dir);
  /* A name the JSON must escape. */
  cfg.name = "a \"quoted\" \\ name\n";
  assert_int_equal(coll_inproc_create(1, ts), COLL_OK);
  assert_int_equal(coll_comm_create(ts[0], &cfg, &c), COLL_OK);
  memset(buf, 0, sizeof buf);
  for (i = 1; i <= 9; i++)
    CHECK(coll_allreduce(c, buf, buf, (size_t)i, COLL_F32, COLL_SUM, NULL) ==
          COLL_OK);
  /* The tenth through coll_wait. */
  CHECK(coll_iallreduce(c, buf, buf, 10, COLL_F32, COLL_MIN, NULL, &req) ==
        COLL_OK);
  CHECK(req != NULL && coll_wait(req) == COLL_OK);
  assert_int_equal(coll_comm_abort_handle(c, &h), COLL_OK);
  CHECK(coll_abort(h) == COLL_OK);
  snprintf(path, sizeof path, "%s/wrap-0.json", dir);
  if (read_doc(path, &d) == 0) {
    CHECK(d.max == 4);
    CHECK(d.recorded == 10);
    CHECK(d.n == 4);
    for (i = 0; i < 3; i++)
      expect_entry(&d, i, (unsigned long long)(7 + i), "allreduce", "f32",
                   (unsigned long long)(7 + i), "sum", "-", "done", "OK", "-");
    expect_entry(&d, 3, 10, "allreduce", "f32", 10, "min", "-", "done", "OK",
                 "-");
  }
  CHECK(coll_comm_destroy(c) == COLL_OK);
  coll_abort_handle_release(h);
  end("the ring wraps");
}

/* ---- off --------------------------------------------------------------- */

static void abort_one_comm(void) {
  coll_comm_t *c[1];
  coll_abort_handle_t *h = NULL;
  float x = 1;
  if (test_inproc_comms(1, NEVER_MS, c) != 0) {
    t_fail(&g_fails, "cannot create a comm");
    return;
  }
  CHECK(coll_allreduce(c[0], &x, &x, 1, COLL_F32, COLL_SUM, NULL) == COLL_OK);
  CHECK(coll_comm_abort_handle(c[0], &h) == COLL_OK);
  CHECK(coll_abort(h) == COLL_OK);
  CHECK(coll_allreduce(c[0], &x, &x, 1, COLL_F32, COLL_SUM, NULL) ==
        COLL_ERR_ABORTED);
  CHECK(coll_comm_destroy(c[0]) == COLL_OK);
  coll_abort_handle_release(h);
}

static void test_off_writes_nothing(void **state) {
  char dir[512], dir2[512];
  (void)state;
  begin();
  /* COLL_TRACE_FILE unset. */
  setup_case("off_unset", NULL, 8, dir, sizeof dir);
  abort_one_comm();
  CHECK(count_files(dir) == 0);
  /* COLL_TRACE_ENTRIES=0. */
  setup_case("off_zero", "off-%r.json", 0, dir2, sizeof dir2);
  abort_one_comm();
  CHECK(count_files(dir2) == 0);
  end("off writes nothing");
}

/* Runs fn with stderr caught in a file; returns what it wrote. */
static void with_stderr(void (*fn)(void), char *text, size_t cap) {
  char log[600];
  int fd, saved;
  ssize_t n;
  snprintf(log, sizeof log, "%s/stderr.txt", g_root);
  fflush(stderr);
  saved = dup(2);
  fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (saved < 0 || fd < 0) {
    t_fail(&g_fails, "cannot catch stderr in %s", log);
    text[0] = '\0';
    return;
  }
  dup2(fd, 2);
  close(fd);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fd = open(log, O_RDONLY);
  n = fd >= 0 ? read(fd, text, cap - 1) : -1;
  if (fd >= 0) close(fd);
  text[n > 0 ? n : 0] = '\0';
}

/* ---- an unwritable path ------------------------------------------------ */

static void test_unwritable_path_warns(void **state) {
  char dir[512], text[4096];
  (void)state;
  begin();
  setup_case("unwritable", "missing/sub-%r.json", -1, dir, sizeof dir);
  /* The WARN goes to stderr. */
  with_stderr(abort_one_comm, text, sizeof text);
  if (strstr(text, "WARN") == NULL ||
      strstr(text, "flight recorder: cannot write") == NULL ||
      strstr(text, "missing/sub-0.json") == NULL)
    t_fail(&g_fails, "no WARN naming the path; stderr was: %s", text);
  CHECK(count_files(dir) == 0);
  end("an unwritable path warns");
}

/* ---- COLL_TRACE_ENTRIES out of bounds, and a path too long ------------ */

/* The ring size a comm made now gets, from its abort file. */
static unsigned entries_max_now(const char *dir) {
  char path[600];
  t_doc_t d;
  abort_one_comm();
  snprintf(path, sizeof path, "%s/b-0.json", dir);
  if (read_doc(path, &d) != 0) return 0;
  remove(path);
  return d.max;
}

/* A comm made now is refused, naming COLL_TRACE_ENTRIES='v' and its
 * bounds. */
static void entries_refused(const char *v) {
  coll_comm_t *c[1] = {NULL};
  char want[64];
  setenv("COLL_TRACE_ENTRIES", v, 1);
  snprintf(want, sizeof want, "COLL_TRACE_ENTRIES='%s'", v);
  if (test_inproc_comms(1, NEVER_MS, c) == 0) {
    t_fail(&g_fails, "COLL_TRACE_ENTRIES=%s: a comm was made", v);
    test_destroy_comms(1, c);
    return;
  }
  if (strstr(coll_last_error(), want) == NULL ||
      strstr(coll_last_error(), "from 0 to 65536") == NULL)
    t_fail(&g_fails, "COLL_TRACE_ENTRIES=%s: \"%s\"", v, coll_last_error());
}

static void test_entries_bounds_and_long_path(void **state) {
  char dir[512], text[4096], *longname;
  (void)state;
  begin();
  setup_case("bounds", "b-%r.json", -1, dir, sizeof dir);
  /* Out of bounds or not a number: comm creation refuses it. */
  entries_refused("99999999");
  entries_refused("65537");
  entries_refused("-3");
  entries_refused("many");
  setenv("COLL_TRACE_ENTRIES", "65536", 1);
  CHECK(entries_max_now(dir) == 65536); /* the bound itself */
  unsetenv("COLL_TRACE_ENTRIES");
  CHECK(entries_max_now(dir) == 256); /* the default */
  /* A pattern whose expansion does not fit a path: a WARN, no file. */
  longname = malloc(5000);
  assert_non_null(longname);
  memset(longname, 'x', 4999);
  longname[4999] = '\0';
  setenv("COLL_TRACE_FILE", longname, 1);
  with_stderr(abort_one_comm, text, sizeof text);
  if (strstr(text, "too long") == NULL)
    t_fail(&g_fails, "no WARN for a path too long; stderr: %s", text);
  free(longname);
  end("entries out of bounds, a path too long");
}

static int remove_tree(const char *path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  return system(cmd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_abort_writes_last_entries),
      cmocka_unit_test(test_timeout_writes_file),
      cmocka_unit_test(test_sigusr1_dumps_every_comm),
      cmocka_unit_test(test_ring_wraps),
      cmocka_unit_test(test_off_writes_nothing),
      cmocka_unit_test(test_unwritable_path_warns),
      cmocka_unit_test(test_entries_bounds_and_long_path),
  };
  struct sigaction sa;
  const char *tmp = getenv("TMPDIR");
  int rc;
  /* A program's own SIGUSR1 handler, there before libcoll's: it must keep
   * running. */
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = user_handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  snprintf(g_root, sizeof g_root, "%s/coll-trace-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(g_root) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0) remove_tree(g_root);
  return rc;
}
