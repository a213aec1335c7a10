/* SPDX-License-Identifier: Apache-2.0 */
/* store_server.c: the store server's listener and loop thread. One libuv
 * loop on its own thread serves every connection with nonblocking I/O, so a
 * slow or hostile client never holds up the others. */
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store_srv.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fd_budget.h"
#include "core/log.h"

#define STORE_BACKLOG 4096

static void free_handle(uv_handle_t *h) { free(h->data); }

static void on_connection(uv_stream_t *listener, int status) {
  coll_store_server_t *srv = listener->data;
  store_conn_t *c;
  if (status < 0) {
    /* EMFILE and the like can repeat per connection: one line a second. */
    int64_t now = coll__now_ms();
    if (now - srv->accept_warned_at >= 1000) {
      srv->accept_warned_at = now;
      COLL_WARN(COLL_LOG_BOOT, "store %s:%d: accept failed: %s", srv->addr,
                srv->port, uv_strerror(status));
    }
    /* Free a descriptor for the next one from a client that has not
     * authenticated. */
    if (status == UV_EMFILE || status == UV_ENFILE)
      (void)coll__store_evict_oldest(srv,
                                     "evicted: this process ran out of "
                                     "file descriptors");
    return;
  }
  c = calloc(1, sizeof *c);
  if (c == NULL || uv_tcp_init(&srv->loop, &c->tcp) != 0) {
    /* Without memory for its state the connection cannot be served; libuv
     * keeps it and pauses the listener until an accept happens. */
    COLL_WARN(COLL_LOG_BOOT, "store %s:%d: out of memory for a client",
              srv->addr, srv->port);
    free(c);
    return;
  }
  c->tcp.data = c;
  c->srv = srv;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, free_handle);
    return;
  }
  atomic_fetch_add(&srv->n_accepted, 1);
  coll__store_conn_start(srv, c);
}

static void on_stop(uv_async_t *a) {
  coll_store_server_t *srv = a->data;
  /* Closing a connection unlinks it, so always take the first. */
  while (!coll__smap_link_empty(&srv->conns)) {
    store_conn_t *c = (store_conn_t *)((char *)srv->conns.next -
                                       offsetof(store_conn_t, link));
    coll__store_conn_close(c);
  }
  uv_close((uv_handle_t *)&srv->listener, NULL);
  uv_close((uv_handle_t *)&srv->stop_async, NULL);
  coll__refusal_flush(&srv->refusals);
}

static void loop_main(void *arg) {
  coll_store_server_t *srv = arg;
  sigset_t pipe_only;
  /* libuv writes with write(2), so a client that vanished would raise
   * SIGPIPE and kill the whole process. Blocked on this thread, the signal
   * stays pending here (dropped when the thread ends) and the write fails
   * with EPIPE, which closes just that connection. */
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, NULL);
  uv_run(&srv->loop, UV_RUN_DEFAULT);
}

static coll_status_t bind_error(const coll_store_server_t *srv, int port,
                                int err) {
  switch (err) {
    case UV_EADDRINUSE:
      return coll__err(COLL_ERR_SYSTEM,
                       "store: port %d on %s is already in use", port,
                       srv->addr);
    case UV_EADDRNOTAVAIL:
      return coll__err(COLL_ERR_SYSTEM,
                       "store: %s is not an address of this host, so the "
                       "store cannot listen on it",
                       srv->addr);
    case UV_EACCES:
      return coll__err(COLL_ERR_SYSTEM,
                       "store: listening on %s port %d needs privileges",
                       srv->addr, port);
    default:
      return coll__err(COLL_ERR_SYSTEM,
                       "store: cannot listen on %s port %d: %s", srv->addr,
                       port, uv_strerror(err));
  }
}

/* Parses a numeric IPv4/IPv6 address (with %scope for link-local) and
 * binds the listener to it. */
static coll_status_t bind_listen(coll_store_server_t *srv, const char *ip,
                                 int port) {
  struct addrinfo hints, *ai = NULL;
  struct sockaddr_storage ss;
  int rc, namelen = sizeof ss;
  memset(&hints, 0, sizeof hints);
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(ip, NULL, &hints, &ai);
  if (rc != 0 || ai == NULL)
    return coll__err(COLL_ERR_INVALID_ARG,
                     "store: bind address '%s' is not a numeric IPv4 or IPv6 "
                     "address",
                     ip);
  memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (ss.ss_family == AF_INET)
    ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
  rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&ss,
                   ss.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
  /* libuv may report a bind error only when listen is called. */
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&srv->listener, STORE_BACKLOG, on_connection);
  if (rc != 0) return bind_error(srv, port, rc);
  rc = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &namelen);
  if (rc != 0)
    return coll__err(COLL_ERR_SYSTEM, "store: getsockname on %s: %s", srv->addr,
                     uv_strerror(rc));
  srv->port =
      ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                    : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return COLL_OK;
}

static void close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Undoes a start that failed after the loop was initialized. */
static void server_free(coll_store_server_t *srv, int loop_ready) {
  if (loop_ready) {
    uv_walk(&srv->loop, close_any, NULL);
    uv_run(&srv->loop, UV_RUN_DEFAULT);
    uv_loop_close(&srv->loop);
  }
  coll__smap_free(&srv->map);
  free(srv->token);
  free(srv);
}

/* The server object with its loop listening on bind_ip:port, before the
 * loop thread starts. */
void coll__store_caps_for(int world, coll_store_caps_t *out) {
  size_t w = world > 1 ? (size_t)world : 1;
  out->keys = COLL_STORE_KEYS_BASE + COLL_STORE_KEYS_PER_RANK * w;
  out->bytes = COLL_STORE_BYTES_BASE + COLL_STORE_BYTES_PER_RANK * w;
  out->clients =
      w > (size_t)(INT_MAX / 4)
          ? INT_MAX / 2
          : COLL_STORE_CLIENTS_BASE + COLL_STORE_CLIENTS_PER_RANK * (int)w;
}

static coll_status_t server_open(const char *bind_ip, int port,
                                 const char *token, int world,
                                 coll_store_server_t **out) {
  coll_store_server_t *srv = calloc(1, sizeof *srv);
  coll_status_t s;
  int rc;
  if (srv == NULL) return coll__err(COLL_ERR_NO_MEMORY, "store: out of memory");
  snprintf(srv->addr, sizeof srv->addr, "%s", bind_ip);
  srv->world = world;
  coll__store_caps_for(world, &srv->caps);
  atomic_init(&srv->handshake_ms, COLL_STORE_HANDSHAKE_MS_DEFAULT);
  coll__smap_init(&srv->map);
  coll__smap_link_init(&srv->conns);
  coll__smap_link_init(&srv->unauth);
  srv->unauth_cap =
      coll__fd_budget(8, COLL_STORE_UNAUTH_MIN, COLL_STORE_UNAUTH_MAX);
  srv->accept_warned_at = coll__now_ms() - 1000;
  if (token != NULL && token[0] != '\0' &&
      (srv->token = strdup(token)) == NULL) {
    server_free(srv, 0);
    return coll__err(COLL_ERR_NO_MEMORY, "store: out of memory");
  }
  rc = uv_loop_init(&srv->loop);
  if (rc != 0) {
    server_free(srv, 0);
    return coll__err(COLL_ERR_SYSTEM, "store: uv_loop_init: %s",
                     uv_strerror(rc));
  }
  uv_tcp_init(&srv->loop, &srv->listener);
  srv->listener.data = srv;
  COLL_CHECK_GOTO(bind_listen(srv, bind_ip, port), s, fail);
  {
    char what[96];
    snprintf(what, sizeof what, "store %s:%d", srv->addr, srv->port);
    coll__refusal_log_init(&srv->refusals, COLL_LOG_BOOT, what);
  }
  rc = uv_async_init(&srv->loop, &srv->stop_async, on_stop);
  if (rc != 0) {
    s = coll__err(COLL_ERR_SYSTEM, "store: uv_async_init: %s", uv_strerror(rc));
    goto fail;
  }
  srv->stop_async.data = srv;
  *out = srv;
  return COLL_OK;
fail:
  server_free(srv, 1);
  return s;
}

/* judge: world is a job's, whose clients all say which rank they are. */
static coll_status_t server_start(const char *bind_ip, int port,
                                  const char *token, int world, int judge,
                                  coll_store_server_t **out) {
  coll_store_server_t *srv = NULL;
  int rc;
  if (out == NULL || bind_ip == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "store: %s is NULL",
                     out == NULL ? "out" : "bind address");
  *out = NULL;
  if (port < 0 || port > 65535)
    return coll__err(COLL_ERR_INVALID_ARG, "store: port %d is outside 0..65535",
                     port);
  if (world < 1)
    return coll__err(COLL_ERR_INVALID_ARG, "store: world %d; at least 1",
                     world);
  COLL_CHECK(server_open(bind_ip, port, token, world, &srv));
  srv->judge_clients = judge;
  /* The loop and its handles were set up on this thread; from here on only
   * the loop thread touches them (thread creation orders the writes). */
  rc = uv_thread_create(&srv->thread, loop_main, srv);
  if (rc != 0) {
    server_free(srv, 1);
    return coll__err(COLL_ERR_SYSTEM,
                     "store: cannot start the server thread: %s",
                     uv_strerror(rc));
  }
  COLL_INFO(COLL_LOG_BOOT,
            "store: serving on %s port %d%s, for %d ranks: at most %zu keys, "
            "%zu bytes, %d clients",
            srv->addr, srv->port, srv->token ? " (token required)" : "", world,
            srv->caps.keys, srv->caps.bytes, srv->caps.clients);
  *out = srv;
  return COLL_OK;
}

coll_status_t coll__store_server_start_for(const char *bind_ip, int port,
                                           const char *token, int world,
                                           coll_store_server_t **out) {
  return server_start(bind_ip, port, token, world, 1, out);
}

coll_status_t coll__store_server_start(const char *bind_ip, int port,
                                       const char *token,
                                       coll_store_server_t **out) {
  return server_start(bind_ip, port, token, COLL_STORE_WORLD_DEFAULT, 0, out);
}

int coll__store_server_port(const coll_store_server_t *s) {
  return s != NULL ? s->port : -1;
}

void coll__store_server_stop(coll_store_server_t *s) {
  if (s == NULL) return;
  uv_async_send(&s->stop_async);
  uv_thread_join(&s->thread);
  uv_loop_close(&s->loop);
  coll__smap_free(&s->map);
  free(s->token);
  free(s);
}

void coll__store_server_stats(const coll_store_server_t *s,
                              coll_store_stats_t *out) {
  out->accepted = atomic_load(&s->n_accepted);
  out->refused = atomic_load(&s->n_refused);
  out->requests = atomic_load(&s->n_requests);
  out->full = atomic_load(&s->n_full);
  out->max_body = atomic_load(&s->max_body);
}

void coll__store_server_set_handshake_ms(coll_store_server_t *s, int64_t ms) {
  /* Read by the loop thread at each accept. */
  atomic_store(&s->handshake_ms, ms);
}
