/* SPDX-License-Identifier: Apache-2.0 */
/* consumer.c: a program built against an installed libcoll. */
#include <coll.h>
#include <stdio.h>

int main(void) {
  coll_transport_t *t;
  coll_comm_t *c;
  float x[3] = {1, 2, 3};
  if (coll_version() != COLL_VERSION) {
    fprintf(stderr, "header %d, library %d\n", COLL_VERSION, coll_version());
    return 1;
  }
  if (coll_inproc_create(1, &t) != COLL_OK ||
      coll_comm_create(t, NULL, &c) != COLL_OK ||
      coll_allreduce(c, x, x, 3, COLL_F32, COLL_SUM, NULL) != COLL_OK) {
    fprintf(stderr, "consumer: %s\n", coll_last_error());
    return 1;
  }
  coll_comm_destroy(c);
  printf("consumer: libcoll %d works (%g %g %g)\n", coll_version(),
         (double)x[0], (double)x[1], (double)x[2]);
  return x[2] == 3.0f ? 0 : 1;
}
