/* SPDX-License-Identifier: Apache-2.0 */
/* ifaddr.c: resolving MASTER_ADDR and choosing the local address to listen
 * on: a named interface (COLL_SOCKET_IFNAME), else the address the routing
 * table uses toward rank 0, else (no rank 0 address known) the host name's
 * address or the default route's. */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/rendezvous/rendezvous.h"
#include "core/error.h"
#include "core/log.h"

static socklen_t sa_len(int family) {
  return family == AF_INET6 ? sizeof(struct sockaddr_in6)
                            : sizeof(struct sockaddr_in);
}

static const char *family_name(int family) {
  return family == AF_INET6 ? "IPv6" : "IPv4";
}

/* Numeric text of an address, with %scope for IPv6 link-local. */
static int to_text(const struct sockaddr *sa, char out[COLL_ADDR_TEXT_MAX]) {
  return getnameinfo(sa, sa_len(sa->sa_family), out, COLL_ADDR_TEXT_MAX, NULL,
                     0, NI_NUMERICHOST);
}

coll_status_t coll__resolve_host(const char *what, const char *host,
                                 struct sockaddr_storage *out,
                                 char numeric[COLL_ADDR_TEXT_MAX]) {
  struct addrinfo hints, *ai = NULL;
  int rc;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(host, NULL, &hints, &ai);
  if (rc != 0 || ai == NULL)
    return coll__err(COLL_ERR_INVALID_ARG, "%s '%s' does not resolve: %s", what,
                     host, rc != 0 ? gai_strerror(rc) : "no address");
  memset(out, 0, sizeof *out);
  memcpy(out, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (numeric != NULL && to_text((struct sockaddr *)out, numeric) != 0)
    return coll__err(COLL_ERR_INVALID_ARG, "%s '%s': unprintable address", what,
                     host);
  return COLL_OK;
}

/* IPv6 link-local addresses need a scope and are a last resort. */
static int is_link_local(const struct sockaddr *sa) {
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* "lo, eth0, ..." of the interfaces that exist, for an unknown name. */
static void list_names(const struct ifaddrs *all, char *out, size_t cap) {
  const struct ifaddrs *i, *j;
  size_t used = 0;
  out[0] = '\0';
  for (i = all; i != NULL && used + IFNAMSIZ + 8 < cap; i = i->ifa_next) {
    for (j = all; j != i; j = j->ifa_next)
      if (strcmp(j->ifa_name, i->ifa_name) == 0) break;
    if (j != i) continue; /* listed already */
    used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? ", " : "",
                             i->ifa_name);
  }
}

static coll_status_t named_addr(int family, const char *ifname,
                                const char *what,
                                char out[COLL_ADDR_TEXT_MAX]) {
  struct ifaddrs *all = NULL, *i;
  const struct sockaddr *best = NULL;
  int exists = 0, up = 0, other_family = 0;
  char names[256];
  coll_status_t s = COLL_OK;
  if (getifaddrs(&all) != 0)
    return coll__err(COLL_ERR_SYSTEM, "getifaddrs: %s", strerror(errno));
  for (i = all; i != NULL; i = i->ifa_next) {
    if (strcmp(i->ifa_name, ifname) != 0) continue;
    exists = 1;
    if (i->ifa_flags & IFF_UP) up = 1;
    if (i->ifa_addr == NULL) continue;
    if (i->ifa_addr->sa_family != family) {
      other_family |= i->ifa_addr->sa_family == AF_INET ||
                      i->ifa_addr->sa_family == AF_INET6;
      continue;
    }
    if (best == NULL || (is_link_local(best) && !is_link_local(i->ifa_addr)))
      best = i->ifa_addr;
  }
  if (!exists) {
    list_names(all, names, sizeof names);
    s = coll__err(COLL_ERR_INVALID_ARG,
                  "%s=%s: no such network interface (this host has: %s)", what,
                  ifname, names);
  } else if (!up) {
    s = coll__err(COLL_ERR_INVALID_ARG, "%s=%s: the interface is down", what,
                  ifname);
  } else if (best == NULL) {
    s = coll__err(
        COLL_ERR_INVALID_ARG,
        "%s=%s: the interface has no %s address (MASTER_ADDR is "
        "%s%s)",
        what, ifname, family_name(family), family_name(family),
        other_family ? "; the interface has only the other family" : "");
  } else if (to_text(best, out) != 0) {
    s = coll__err(COLL_ERR_SYSTEM, "%s=%s: unprintable address", what, ifname);
  }
  freeifaddrs(all);
  return s;
}

/* Connecting a UDP socket sends nothing; it only asks the routing table
 * which source address would be used toward master. */
static coll_status_t routed_addr(const struct sockaddr_storage *master,
                                 char out[COLL_ADDR_TEXT_MAX]) {
  struct sockaddr_storage ss = *master, me;
  socklen_t len = sizeof me;
  char dst[COLL_ADDR_TEXT_MAX] = "?";
  int fd, err;
  if (ss.ss_family == AF_INET)
    ((struct sockaddr_in *)&ss)->sin_port = htons(9);
  else
    ((struct sockaddr_in6 *)&ss)->sin6_port = htons(9);
  (void)to_text((struct sockaddr *)master, dst);
  fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return coll__err(COLL_ERR_SYSTEM, "no %s socket for MASTER_ADDR %s: %s",
                     family_name(ss.ss_family), dst, strerror(errno));
  if (connect(fd, (struct sockaddr *)&ss, sa_len(ss.ss_family)) != 0 ||
      getsockname(fd, (struct sockaddr *)&me, &len) != 0) {
    err = errno;
    close(fd);
    return coll__err(COLL_ERR_SYSTEM,
                     "no route from this host to MASTER_ADDR %s: %s (set "
                     "COLL_SOCKET_IFNAME to choose an interface)",
                     dst, strerror(err));
  }
  close(fd);
  if (to_text((struct sockaddr *)&me, out) != 0)
    return coll__err(COLL_ERR_SYSTEM, "unprintable local address toward %s",
                     dst);
  return COLL_OK;
}

coll_status_t coll__local_addr(const struct sockaddr_storage *master,
                               const char *ifname, const char *ifname_what,
                               char out[COLL_ADDR_TEXT_MAX]) {
  if (ifname != NULL && ifname[0] != '\0')
    return named_addr(master->ss_family, ifname, ifname_what, out);
  return routed_addr(master, out);
}

/* IPv4 when the interface has an IPv4 address, else IPv6 when it has one,
 * else IPv4 (named_addr then says what is wrong). */
static int if_family(const char *ifname) {
  struct ifaddrs *all = NULL, *i;
  int v6 = 0, v4 = 0;
  if (getifaddrs(&all) != 0) return AF_INET;
  for (i = all; i != NULL; i = i->ifa_next) {
    if (strcmp(i->ifa_name, ifname) != 0 || i->ifa_addr == NULL) continue;
    v4 |= i->ifa_addr->sa_family == AF_INET;
    v6 |= i->ifa_addr->sa_family == AF_INET6;
  }
  freeifaddrs(all);
  return v4 || !v6 ? AF_INET : AF_INET6;
}

static int is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) ==
           127;
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* 1 if this host owns the address (a bind to it succeeds): a stale
 * /etc/hosts entry must not become the address peers are told. */
static int bindable(const struct sockaddr *sa) {
  struct sockaddr_storage ss;
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
  if (fd < 0) return 0;
  memcpy(&ss, sa, sa_len(sa->sa_family));
  if (ss.ss_family == AF_INET)
    ((struct sockaddr_in *)&ss)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
  ok = bind(fd, (struct sockaddr *)&ss, sa_len(sa->sa_family)) == 0;
  close(fd);
  return ok;
}

/* The first non-loopback, non-link-local address of this host's name that
 * can be bound here; 0 when there is none. */
static int hostname_addr(char out[COLL_ADDR_TEXT_MAX]) {
  struct addrinfo hints, *ai = NULL, *a;
  char host[256];
  int found = 0;
  if (gethostname(host, sizeof host) != 0) return 0;
  host[sizeof host - 1] = '\0';
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, NULL, &hints, &ai) != 0) return 0;
  for (a = ai; a != NULL && !found; a = a->ai_next)
    found = !is_loopback(a->ai_addr) && !is_link_local(a->ai_addr) &&
            bindable(a->ai_addr) && to_text(a->ai_addr, out) == 0;
  freeaddrinfo(ai);
  return found;
}

/* The source address of the default route: the route toward a
 * documentation address (TEST-NET-1, RFC 5737), which no table routes
 * specially; connecting a UDP socket sends nothing. 0 without a route. */
static int default_route_addr(char out[COLL_ADDR_TEXT_MAX]) {
  struct sockaddr_storage ss;
  struct sockaddr_in *a = (struct sockaddr_in *)&ss;
  char why[COLL_ERRMSG_MAX];
  int ok;
  memset(&ss, 0, sizeof ss);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(0xc0000201u); /* 192.0.2.1 */
  coll__err_save(why);
  ok = routed_addr(&ss, out) == COLL_OK;
  coll__err_restore(why); /* not having one is no error */
  return ok && strncmp(out, "127.", 4) != 0;
}

coll_status_t coll__listen_addr_auto(const char *ifname,
                                     const char *master_host,
                                     char out[COLL_ADDR_TEXT_MAX]) {
  struct sockaddr_storage master;
  if (ifname != NULL && ifname[0] != '\0')
    return named_addr(if_family(ifname), ifname, "COLL_SOCKET_IFNAME", out);
  if (master_host != NULL && master_host[0] != '\0') {
    COLL_CHECK(coll__resolve_host("MASTER_ADDR", master_host, &master, NULL));
    return routed_addr(&master, out);
  }
  if (hostname_addr(out) || default_route_addr(out)) return COLL_OK;
  snprintf(out, COLL_ADDR_TEXT_MAX, "127.0.0.1");
  COLL_WARN(COLL_LOG_BOOT,
            "no address of this host other than loopback: listening on "
            "127.0.0.1, which ranks on other hosts cannot reach (set "
            "COLL_SOCKET_IFNAME)");
  return COLL_OK;
}
