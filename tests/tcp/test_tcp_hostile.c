/* SPDX-License-Identifier: Apache-2.0 */
/* test_tcp_hostile.c: strangers and liars on the wire: foreign clients that
 * connect during the mesh and send garbage, half a header, nothing, or a
 * wrong token, while the job runs; and a fake rank that completes a valid
 * handshake and then sends frames with a huge length or a forged source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/clock.h"
#include "tcp_test_util.h"

#define JOB_MS 60000
#define MSG_BYTES ((size_t)1 << 20)
#define HELPER (TT_MAX_RANKS - 1) /* slot of the helper's notes */

/* Sends MSG_BYTES to `peer` and receives as much from it; checks it. */
static int exchange(tt_job_t *job, coll_transport_t *t, int rank, int peer) {
  uint8_t *s = malloc(MSG_BYTES), *r = malloc(MSG_BYTES);
  coll_treq_t a, b;
  size_t len = 0;
  int ok;
  if (s == NULL || r == NULL) return 3;
  tt_fill(s, MSG_BYTES, rank, peer, 3);
  TRY(coll__t_irecv(t, peer, 3, r, MSG_BYTES, &a), "irecv");
  TRY(coll__t_isend(t, peer, 3, s, MSG_BYTES, &b), "isend");
  TRY(coll__t_wait(t, b, coll__deadline(20000), NULL), "wait send");
  TRY(coll__t_wait(t, a, coll__deadline(20000), &len), "wait recv");
  ok = len == MSG_BYTES && tt_check(r, len, peer, rank, 3);
  free(s);
  free(r);
  return ok ? 0 : 2;
}

/* Holds fds open until the parent says go (bounded). */
static void hold(tt_job_t *job, int *fds, int n) {
  int64_t end = tt_now_ms() + JOB_MS;
  while (!atomic_load(&job->sh->go) && tt_now_ms() < end) tt_sleep_ms(5);
  while (n-- > 0)
    if (fds[n] >= 0) close(fds[n]);
}

/* ---- foreign clients during the mesh --------------------------------------
 */

/* Against ranks 0 and 1: garbage, half a hello, silence, a wrong token and a
 * wrong job id (both claiming rank 2, a rank they expect). Records in its
 * notes how many refusals it saw; then holds everything open. */
static int foreign(tt_job_t *job, int rank, int world, void *arg) {
  int fds[16], n = 0, target, refusals = 0;
  char addr[COLL_TCP_ADDR_MAX];
  uint8_t junk[200], head[10];
  (void)rank, (void)world, (void)arg;
  memset(junk, 0x5A, sizeof junk);
  coll__put_le32(head, COLL_TCP_MAGIC);
  memset(head + 4, 0, sizeof head - 4);
  for (target = 0; target < 2; target++) {
    int fd;
    if (tt_lookup(job, target, addr, sizeof addr, 20000) != 0) return 2;
    if ((fd = tt_dial(addr, 5000)) < 0) return 3;
    tt_send_all(fd, junk, sizeof junk);
    fds[n++] = fd;
    if ((fd = tt_dial(addr, 5000)) < 0) return 3;
    tt_send_all(fd, head, sizeof head);
    fds[n++] = fd;
    if ((fd = tt_dial(addr, 5000)) < 0) return 3;
    fds[n++] = fd;
    if ((fd = tt_dial(addr, 5000)) < 0) return 3;
    if (tt_handshake(fd, 2, 3, target, job->job_id, "nope") == -2) refusals++;
    fds[n++] = fd;
    if ((fd = tt_dial(addr, 5000)) < 0) return 3;
    if (tt_handshake(fd, 2, 3, target, "another job", job->token) == -2)
      refusals++;
    fds[n++] = fd;
  }
  job->sh->status[HELPER] = refusals;
  atomic_store(&job->sh->ready[HELPER], 1);
  hold(job, fds, n);
  return 0;
}

/* Rank 2 arrives only after the strangers did their worst, so they hit
 * ranks 0 and 1 while those are still building the mesh. */
static int rank_amid_strangers(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  int p, rc;
  (void)arg;
  if (rank == 2) {
    int64_t end = tt_now_ms() + 30000;
    while (!atomic_load(&job->sh->ready[HELPER]) && tt_now_ms() < end)
      tt_sleep_ms(5);
  }
  TRY(tt_create(job, rank, world, &t), "create");
  for (p = 0; p < world; p++)
    if (p != rank && (rc = exchange(job, t, rank, p)) != 0) return rc;
  coll_transport_destroy(t);
  return 0;
}

static void test_foreign_clients_do_not_disturb(void **state) {
  tt_job_t job;
  pid_t pids[4];
  int codes[4];
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", "s3cret"), 0);
  pids[3] = tt_spawn_helper(&job, foreign, NULL);
  tt_spawn(&job, 3, rank_amid_strangers, NULL, pids);
  if (tt_wait(pids, 3, JOB_MS, codes, msg, sizeof msg) != 0) {
    atomic_store(&job.sh->go, 1);
    tt_wait(pids + 3, 1, 10000, codes + 3, msg, sizeof msg);
    fail_msg("strangers: job failed: %s", msg);
  }
  atomic_store(&job.sh->go, 1);
  if (tt_wait(pids + 3, 1, 10000, codes + 3, msg, sizeof msg) != 0)
    fail_msg("strangers: helper failed: %s", msg);
  assert_int_equal(job.sh->status[HELPER], 4); /* 2 targets x 2 refusals */
  tt_job_fini(&job);
}

/* ---- a fake rank that lies after a valid handshake ------------------------
 */

/* Fake rank 2 of 3: dials ranks 0 and 1 with the right token, sends rank 1
 * one valid message and then a frame with a forged source, and sends rank 0
 * a frame announcing 1 TiB. */
static int fake_rank(tt_job_t *job, int rank, int world, void *arg) {
  int fds[2], p;
  char addr[COLL_TCP_ADDR_MAX];
  uint8_t hdr[COLL_TCP_FRAME_BYTES], payload[100];
  (void)rank, (void)world, (void)arg;
  for (p = 0; p < 2; p++) {
    if (tt_lookup(job, p, addr, sizeof addr, 20000) != 0) return 2;
    if ((fds[p] = tt_dial(addr, 5000)) < 0) return 3;
    if (tt_handshake(fds[p], 2, 3, p, job->job_id, job->token) != 0) return 4;
  }
  tt_fill(payload, sizeof payload, 2, 1, 5);
  coll__tcp_frame_encode(hdr, COLL_TCP_K_DATA, 0, 2, 5, sizeof payload);
  if (tt_send_all(fds[1], hdr, sizeof hdr) != 0 ||
      tt_send_all(fds[1], payload, sizeof payload) != 0)
    return 5;
  coll__tcp_frame_encode(hdr, COLL_TCP_K_DATA, 0, 0, 6, 10);
  if (tt_send_all(fds[1], hdr, sizeof hdr) != 0) return 5;
  coll__tcp_frame_encode(hdr, COLL_TCP_K_DATA, 0, 2, 5, (uint64_t)1 << 40);
  if (tt_send_all(fds[0], hdr, sizeof hdr) != 0) return 5;
  atomic_store(&job->sh->ready[HELPER], 1);
  hold(job, fds, 2);
  return 0;
}

static int rank_beside_liar(tt_job_t *job, int rank, int world, void *arg) {
  coll_transport_t *t;
  coll_treq_t r;
  uint8_t buf[100];
  size_t len;
  coll_status_t s;
  int rc;
  (void)arg;
  world = 3;
  TRY(tt_create(job, rank, world, &t), "create");
  if (rank == 1) {
    TRY(coll__t_irecv(t, 2, 5, buf, sizeof buf, &r), "irecv");
    TRY(coll__t_wait(t, r, coll__deadline(20000), &len), "wait valid");
    if (len != sizeof buf || !tt_check(buf, len, 2, 1, 5)) return 2;
  }
  /* The next frame from rank 2 is a lie: PROTOCOL, sticky, naming it. */
  s = coll__t_irecv(t, 2, 6, buf, sizeof buf, &r);
  if (s == COLL_OK) s = coll__t_wait_for(t, r, 20000, &len);
  tt_note(job, rank, s, coll_last_error());
  if (s == COLL_ERR_TIMEOUT) return 6;
  if (coll__t_irecv(t, 2, 7, buf, sizeof buf, &r) != COLL_ERR_PROTOCOL)
    return 7;
  /* Ranks 0 and 1 are unaffected. */
  if ((rc = exchange(job, t, rank, 1 - rank)) != 0) return rc;
  coll_transport_destroy(t);
  return 0;
}

static void test_lying_peer_is_protocol_error(void **state) {
  tt_job_t job;
  pid_t pids[3];
  int codes[3];
  char msg[256];
  (void)state;
  assert_int_equal(tt_job_init(&job, "127.0.0.1", "s3cret"), 0);
  /* Only a frame above this many bytes is refused. */
  assert_true(job.x.frame_cap < ((size_t)1 << 40));
  pids[2] = tt_spawn_helper(&job, fake_rank, NULL);
  tt_spawn(&job, 2, rank_beside_liar, NULL, pids);
  if (tt_wait(pids, 2, JOB_MS, codes, msg, sizeof msg) != 0) {
    atomic_store(&job.sh->go, 1);
    tt_wait(pids + 2, 1, 10000, codes + 2, msg, sizeof msg);
    fail_msg("liar: ranks failed: %s", msg);
  }
  atomic_store(&job.sh->go, 1);
  if (tt_wait(pids + 2, 1, 10000, codes + 2, msg, sizeof msg) != 0)
    fail_msg("liar: fake rank failed: %s", msg);
  if (job.sh->status[0] != COLL_ERR_PROTOCOL ||
      strstr(job.sh->text[0], "rank 2") == NULL ||
      strstr(job.sh->text[0], "cap") == NULL)
    fail_msg("rank 0: want PROTOCOL over the cap from rank 2, got %s: %s",
             coll_status_name((coll_status_t)job.sh->status[0]),
             job.sh->text[0]);
  if (job.sh->status[1] != COLL_ERR_PROTOCOL ||
      strstr(job.sh->text[1], "rank 2") == NULL ||
      strstr(job.sh->text[1], "rank 0") == NULL)
    fail_msg("rank 1: want PROTOCOL for a forged source, got %s: %s",
             coll_status_name((coll_status_t)job.sh->status[1]),
             job.sh->text[1]);
  tt_job_fini(&job);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_foreign_clients_do_not_disturb),
      cmocka_unit_test(test_lying_peer_is_protocol_error),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "*kill*" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
