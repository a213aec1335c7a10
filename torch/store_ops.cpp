// SPDX-License-Identifier: Apache-2.0
// store_ops.cpp: torch's c10d::Store behind coll_store_ops_t.
#include "store_ops.hpp"

#include <c10/util/Exception.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace coll_torch {
namespace {

// torch's errors carry a C++ backtrace in what(); the sentence is enough.
const char *textOf(const std::exception &e) {
  if (const auto *ce = dynamic_cast<const c10::Error *>(&e)) {
    return ce->what_without_backtrace();
  }
  return e.what();
}

coll_status_t storeSet(void *ctx, const char *key, const void *value,
                       size_t len) {
  try {
    const auto *p = static_cast<const uint8_t *>(value);
    static_cast<c10d::Store *>(ctx)->set(key, std::vector<uint8_t>(p, p + len));
    return COLL_OK;
  } catch (const std::exception &e) {
    return coll_set_last_error(COLL_ERR_SYSTEM, "torch store: set %s: %s", key,
                               textOf(e));
  } catch (...) {
    return coll_set_last_error(COLL_ERR_SYSTEM,
                               "torch store: set %s: unknown exception", key);
  }
}

coll_status_t storeGet(void *ctx, const char *key, void *value, size_t cap,
                       size_t *len, int64_t timeout_ms) {
  auto *store = static_cast<c10d::Store *>(ctx);
  auto start = std::chrono::steady_clock::now();
  try {
    // 0 asks without waiting (torch's stores read a 0 ms wait as "no
    // timeout"); torch's stores throw when a wait times out; a negative
    // bound is the store's own timeout.
    if (timeout_ms == 0) {
      if (!store->check({key})) {
        return coll_set_last_error(COLL_ERR_TIMEOUT,
                                   "torch store: get %s: no such key yet", key);
      }
    } else if (timeout_ms > 0) {
      store->wait({key}, std::chrono::milliseconds(timeout_ms));
    } else {
      store->wait({key});
    }
    std::vector<uint8_t> v = store->get(key);
    *len = v.size();
    if (cap > 0 && !v.empty()) {
      std::memcpy(value, v.data(), v.size() < cap ? v.size() : cap);
    }
    return COLL_OK;
  } catch (const std::exception &e) {
    // The store says "timeout" in words that differ between stores, so the
    // clock decides which status it was.
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    bool timed_out = timeout_ms >= 0 && waited >= timeout_ms;
    return coll_set_last_error(timed_out ? COLL_ERR_TIMEOUT : COLL_ERR_SYSTEM,
                               "torch store: get %s (waited %lld ms): %s", key,
                               static_cast<long long>(waited), textOf(e));
  } catch (...) {
    return coll_set_last_error(COLL_ERR_SYSTEM,
                               "torch store: get %s: unknown exception", key);
  }
}

}  // namespace

coll_store_ops_t storeOps(c10d::Store *store) {
  coll_store_ops_t ops;
  std::memset(&ops, 0, sizeof ops);
  ops.size = sizeof ops;
  ops.ctx = store;
  ops.set = storeSet;
  ops.get = storeGet;
  return ops;
}

}  // namespace coll_torch
