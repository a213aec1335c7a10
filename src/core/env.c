/* SPDX-License-Identifier: Apache-2.0 */
/* env.c: reading the variables declared in env.h: each parsed once, by its
 * kind, into a cache every layer reads. */
#include "core/env.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

typedef struct knob_decl {
  const char *name;
  coll_knob_kind_t kind;
  int64_t lo, hi, dflt;
  int agree;
  const char *const *words; /* CHOICE: NULL-terminated */
  const char *meaning;
} knob_decl_t;

#define COLL_WORD_STR_(var, id, word) word,
#define KNOB_WORDS_(id, name, kind, lo, hi, words, dflt, agree, meaning) \
  static const char *const words_##id[] = {words(COLL_WORD_STR_) NULL};
COLL_ENV_MAP(KNOB_WORDS_)
#undef KNOB_WORDS_

static const knob_decl_t decls[COLL_ENV_COUNT] = {
#define KNOB_DECL_(id, name, kind, lo, hi, words, dflt, agree, meaning) \
  {name, kind, lo, hi, dflt, agree, words_##id, meaning},
    COLL_ENV_MAP(KNOB_DECL_)
#undef KNOB_DECL_
};

/* Each variable's typed value and the text it was parsed from: a reader
 * parses again only when the environment's text changed, so a value set
 * between two calls is seen, and each text is parsed once. */
typedef struct knob_cache {
  char *raw; /* the text parsed (owned); NULL: unset */
  int64_t value;
  int set;    /* raw was accepted; else value is the default */
  int parsed; /* raw and value are valid */
} knob_cache_t;

static knob_cache_t g_cache[COLL_ENV_COUNT];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

const char *coll__env_name(coll_env_t id) {
  return (unsigned)id < COLL_ENV_COUNT ? decls[id].name : "?";
}

const char *coll__env_meaning(coll_env_t id) {
  return (unsigned)id < COLL_ENV_COUNT ? decls[id].meaning : "?";
}

coll_knob_kind_t coll__env_kind(coll_env_t id) {
  return (unsigned)id < COLL_ENV_COUNT ? decls[id].kind : COLL_KNOB_FOREIGN;
}

const char *coll__env(coll_env_t id) {
  const char *v;
  if ((unsigned)id >= COLL_ENV_COUNT) return NULL;
  v = getenv(decls[id].name);
  return (v != NULL && v[0] != '\0') ? v : NULL;
}

static int parse_i64(const char *v, int64_t *out) {
  char *end = NULL;
  long long x;
  errno = 0;
  x = strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') return -1;
  *out = (int64_t)x;
  return 0;
}

int coll__env_parse_int(coll_env_t id, int64_t *out) {
  const char *v = coll__env(id);
  if (v == NULL) return 0;
  return parse_i64(v, out) == 0 ? 1 : -1;
}

void coll__knob_accepted(coll_env_t id, char *buf, size_t cap) {
  const knob_decl_t *d = &decls[id];
  size_t used = 0;
  int i;
  buf[0] = '\0';
  switch (d->kind) {
    case COLL_KNOB_CHOICE:
      used = (size_t)snprintf(buf, cap, "one of");
      for (i = 0; d->words[i] != NULL && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s %s",
                                 i > 0 ? "," : "", d->words[i]);
      break;
    case COLL_KNOB_INT:
      if (d->lo == INT64_MIN && d->hi == INT64_MAX)
        snprintf(buf, cap, "an integer");
      else if (d->hi == INT64_MAX)
        snprintf(buf, cap, "an integer from %lld up", (long long)d->lo);
      else if (d->lo == 0 && d->hi == 1)
        snprintf(buf, cap, "0 or 1");
      else
        snprintf(buf, cap, "an integer from %lld to %lld", (long long)d->lo,
                 (long long)d->hi);
      break;
    case COLL_KNOB_TEXT:
      if (d->hi > 0)
        snprintf(buf, cap, "%lld characters at most", (long long)d->hi);
      else
        snprintf(buf, cap, "any text");
      break;
    case COLL_KNOB_FOREIGN:
      snprintf(buf, cap, "what its own program accepts");
      break;
  }
}

/* Parses variable id's value v: 0 and *out, or -1 with the refusal
 * recorded as this thread's error. */
static int parse(coll_env_t id, const char *v, int64_t *out) {
  const knob_decl_t *d = &decls[id];
  char acc[160];
  int64_t x;
  int i;
  coll__knob_accepted(id, acc, sizeof acc);
  switch (d->kind) {
    case COLL_KNOB_CHOICE:
      for (i = 0; d->words[i] != NULL; i++)
        if (strcasecmp(v, d->words[i]) == 0) {
          *out = i;
          return 0;
        }
      coll__err(COLL_ERR_INVALID_ARG, "%s='%s' is not %s", d->name, v, acc);
      return -1;
    case COLL_KNOB_INT:
      if (parse_i64(v, &x) != 0) {
        coll__err(COLL_ERR_INVALID_ARG, "%s='%s' is not a number (it takes %s)",
                  d->name, v, acc);
        return -1;
      }
      if (x < d->lo || x > d->hi) {
        coll__err(COLL_ERR_INVALID_ARG, "%s='%s' is out of range (it takes %s)",
                  d->name, v, acc);
        return -1;
      }
      *out = x;
      return 0;
    case COLL_KNOB_TEXT:
      if (d->hi > 0 && strlen(v) > (size_t)d->hi) {
        coll__err(COLL_ERR_INVALID_ARG, "%s='%s' is too long (%s)", d->name, v,
                  acc);
        return -1;
      }
      *out = 0;
      return 0;
    case COLL_KNOB_FOREIGN: break;
  }
  *out = 0;
  return 0;
}

static int same_text(const char *a, const char *b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Under g_mu: parses id's text v into its cache (the default where v is
 * unset or refused). 0, or -1 with the refusal as this thread's error. */
static int cache_parse(coll_env_t id, const char *v) {
  knob_cache_t *k = &g_cache[id];
  int64_t x = decls[id].dflt;
  int ok = v == NULL || parse(id, v, &x) == 0;
  char *raw = v != NULL ? strdup(v) : NULL;
  free(k->raw);
  k->raw = raw;
  k->value = ok ? x : decls[id].dflt;
  k->set = ok && v != NULL;
  /* Without memory for the copy the next read parses again. */
  k->parsed = v == NULL || raw != NULL;
  return ok ? 0 : -1;
}

/* Under g_mu: the cache of id, brought up to the environment. A refusal
 * here leaves this thread's error text as it was: the reader gets the
 * default, and comm creation reports the value (coll__knobs_load). */
static const knob_cache_t *cache_get(coll_env_t id) {
  knob_cache_t *k = &g_cache[id];
  const char *v = coll__env(id);
  char saved[COLL_ERRMSG_MAX];
  if (k->parsed && same_text(k->raw, v)) return k;
  coll__err_save(saved);
  (void)cache_parse(id, v);
  coll__err_restore(saved);
  return k;
}

coll_status_t coll__knobs_load(void) {
  coll_status_t first = COLL_OK;
  char msg[COLL_ERRMSG_MAX];
  int id;
  pthread_mutex_lock(&g_mu);
  for (id = 0; id < COLL_ENV_COUNT; id++) {
    if (decls[id].kind == COLL_KNOB_FOREIGN) continue;
    if (cache_parse((coll_env_t)id, coll__env((coll_env_t)id)) != 0 &&
        first == COLL_OK) {
      first = COLL_ERR_INVALID_ARG;
      coll__err_save(msg);
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (first != COLL_OK) return coll__err(first, "%s", msg);
  return COLL_OK;
}

int64_t coll__knob(coll_env_t id) {
  int64_t v;
  if ((unsigned)id >= COLL_ENV_COUNT) return 0;
  pthread_mutex_lock(&g_mu);
  v = cache_get(id)->value;
  pthread_mutex_unlock(&g_mu);
  return v;
}

int coll__knob_set(coll_env_t id) {
  int set;
  if ((unsigned)id >= COLL_ENV_COUNT) return 0;
  pthread_mutex_lock(&g_mu);
  set = cache_get(id)->set;
  pthread_mutex_unlock(&g_mu);
  return set;
}

const char *coll__knob_text(coll_env_t id) {
  if (!coll__knob_set(id) || decls[id].kind != COLL_KNOB_TEXT) return NULL;
  return coll__env(id);
}

const char *coll__knob_word_at(coll_env_t id, int64_t i) {
  int64_t k;
  if ((unsigned)id >= COLL_ENV_COUNT || decls[id].kind != COLL_KNOB_CHOICE ||
      i < 0)
    return "?";
  for (k = 0; decls[id].words[k] != NULL; k++)
    if (k == i) return decls[id].words[k];
  return "?";
}

const char *coll__knob_word(coll_env_t id) {
  return coll__knob_word_at(id, coll__knob(id));
}

void coll__knobs_agreed_text(char *out, size_t cap) {
  size_t used = 0;
  int id;
  out[0] = '\0';
  for (id = 0; id < COLL_ENV_COUNT && used < cap; id++) {
    const knob_decl_t *d = &decls[id];
    char name[40], value[32];
    size_t i;
    if (!d->agree) continue;
    /* "COLL_RING_THRESHOLD" -> "ring_threshold" */
    for (i = 0; d->name[5 + i] != '\0' && i + 1 < sizeof name; i++)
      name[i] = (char)tolower((unsigned char)d->name[5 + i]);
    name[i] = '\0';
    if (d->kind == COLL_KNOB_CHOICE)
      snprintf(value, sizeof value, "%s", coll__knob_word((coll_env_t)id));
    else if (coll__knob_set((coll_env_t)id))
      snprintf(value, sizeof value, "%lld",
               (long long)coll__knob((coll_env_t)id));
    else
      snprintf(value, sizeof value, "default");
    used += (size_t)snprintf(out + used, cap - used, "%s%s=%s",
                             used > 0 ? " " : "", name, value);
  }
}

int64_t coll__default_timeout_ms(void) {
  int64_t v = coll__knob(COLL_ENV_TIMEOUT_MS);
  return v != 0 ? v : COLL_DEFAULT_TIMEOUT_MS;
}

int coll_env_count(void) { return COLL_ENV_COUNT; }

const char *coll_env_name(int i) {
  return (i >= 0 && i < COLL_ENV_COUNT) ? decls[i].name : NULL;
}

const char *coll_env_meaning(int i) {
  return (i >= 0 && i < COLL_ENV_COUNT) ? decls[i].meaning : NULL;
}
