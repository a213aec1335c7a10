/* SPDX-License-Identifier: Apache-2.0 */
/* report.c: coll-perf's output: the nccl-tests table, CSV or JSON. */
#include <stdio.h>
#include <string.h>

#include "perf.h"

/* Width of one variant's columns ("  time  algbw  busbw  #wrong"). */
#define VARIANT_WIDTH 33

static const char *redop_text(const perf_opts_t *o, coll_op_t op) {
  return perf_coll_reduces(o->coll) ? coll_op_name(op) : "none";
}

static int root_value(const perf_opts_t *o) {
  return perf_coll_rooted(o->coll) ? o->root : -1;
}

static void version_text(char *buf, size_t cap) {
  int v = coll_version();
  snprintf(buf, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* The "out-of-place" and "in-place" labels, centered over their columns. */
static void print_variant_labels(void) {
  static const char *const labels[2] = {"out-of-place", "in-place"};
  int i, len, left;
  printf("#%51s", "");
  for (i = 0; i < 2; i++) {
    len = (int)strlen(labels[i]);
    left = (VARIANT_WIDTH - len) / 2;
    printf("%*s%s%*s", left, "", labels[i],
           i == 0 ? VARIANT_WIDTH - len - left : 0, "");
  }
  printf("\n");
}

static void text_begin(const perf_report_t *r, const char *mode,
                       const char *backend) {
  const perf_opts_t *o = r->o;
  char ver[32];
  version_text(ver, sizeof ver);
  printf("# coll-perf: libcoll %s, %s, %d ranks (%s), backend %s\n", ver,
         perf_coll_name(o->coll), r->world, mode, backend);
  printf(
      "#  minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d "
      "iters: %d validation: %d\n",
      o->min_bytes, o->max_bytes, o->factor, o->warmup, o->iters, o->check);
  if (o->offset >= 0)
    printf("#  buffers start %d bytes into a page (--offset)\n", o->offset);
  printf("#\n");
  print_variant_labels();
  printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop",
         "root");
  printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  printf("  %7s  %6s  %6s  %6s\n", "time", "algbw", "busbw", "#wrong");
  printf("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  printf("  %7s  %6s  %6s\n", "(us)", "(GB/s)", "(GB/s)");
}

static void text_variant(const perf_result_t *v) {
  char t[32], w[32];
  if (!v->valid) {
    printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  if (v->time_us >= 10000.0)
    snprintf(t, sizeof t, "%7.0f", v->time_us);
  else if (v->time_us >= 100.0)
    snprintf(t, sizeof t, "%7.1f", v->time_us);
  else
    snprintf(t, sizeof t, "%7.2f", v->time_us);
  if (v->wrong < 0)
    snprintf(w, sizeof w, "N/A");
  else
    snprintf(w, sizeof w, "%lld", (long long)v->wrong);
  printf("  %7s  %6.2f  %6.2f  %6s", t, v->algbw, v->busbw, w);
}

/* CSV and JSON leave a missing value empty / null. */
static void csv_variant(const perf_result_t *v) {
  if (!v->valid) {
    printf(",,,,");
    return;
  }
  printf(",%.3f,%.4f,%.4f,", v->time_us, v->algbw, v->busbw);
  if (v->wrong >= 0) printf("%lld", (long long)v->wrong);
}

static void json_variant(const char *name, const perf_result_t *v) {
  printf("\"%s\": ", name);
  if (!v->valid) {
    printf("null");
    return;
  }
  printf(
      "{\"time_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, "
      "\"wrong\": ",
      v->time_us, v->algbw, v->busbw);
  if (v->wrong >= 0)
    printf("%lld}", (long long)v->wrong);
  else
    printf("null}");
}

void perf_report_begin(perf_report_t *r, const perf_opts_t *o, int world,
                       const char *mode, const char *backend) {
  char ver[32];
  memset(r, 0, sizeof *r);
  r->o = o;
  r->world = world;
  if (backend == NULL) backend = "?";
  if (o->format == PERF_TEXT) {
    text_begin(r, mode, backend);
  } else if (o->format == PERF_CSV) {
    printf(
        "collective,ranks,size,count,type,redop,root,"
        "oop_time_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,"
        "ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong\n");
  } else {
    version_text(ver, sizeof ver);
    printf(
        "{\"tool\": \"coll-perf\", \"libcoll\": \"%s\", "
        "\"collective\": \"%s\", \"ranks\": %d, \"mode\": \"%s\", "
        "\"backend\": \"%s\", \"root\": %d, \"iters\": %d, "
        "\"warmup_iters\": %d, \"check\": %s, \"results\": [",
        ver, perf_coll_name(o->coll), world, mode, backend, root_value(o),
        o->iters, o->warmup, o->check ? "true" : "false");
  }
  fflush(stdout);
}

static void add_variant(perf_report_t *r, const perf_result_t *v) {
  if (!v->valid) return;
  r->busbw_sum += v->busbw;
  r->busbw_n++;
  if (v->wrong > 0) r->wrong += v->wrong;
}

void perf_report_row(perf_report_t *r, const perf_row_t *row) {
  const perf_opts_t *o = r->o;
  add_variant(r, &row->oop);
  add_variant(r, &row->ip);
  if (o->format == PERF_TEXT) {
    printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count,
           coll_dtype_name(row->dtype), redop_text(o, row->op), root_value(o));
    text_variant(&row->oop);
    text_variant(&row->ip);
    printf("\n");
  } else if (o->format == PERF_CSV) {
    printf("%s,%d,%zu,%zu,%s,%s,%d", perf_coll_name(o->coll), r->world,
           row->bytes, row->count, coll_dtype_name(row->dtype),
           redop_text(o, row->op), root_value(o));
    csv_variant(&row->oop);
    csv_variant(&row->ip);
    printf("\n");
  } else {
    printf(
        "%s\n  {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
        "\"redop\": \"%s\", ",
        r->rows > 0 ? "," : "", row->bytes, row->count,
        coll_dtype_name(row->dtype), redop_text(o, row->op));
    json_variant("out_of_place", &row->oop);
    printf(", ");
    json_variant("in_place", &row->ip);
    printf("}");
  }
  r->rows++;
  fflush(stdout);
}

void perf_report_end(perf_report_t *r, int failed) {
  double avg = r->busbw_n > 0 ? r->busbw_sum / r->busbw_n : 0;
  int ok = !failed && r->wrong == 0;
  if (r->o->format == PERF_TEXT) {
    if (failed) printf("# stopped early: a call failed (see above)\n");
    printf("# Wrong elements       : %lld %s\n", (long long)r->wrong,
           ok ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %g\n#\n", avg);
  } else if (r->o->format == PERF_JSON) {
    printf("\n], \"avg_busbw_gbps\": %.4f, \"wrong\": %lld, \"ok\": %s}\n", avg,
           (long long)r->wrong, ok ? "true" : "false");
  }
  fflush(stdout);
}
