# SPDX-License-Identifier: Apache-2.0
"""What every rank script starts with: its rank, the world, and a "coll"
default group (plus a gloo group beside it) over a FileStore."""
import datetime
import json
import os
import sys
import warnings

import torch.distributed as dist

import coll.distributed  # noqa: F401  (registers the backend)


def init(timeout_s=60):
    # torch warns that the private calls tested here will be deprecated.
    warnings.simplefilter("ignore", UserWarning)
    rank, world, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    store = dist.FileStore(path, world)
    dist.init_process_group("coll", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return rank, world, store, sys.argv[4:]


def finish(result):
    """Prints the RESULT line and ends the process without Python's
    shutdown: torch 1.13's gloo worker threads may still free tensors then,
    which takes the GIL from a finalizing interpreter and aborts."""
    print("RESULT " + json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)
