/* SPDX-License-Identifier: Apache-2.0 */
/* test_shm_shrink.c: the shared-memory transport cannot shrink: the call
 * says so, naming the transport, and leaves the endpoint as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "core/clock.h"
#include "shm_test.h"
#include "transport/transport.h"

static void shrink_refused(coll_transport_t *t, int rank, int world,
                           tt_result_t *res, void *arg) {
  coll_transport_t *out = t;
  uint32_t v = (uint32_t)rank, got = 0;
  coll_status_t s = coll__t_shrink(t, coll__deadline(5000), &out);
  (void)arg;
  if (s != COLL_ERR_NOT_AVAILABLE || out != NULL ||
      strstr(coll_last_error(), "'shm'") == NULL) {
    tt_fail(res, "shrink: %s: %s", coll_status_name(s), coll_last_error());
    return;
  }
  /* Still usable: a message around the ring. */
  s = coll__t_send(t, (rank + 1) % world, 1, &v, sizeof v,
                   coll__deadline(TT_WAIT_MS));
  if (s == COLL_OK)
    s = coll__t_recv(t, (rank + world - 1) % world, 1, &got, sizeof got,
                     coll__deadline(TT_WAIT_MS));
  if (s != COLL_OK || got != (uint32_t)((rank + world - 1) % world))
    tt_fail(res, "after the refusal: %s", coll_status_name(s));
}

static void test_shm_cannot_shrink(void **state) {
  tt_result_t res[2];
  (void)state;
  memset(res, 0, sizeof res);
  assert_int_equal(shm_run(2, shrink_refused, NULL, res, NULL, NULL), 0);
  TT_ASSERT_RANKS_OK(res, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm_cannot_shrink),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
