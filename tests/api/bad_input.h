/* SPDX-License-Identifier: Apache-2.0 */
/* bad_input.h: the harness of the bad-input tests: each refusal is checked
 * with a macro that records a failure (with its line) instead of stopping,
 * so one run lists every call that was wrongly accepted. */
#ifndef COLL_TEST_BAD_INPUT_H
#define COLL_TEST_BAD_INPUT_H

#include "api_test.h"

/* Comms in these tests time out quickly: a bad call that was wrongly
 * accepted fails within this bound instead of hanging. */
#define RUN_TIMEOUT_MS 120000
#define SHORT_TIMEOUT_MS 5000

extern t_fail_t g_fails;

#define BAD(call, name) \
  t_expect_err(&g_fails, (call), COLL_ERR_INVALID_ARG, name, #call, __LINE__)
#define EXPECT(call, want, name) \
  t_expect_err(&g_fails, (call), want, name, #call, __LINE__)
/* For the NCCL entry points on a machine without NCCL either refusal is
 * right; the text must still say something. */
#define REFUSED(call) bi_expect_refused((call), #call, __LINE__)
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) t_fail(&g_fails, "line %d: %s is false", __LINE__, #cond); \
  } while (0)

void bi_expect_refused(coll_status_t s, const char *call, int line);
/* Starts collecting failures; reports them and asserts there were none. */
void bi_begin(void);
void bi_end(const char *what);

#endif
