/* SPDX-License-Identifier: Apache-2.0 */
/* env.c: reading the variables declared in env.h. */
#include "core/env.h"

#include <errno.h>
#include <stdlib.h>

#include "coll.h"
#include "core/error.h"
#include "core/log.h"

static const char *const env_names[COLL_ENV_COUNT] = {
#define COLL_ENV_NAME_(id, name, meaning) name,
    COLL_ENV_MAP(COLL_ENV_NAME_)
#undef COLL_ENV_NAME_
};

static const char *const env_meanings[COLL_ENV_COUNT] = {
#define COLL_ENV_MEANING_(id, name, meaning) meaning,
    COLL_ENV_MAP(COLL_ENV_MEANING_)
#undef COLL_ENV_MEANING_
};

const char *coll__env_name(coll_env_t id) {
  return (unsigned)id < COLL_ENV_COUNT ? env_names[id] : "?";
}

const char *coll__env_meaning(coll_env_t id) {
  return (unsigned)id < COLL_ENV_COUNT ? env_meanings[id] : "?";
}

const char *coll__env(coll_env_t id) {
  const char *v;
  if ((unsigned)id >= COLL_ENV_COUNT) return NULL;
  v = getenv(env_names[id]);
  return (v != NULL && v[0] != '\0') ? v : NULL;
}

int coll__env_parse_int(coll_env_t id, int64_t *out) {
  const char *v = coll__env(id);
  char *end = NULL;
  long long x;
  if (v == NULL) return 0;
  errno = 0;
  x = strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') return -1;
  *out = (int64_t)x;
  return 1;
}

int coll__env_int(coll_env_t id, int64_t *out) {
  int r = coll__env_parse_int(id, out);
  if (r < 0)
    COLL_WARN(COLL_LOG_INIT, "%s=%s is not a number; ignored", env_names[id],
              coll__env(id));
  return r;
}

int64_t coll__default_timeout_ms(void) {
  int64_t v;
  /* Quiet: an invalid value was refused when the comm was made. */
  if (coll__env_parse_int(COLL_ENV_TIMEOUT_MS, &v) == 1 && v != 0) return v;
  return COLL_DEFAULT_TIMEOUT_MS;
}

int coll_env_count(void) { return COLL_ENV_COUNT; }

const char *coll_env_name(int i) {
  return (i >= 0 && i < COLL_ENV_COUNT) ? env_names[i] : NULL;
}

const char *coll_env_meaning(int i) {
  return (i >= 0 && i < COLL_ENV_COUNT) ? env_meanings[i] : NULL;
}

coll_status_t coll__env_timeout_check(void) {
  int64_t v;
  if (coll__env_parse_int(COLL_ENV_TIMEOUT_MS, &v) >= 0) return COLL_OK;
  return coll__err(COLL_ERR_INVALID_ARG,
                   "COLL_TIMEOUT_MS='%s' is not a number of milliseconds "
                   "(0 or unset: the default %d; < 0: no bound)",
                   coll__env(COLL_ENV_TIMEOUT_MS), COLL_DEFAULT_TIMEOUT_MS);
}
