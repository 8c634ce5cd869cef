"""The bench sizes: records per row for `make bench` (full) and `make bench-quick` (quick).

One module that bench/__main__.py and the standalone A/B entry points (httpbench, queuebench)
import, so none of them imports bench/__main__.py.
"""

from __future__ import annotations

SIZES: dict[str, dict[str, int]] = {
    "full": {"xadd_p1": 100_000, "xadd_p16": 500_000, "stream": 100_000, "range_p1": 20_000,
             "range_p16": 50_000, "py_xadd": 200_000, "py_xread": 100_000, "group": 50_000,
             "http_records": 1_000_000, "sse": 100_000, "memory": 1_000_000,
             "tag_groups": 100, "read_records": 100_000, "queue_1": 50_000, "queue_100": 500_000, "wake": 1_000,
             "router_fwd": 200_000, "router_write": 200_000,
             "str_p1": 100_000, "str_p16": 500_000, "str_keys": 100_000, "str_memory": 1_000_000,
             "eval_p1": 100_000, "eval_p16": 500_000, "spark": 1_000_000,
             "brpop": 200_000, "list_memory": 1_000_000, "hash_memory": 100_000,
             "ckpt_keys": 1_000_000, "ckpt_elements": 10_000_000,
             "blocked_group": 5_000, "blocked_cpu": 2_000, "blocked_xadds": 1_000, "fanout": 9_000,
             "zset_memory": 1_000_000, "set_memory": 100_000, "rq_jobs": 2_000,
             "repl_p16": 500_000},
    "quick": {"xadd_p1": 20_000, "xadd_p16": 100_000, "stream": 100_000, "range_p1": 4_000,
              "range_p16": 10_000, "py_xadd": 30_000, "py_xread": 100_000, "group": 10_000,
              "http_records": 200_000, "sse": 20_000, "memory": 200_000,
              "tag_groups": 100, "read_records": 50_000, "queue_1": 10_000, "queue_100": 200_000, "wake": 300,
              "router_fwd": 50_000, "router_write": 100_000,
              "str_p1": 20_000, "str_p16": 100_000, "str_keys": 100_000, "str_memory": 200_000,
              "eval_p1": 20_000, "eval_p16": 100_000, "spark": 200_000,
              "brpop": 50_000, "list_memory": 200_000, "hash_memory": 20_000,
              "ckpt_keys": 100_000, "ckpt_elements": 1_000_000,
              "blocked_group": 2_000, "blocked_cpu": 1_000, "blocked_xadds": 500, "fanout": 3_000,
              "zset_memory": 200_000, "set_memory": 20_000, "rq_jobs": 500,
              "repl_p16": 100_000},
    "tiny": {"xadd_p1": 200, "xadd_p16": 1_600, "stream": 1_000, "range_p1": 100,
             "range_p16": 320, "py_xadd": 300, "py_xread": 1_000, "group": 200,
             "http_records": 2_000, "sse": 200, "memory": 2_000,
             "tag_groups": 4, "read_records": 2_000, "queue_1": 200, "queue_100": 2_000, "wake": 20,
             "router_fwd": 2_000, "router_write": 2_000,
             "str_p1": 200, "str_p16": 1_600, "str_keys": 1_000, "str_memory": 2_000,
             "eval_p1": 200, "eval_p16": 1_600, "spark": 2_000,
             "brpop": 500, "list_memory": 2_000, "hash_memory": 200,
             "ckpt_keys": 1_000, "ckpt_elements": 10_000,
             "blocked_group": 50, "blocked_cpu": 40, "blocked_xadds": 20, "fanout": 50,
             "zset_memory": 2_000, "set_memory": 200, "rq_jobs": 20,
             "repl_p16": 1_600},
}
