/* SPDX-License-Identifier: Apache-2.0 */
/* test_setup_mistakes.c: start-up mistakes are explained in seconds, not
 * at the timeout. Rank processes (coll_comm_init_env, forked) with their
 * log in a file each and the warning period shortened (core/setup_warn.h):
 *   - ranks given different ports: every rank's WARN says what it sees
 *     (the one that cannot reach the store says why);
 *   - a rank that never starts: every rank's WARN names it;
 *   - ranks given different world sizes: every rank fails within a
 *     warning period with one text naming them;
 *   - a rank's listener nobody can reach: the mesh's WARNs name the link;
 *   - a rank with another token (or none): every rank returns
 *     COLL_ERR_PROTOCOL naming the token mismatch, and the others' WARNs
 *     say what the store refused. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "boot_test.h"
#include "bootstrap/rendezvous/rendezvous.h"
#include "core/setup_warn.h"
#include "test_util.h"

#define WORLD_MAX 4
#define WARN_MS 300 /* the warning period these tests run with */

typedef struct rank_plan {
  int world;         /* WORLD_SIZE; 0: this rank does not run */
  int port;          /* MASTER_PORT */
  const char *token; /* COLL_AUTH_TOKEN; NULL: unset */
} rank_plan_t;

/* Shared with the children: what each rank returned. */
typedef struct outcome {
  coll_status_t s[WORLD_MAX];
  char why[WORLD_MAX][COLL_ERRMSG_MAX];
  int64_t ms[WORLD_MAX];
} outcome_t;

typedef struct job {
  rank_plan_t plan[WORLD_MAX];
  int64_t timeout_ms;
  char logs[WORLD_MAX][64]; /* each rank's stderr */
  outcome_t *out;           /* shared memory */
} job_t;

typedef struct child_arg {
  job_t *j;
  int rank;
} child_arg_t;

static int child(void *p) {
  child_arg_t *a = p;
  job_t *j = a->j;
  const rank_plan_t *pl = &j->plan[a->rank];
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_comm_t *c = NULL;
  int fd = open(j->logs[a->rank], O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int64_t t0 = test_now_ms();
  char v[32];
  if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) return 3;
  close(fd);
  bt_launch_env(a->rank, pl->world, pl->port);
  snprintf(v, sizeof v, "%lld", (long long)j->timeout_ms);
  setenv("COLL_TIMEOUT_MS", v, 1);
  if (pl->token != NULL)
    setenv("COLL_AUTH_TOKEN", pl->token, 1);
  else
    unsetenv("COLL_AUTH_TOKEN");
  j->out->s[a->rank] = coll_comm_init_env(&cfg, &c);
  j->out->ms[a->rank] = test_now_ms() - t0;
  snprintf(j->out->why[a->rank], COLL_ERRMSG_MAX, "%s", coll_last_error());
  coll_comm_destroy(c);
  return 0;
}

static job_t *new_job(int64_t timeout_ms) {
  job_t *j = calloc(1, sizeof *j);
  int r;
  assert_non_null(j);
  j->timeout_ms = timeout_ms;
  j->out = mmap(NULL, sizeof *j->out, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(j->out != MAP_FAILED);
  memset(j->out, 0, sizeof *j->out);
  for (r = 0; r < WORLD_MAX; r++)
    snprintf(j->logs[r], sizeof j->logs[r], "/tmp/coll_mistake.%d.%d",
             (int)getpid(), r);
  return j;
}

/* Runs the ranks whose plan has a world; prints what each returned and
 * logged. */
static void run(job_t *j) {
  child_arg_t args[WORLD_MAX];
  pid_t pids[WORLD_MAX] = {0};
  int r;
  atomic_store(&coll__setup_warn_ms, WARN_MS);
  for (r = 0; r < WORLD_MAX; r++) {
    if (j->plan[r].world == 0) continue;
    args[r] = (child_arg_t){j, r};
    pids[r] = bt_fork(child, &args[r]);
    assert_true(pids[r] > 0);
  }
  for (r = 0; r < WORLD_MAX; r++)
    if (pids[r] > 0 && bt_wait_child(pids[r], j->timeout_ms + 30000) != 0)
      fail_msg("rank %d did not end cleanly", r);
  atomic_store(&coll__setup_warn_ms, COLL_SETUP_WARN_MS);
  for (r = 0; r < WORLD_MAX; r++) {
    FILE *f;
    char line[1024];
    if (j->plan[r].world == 0) continue;
    printf("rank %d: %s after %lld ms: %s\n", r, coll_status_name(j->out->s[r]),
           (long long)j->out->ms[r], j->out->why[r]);
    f = fopen(j->logs[r], "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL && r >= 0)
      if (strstr(line, "setup waiting") != NULL) {
        printf("  rank %d's first warning: %s", r, line);
        break;
      }
    if (f != NULL) fclose(f);
  }
}

/* The log of rank r as one string (malloc'd). */
static char *log_of(const job_t *j, int r) {
  FILE *f = fopen(j->logs[r], "r");
  char *buf = calloc(1, 1 << 20);
  size_t n;
  assert_non_null(f);
  assert_non_null(buf);
  n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void log_must_contain(const job_t *j, int r, const char *part) {
  char *l = log_of(j, r);
  if (strstr(l, part) == NULL)
    fail_msg("rank %d's log lacks '%s':\n%s", r, part, l);
  free(l);
}

static void free_job(job_t *j) {
  int r;
  for (r = 0; r < WORLD_MAX; r++) unlink(j->logs[r]);
  munmap(j->out, sizeof *j->out);
  free(j);
}

/* Rank 1 was given another MASTER_PORT (one that refuses): it says it
 * cannot reach the store there and why; rank 0 says rank 1 has not
 * joined. Both long before their timeout. */
static void test_different_ports(void **state) {
  job_t *j = new_job(3000);
  char want[160];
  int dead_fd, dead = bt_dead_port("127.0.0.1", &dead_fd);
  (void)state;
  assert_true(dead > 0);
  j->plan[0] = (rank_plan_t){2, bt_free_port("127.0.0.1"), "t"};
  j->plan[1] = (rank_plan_t){2, dead, "t"};
  run(j);
  close(dead_fd);
  snprintf(want, sizeof want,
           " s: cannot reach the store at 127.0.0.1:%d "
           "(MASTER_ADDR=127.0.0.1, MASTER_PORT=%d): ",
           dead, dead);
  log_must_contain(j, 1, "rank 1: setup waiting 0.");
  log_must_contain(j, 1, want);
  log_must_contain(j, 1,
                   "onnection refused; check MASTER_ADDR/MASTER_PORT/"
                   "WORLD_SIZE on every rank");
  log_must_contain(j, 0, "rank 0: setup waiting 0.");
  log_must_contain(j, 0, " s: 1 of 2 ranks have not joined the store at ");
  log_must_contain(j, 0, ": rank 1; check MASTER_ADDR/MASTER_PORT/WORLD_SIZE");
  assert_int_equal(j->out->s[0], COLL_ERR_TIMEOUT);
  assert_int_equal(j->out->s[1], COLL_ERR_TIMEOUT);
  free_job(j);
}

/* Rank 2 of 3 never starts: both others name it while they wait. */
static void test_missing_rank(void **state) {
  job_t *j = new_job(3000);
  int port = bt_free_port("127.0.0.1");
  (void)state;
  j->plan[0] = (rank_plan_t){3, port, "t"};
  j->plan[1] = (rank_plan_t){3, port, "t"};
  run(j);
  log_must_contain(j, 0, "1 of 3 ranks have not joined the store at ");
  log_must_contain(j, 0, ": rank 2; check MASTER_ADDR");
  log_must_contain(j, 1, " s: joined the store at ");
  log_must_contain(j, 1, "but 1 of 3 ranks have not: rank 2; check ");
  assert_int_equal(j->out->s[0], COLL_ERR_TIMEOUT);
  assert_int_equal(j->out->s[1], COLL_ERR_TIMEOUT);
  bt_must_contain(j->out->why[1], "1 of 3 ranks did not join within");
  free_job(j);
}

/* Rank 0 was given a world of 3, rank 1 one of 2: at rank 0's first
 * warning both fail with one text naming the sizes, within seconds of a
 * 20 s timeout. */
static void test_world_size_smaller(void **state) {
  static const int both[2] = {0, 1};
  job_t *j = new_job(20000);
  int port = bt_free_port("127.0.0.1");
  (void)state;
  j->plan[0] = (rank_plan_t){3, port, "t"};
  j->plan[1] = (rank_plan_t){2, port, "t"};
  run(j);
  bt_expect_same_failure(j->out->s, (const char(*)[COLL_ERRMSG_MAX])j->out->why,
                         both, 2, COLL_ERR_INVALID_ARG);
  bt_must_contain(j->out->why[0],
                  "ranks disagree on the world size (WORLD_SIZE, or the world "
                  "given at init): rank 1 has 2, rank 0 has 3");
  assert_true(j->out->ms[0] < 10000 && j->out->ms[1] < 10000);
  free_job(j);
}

/* Rank 0 was given a world of 2, rank 1 one of 3: rank 0 judges as soon
 * as both joined, and both fail at once with one text. */
static void test_world_size_larger(void **state) {
  static const int both[2] = {0, 1};
  job_t *j = new_job(20000);
  int port = bt_free_port("127.0.0.1");
  (void)state;
  j->plan[0] = (rank_plan_t){2, port, "t"};
  j->plan[1] = (rank_plan_t){3, port, "t"};
  run(j);
  bt_expect_same_failure(j->out->s, (const char(*)[COLL_ERRMSG_MAX])j->out->why,
                         both, 2, COLL_ERR_INVALID_ARG);
  bt_must_contain(j->out->why[0], "rank 1 has 3, rank 0 has 2");
  assert_true(j->out->ms[0] < 10000 && j->out->ms[1] < 10000);
  free_job(j);
}

/* Ranks 0 and 1 of a job of 2, and a rank 2 given a world of 3: nobody
 * waits for rank 2, so it learns from rank 0's verdict that its world
 * differs, while the job of 2 goes on. Threads (coll_tcp_create); rank 0
 * holds its setup until rank 2 returned, so the store is still there. */
typedef struct beyond {
  int port;
  coll_status_t s[3];
  char why[3][COLL_ERRMSG_MAX];
  atomic_int rank2_done;
} beyond_t;

static beyond_t *the_beyond;

static void hold_rank0(int rank, const char *phase) {
  int64_t until = test_now_ms() + 20000;
  if (rank != 0 || strcmp(phase, "meshed") != 0) return;
  while (!atomic_load(&the_beyond->rank2_done) && test_now_ms() < until)
    test_sleep_ms(5);
}

static void beyond_rank(int rank, int world, void *arg) {
  beyond_t *b = arg;
  coll_tcp_config_t cfg = COLL_TCP_CONFIG_INIT;
  coll_transport_t *t = NULL;
  (void)world;
  cfg.rank = rank;
  cfg.world = rank == 2 ? 3 : 2;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = b->port;
  cfg.timeout_ms = 20000;
  b->s[rank] = coll_tcp_create(&cfg, &t);
  snprintf(b->why[rank], sizeof b->why[rank], "%s", coll_last_error());
  if (rank == 2) atomic_store(&b->rank2_done, 1);
  if (t != NULL) coll_transport_destroy(t);
}

static void test_world_size_beyond(void **state) {
  beyond_t b;
  (void)state;
  memset(&b, 0, sizeof b);
  b.port = bt_free_port("127.0.0.1");
  the_beyond = &b;
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  coll__rdv_test_hooks.phase = hold_rank0;
  test_run_ranks(3, beyond_rank, &b, 60000, "a rank beyond the world");
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  printf("rank 2: %s\n", b.why[2]);
  assert_int_equal(b.s[0], COLL_OK);
  assert_int_equal(b.s[1], COLL_OK);
  assert_int_equal(b.s[2], COLL_ERR_INVALID_ARG);
  bt_must_contain(b.why[2],
                  "rank 0 was given a world of 2 ranks, this rank (2) a world "
                  "of 3 (WORLD_SIZE)");
}

/* Rank 1 publishes a port nobody listens on, so rank 2 cannot connect to
 * it: both name the missing connection while the mesh waits (the mesh
 * looks at its schedule at least once a second). */
static void test_listener_unreachable(void **state) {
  job_t *j = new_job(3000);
  int port = bt_free_port("127.0.0.1"), dead_fd, r;
  char bogus[64];
  (void)state;
  snprintf(bogus, sizeof bogus, "127.0.0.1:%d",
           bt_dead_port("127.0.0.1", &dead_fd));
  assert_true(dead_fd >= 0);
  for (r = 0; r < 3; r++) j->plan[r] = (rank_plan_t){3, port, "t"};
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  coll__rdv_test_hooks.publish_rank = 1;
  coll__rdv_test_hooks.publish_addr = bogus;
  /* The TCP mesh, not the shared memory that ranks on one host get. */
  setenv("COLL_TRANSPORT", "tcp", 1);
  run(j);
  unsetenv("COLL_TRANSPORT");
  coll__rdv_test_hooks = (coll_rdv_test_hooks_t)COLL_RDV_TEST_HOOKS_OFF;
  close(dead_fd);
  log_must_contain(j, 2, "tcp: rank 2: mesh waiting ");
  log_must_contain(j, 2, "no connection to rank 1 (rank 1 at 127.0.0.1:");
  log_must_contain(j, 1, "tcp: rank 1: mesh waiting ");
  log_must_contain(j, 1, "no connection from rank 2 (rank 2: ");
  for (r = 0; r < 3; r++) assert_int_equal(j->out->s[r], COLL_ERR_TIMEOUT);
  free_job(j);
}

/* Rank 2's token differs: the store refuses it, and every rank returns
 * COLL_ERR_PROTOCOL with a text that names the token mismatch (the others
 * at their timeout, naming rank 2 and the address the store refused);
 * their warnings say so meanwhile. */
static void token_differs(const char *token2, const char *says) {
  static const int others[2] = {0, 1};
  job_t *j = new_job(3000);
  int port = bt_free_port("127.0.0.1"), r;
  j->plan[0] = (rank_plan_t){3, port, "right"};
  j->plan[1] = (rank_plan_t){3, port, "right"};
  j->plan[2] = (rank_plan_t){3, port, token2};
  run(j);
  for (r = 0; r < 3; r++) {
    assert_int_equal(j->out->s[r], COLL_ERR_PROTOCOL);
    bt_must_contain(j->out->why[r], says);
  }
  bt_expect_same_failure(j->out->s, (const char(*)[COLL_ERRMSG_MAX])j->out->why,
                         others, 2, COLL_ERR_PROTOCOL);
  bt_must_contain(j->out->why[0],
                  "1 of 3 ranks did not join within 3000 ms: rank 2 (the "
                  "store refused a client at 127.0.0.1:");
  bt_must_contain(j->out->why[0], "that said it was rank 2: ");
  log_must_contain(j, 0, "the store refused a client at 127.0.0.1:");
  log_must_contain(j, 1, "the store refused a client at 127.0.0.1:");
  free_job(j);
}

static void test_token_mismatch(void **state) {
  (void)state;
  token_differs("wrong", "auth token mismatch");
}

static void test_token_missing(void **state) {
  (void)state;
  token_differs(NULL, "requires an auth token");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_different_ports),
      cmocka_unit_test(test_missing_rank),
      cmocka_unit_test(test_world_size_smaller),
      cmocka_unit_test(test_world_size_larger),
      cmocka_unit_test(test_world_size_beyond),
      cmocka_unit_test(test_listener_unreachable),
      cmocka_unit_test(test_token_mismatch),
      cmocka_unit_test(test_token_missing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
