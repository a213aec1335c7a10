/* SPDX-License-Identifier: Apache-2.0 */
/* dtype.c: the dtype and op tables. */
#include "coll.h"

static const struct {
  size_t size;
  const char *name;
} dtypes[COLL_DTYPE_COUNT] = {
    [COLL_F16] = {2, "f16"}, [COLL_BF16] = {2, "bf16"}, [COLL_F32] = {4, "f32"},
    [COLL_F64] = {8, "f64"}, [COLL_I8] = {1, "i8"},     [COLL_U8] = {1, "u8"},
    [COLL_I32] = {4, "i32"}, [COLL_I64] = {8, "i64"},
};

static const char *const ops[COLL_OP_COUNT] = {
    [COLL_SUM] = "sum", [COLL_PROD] = "prod", [COLL_MAX] = "max",
    [COLL_MIN] = "min", [COLL_AVG] = "avg",
};

size_t coll_dtype_size(coll_dtype_t dt) {
  return (unsigned)dt < COLL_DTYPE_COUNT ? dtypes[dt].size : 0;
}

const char *coll_dtype_name(coll_dtype_t dt) {
  return (unsigned)dt < COLL_DTYPE_COUNT ? dtypes[dt].name : "invalid";
}

const char *coll_op_name(coll_op_t op) {
  return (unsigned)op < COLL_OP_COUNT ? ops[op] : "invalid";
}
