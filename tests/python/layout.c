/* SPDX-License-Identifier: Apache-2.0 */
/* layout.c: prints, as JSON, the C layout of what the Python package
 * mirrors in ctypes (coll_comm_config_t, coll_buffer_t, the magic, the
 * enums), so test_errors.py can compare the mirror with the compiler's
 * view instead of trusting a copy. */
#include <stddef.h>
#include <stdio.h>

#include "coll.h"

#define FIELD(type, f) \
  printf("\"%s\": [%zu, %zu], ", #f, offsetof(type, f), sizeof(((type *)0)->f))

int main(void) {
  int i;
  printf("{\"config_size\": %zu, \"config\": {", sizeof(coll_comm_config_t));
  FIELD(coll_comm_config_t, size);
  FIELD(coll_comm_config_t, timeout_ms);
  FIELD(coll_comm_config_t, name);
  FIELD(coll_comm_config_t, abort_handle);
  FIELD(coll_comm_config_t, magic);
  printf("\"end\": 0}, \"magic\": %llu, ",
         (unsigned long long)COLL_COMM_CONFIG_MAGIC);
  printf("\"buffer_size\": %zu, \"buffer\": {", sizeof(coll_buffer_t));
  FIELD(coll_buffer_t, data);
  FIELD(coll_buffer_t, count);
  FIELD(coll_buffer_t, dtype);
  printf("\"end\": 0}, \"dtypes\": {");
  for (i = 0; i < COLL_DTYPE_COUNT; i++)
    printf("%s\"%s\": %d", i ? ", " : "", coll_dtype_name((coll_dtype_t)i), i);
  printf("}, \"ops\": {");
  for (i = 0; i < COLL_OP_COUNT; i++)
    printf("%s\"%s\": %d", i ? ", " : "", coll_op_name((coll_op_t)i), i);
  printf("}, \"statuses\": {");
#define COLL_LAYOUT_STATUS_(name, value, text) \
  printf("%s\"%s\": %d", value ? ", " : "", #name, value);
  COLL_STATUS_MAP(COLL_LAYOUT_STATUS_)
#undef COLL_LAYOUT_STATUS_
  printf("}, \"tag_reserved\": %u, \"version\": %d}\n", COLL_TAG_RESERVED,
         COLL_VERSION);
  return 0;
}
